package reliability

// Record is an offering's reliability record as the public catalog, its API and the provider's performance
// page show it; each figure is null until it rests on WarmUp requests, with the number it rests on beside it.
type Record struct {
	Window
	// Requests is what the uptime rests on, successes plus errors in the day; RateLimited, Refused and Canceled
	// are counted apart.
	Requests      int64    `json:"requests"`
	Successes     int64    `json:"successes"`
	Errors        int64    `json:"errors"`
	RateLimited   int64    `json:"rate_limited"`
	Refused       int64    `json:"refused"`
	Canceled      int64    `json:"canceled"`
	UptimePercent *float64 `json:"uptime_percent"`
	// Standing is where routing places the offering: "preferred", "degraded" or "fallback".
	Standing string `json:"standing"`
	// TTFTRequests and TTFTMs: the streamed successes of the half hour and their times to first token;
	// TPSRequests and OutputTokensPerSec: those of them with a throughput, and its percentiles.
	TTFTRequests       int64        `json:"ttft_requests"`
	TTFTMs             *Percentiles `json:"ttft_ms"`
	TPSRequests        int64        `json:"throughput_requests"`
	OutputTokensPerSec *Percentiles `json:"output_tokens_per_second"`
}

// RecordOf is the record of counts over a window: the figures below the warm-up left out.
func RecordOf(c Counts, w Window) Record {
	r := Record{Window: w, Requests: c.Requests(), Successes: c.Successes, Errors: c.Errors, RateLimited: c.RateLimited,
		Refused: c.Refused, Canceled: c.Canceled, Standing: c.Standing().String(),
		TTFTRequests: c.TTFTSamples, TPSRequests: c.TPSSamples}
	if u, ok := c.Uptime(); ok {
		r.UptimePercent = &u
	}
	if c.TTFTSamples >= WarmUp {
		r.TTFTMs = c.TTFTMs
	}
	if c.TPSSamples >= WarmUp {
		r.OutputTokensPerSec = c.TPS
	}
	return r
}
