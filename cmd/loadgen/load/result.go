package load

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Result is what a run measured. Latencies are milliseconds and rates per second, as the
// benchmark reports them; its JSON names follow the benchmark's table (req_s, total_tps,
// usd_per_M_total, ...). Figures a run could not measure are zero: TTFT and TPOT without
// streaming, costs without a price, every latency when no request succeeded.
type Result struct {
	// How it was measured: the method (Method) and the build of loadgen that ran it.
	Method  string `json:"method"`
	Version string `json:"loadgen_version"`

	// What was asked.
	URL          string   `json:"url"`      // the endpoint called, path included
	BaseURL      string   `json:"base_url"` // the API's base URL, as given: the gateway's /v1 through the platform
	Offering     string   `json:"offering"` // the offering every request was pinned to; "" for none
	Endpoint     Endpoint `json:"endpoint"`
	Model        string   `json:"model"`
	Stream       bool     `json:"stream"`
	Rate         float64  `json:"rate"` // Poisson arrivals per second; 0 when all were sent at once
	Requests     int      `json:"requests"`
	Concurrency  int      `json:"max_concurrency"` // 0 for no cap
	MaxTokens    int      `json:"max_tokens"`
	PromptTokens int      `json:"prompt_tokens"` // of synthetic prompts; 0 when prompts were given
	Prompts      int      `json:"given_prompts"` // prompts given (-prompts); 0 for synthetic ones
	Seed         uint64   `json:"seed"`
	TimeoutS     float64  `json:"timeout_s"` // bound on each request; 0 for none
	// Headers are those added to every request; a value that may be a secret is not written.
	Headers    map[string]string `json:"headers,omitempty"`
	USDPerHour float64           `json:"usd_per_h"`
	StartedAt  time.Time         `json:"started_at"`

	// What happened.
	Sent      int       `json:"sent"` // fewer than Requests only when the run was stopped
	Completed int       `json:"completed"`
	Failed    int       `json:"failed"`
	Failures  []Failure `json:"failures"` // by kind, most frequent first
	DurationS float64   `json:"duration_s"`
	// With a pinned offering: the answers that said they came from it (the successes), and
	// those that did not, which are failures of kind "other offering".
	FromOffering    int `json:"from_offering"`
	NotFromOffering int `json:"not_from_offering"`

	// Throughput over the whole duration, of successful requests.
	ReqS         float64 `json:"req_s"`
	InputTokens  int64   `json:"in_tok"`
	OutputTokens int64   `json:"out_tok"`
	WithoutUsage int     `json:"without_usage"` // successes whose tokens the endpoint did not report
	InputTPS     float64 `json:"in_tps"`
	OutputTPS    float64 `json:"out_tps"`
	TotalTPS     float64 `json:"total_tps"`

	// The client: how it kept to its schedule.
	SendRate    float64 `json:"send_rate"` // requests sent per second from the first to the last
	LagP50Ms    float64 `json:"lag_p50_ms"`
	LagP99Ms    float64 `json:"lag_p99_ms"`
	LagMaxMs    float64 `json:"lag_max_ms"`
	MaxInFlight int     `json:"max_in_flight"`

	// Latencies of successful requests.
	TTFTMeanMs    float64 `json:"ttft_mean_ms"`
	TTFTP50Ms     float64 `json:"ttft_p50_ms"`
	TTFTP90Ms     float64 `json:"ttft_p90_ms"`
	TTFTP99Ms     float64 `json:"ttft_p99_ms"`
	TPOTP50Ms     float64 `json:"tpot_p50_ms"`
	TPOTP99Ms     float64 `json:"tpot_p99_ms"`
	LatencyMeanMs float64 `json:"latency_mean_ms"`
	LatencyP50Ms  float64 `json:"latency_p50_ms"`
	LatencyP99Ms  float64 `json:"latency_p99_ms"`
	LatencyMaxMs  float64 `json:"latency_max_ms"`

	// Costs at USDPerHour, by the paper's formula (CostPerMillion).
	CostRunUSD    float64 `json:"cost_run"`
	USDPerMTotal  float64 `json:"usd_per_M_total"`
	USDPerMOutput float64 `json:"usd_per_M_output"`
	// What the tokens cost a customer of the platform, with a pinned offering whose price the
	// catalog publishes; nil otherwise.
	Platform *PlatformCost `json:"platform_cost,omitempty"`

	Note string `json:"note"` // what the figures include, and whether the client held the rate

	// What Merge needs of the run: its options, every request's sample, and the pinned offering.
	opts     Options
	samples  []sample
	listed   *listedOffering
	unlisted string
}

// Failure counts the failed requests of one kind: an HTTP status ("500", "429", ...),
// "timeout", "canceled", "connection", "incomplete", "no content", "stream error" or
// "malformed".
type Failure struct {
	Kind    string `json:"kind"`
	Count   int    `json:"count"`
	Example string `json:"example"` // the first one's message
}

// CostPerMillion is the paper's cost per million tokens: the hourly price over the tokens
// served in an hour, usd_per_h * 1e6 / (3600 * tokens_per_second). It is zero when nothing was
// served.
func CostPerMillion(usdPerHour, tokensPerSecond float64) float64 {
	if !(tokensPerSecond > 0) {
		return 0
	}
	return usdPerHour * 1e6 / (3600 * tokensPerSecond)
}

// lateLag is the scheduling lag at the 99th percentile above which the note says the client
// did not keep to its schedule: well above the timers' granularity (about a millisecond) and the
// hiccups of a busy machine.
const lateLag = 10 * time.Millisecond

// result sums up the samples of a finished run.
func (r *runner) result(startedAt time.Time, duration time.Duration) Result {
	o := r.opts
	res := Result{
		Method: Method, Version: Version(), URL: r.url, BaseURL: o.URL, Offering: o.Offering,
		Endpoint: o.Endpoint, Model: o.Model, Stream: o.Stream, Requests: o.Requests,
		Concurrency: o.Concurrency, MaxTokens: o.MaxTokens, Prompts: len(o.Prompts), Seed: o.Seed,
		TimeoutS: o.Timeout.Seconds(), Headers: writtenHeaders(o.Header), USDPerHour: o.USDPerHour,
		StartedAt: startedAt.UTC(), DurationS: duration.Seconds(),
		Sent: int(r.sent.Load()), Completed: int(r.completed.Load()), Failed: int(r.failed.Load()),
		MaxInFlight: int(r.maxInFlight.Load()),
		Failures:    []Failure{},
	}
	if !o.allAtOnce() {
		res.Rate = o.Rate
	}
	if len(o.Prompts) == 0 {
		res.PromptTokens = o.PromptTokens
	}
	for _, f := range r.failures {
		res.Failures = append(res.Failures, *f)
	}
	if o.Offering != "" {
		res.FromOffering = res.Completed
		if f := r.failures[failOtherOffering]; f != nil {
			res.NotFromOffering = f.Count
		}
	}
	slices.SortFunc(res.Failures, func(a, b Failure) int { return cmp.Or(b.Count-a.Count, strings.Compare(a.Kind, b.Kind)) })

	var lags, ttfts, tpots, latencies []float64
	var firstSent, lastSent time.Duration = math.MaxInt64, 0
	for _, s := range r.samples {
		if !s.wasSent {
			continue // the run was stopped first
		}
		lags = append(lags, ms(s.lag))
		firstSent, lastSent = min(firstSent, s.sent), max(lastSent, s.sent)
		if !s.ok {
			continue
		}
		latencies = append(latencies, ms(s.latency))
		res.InputTokens += int64(s.inTokens)
		res.OutputTokens += int64(s.outTokens)
		if !s.usage {
			res.WithoutUsage++
		}
		if o.Stream {
			ttfts = append(ttfts, ms(s.ttft))
			if s.outTokens > 1 {
				tpots = append(tpots, ms(s.tpot))
			}
		}
	}
	if len(lags) > 1 && lastSent > firstSent {
		res.SendRate = float64(len(lags)-1) / (lastSent - firstSent).Seconds()
	}
	if secs := duration.Seconds(); secs > 0 {
		res.ReqS = float64(res.Completed) / secs
		res.InputTPS = float64(res.InputTokens) / secs
		res.OutputTPS = float64(res.OutputTokens) / secs
		res.TotalTPS = res.InputTPS + res.OutputTPS
	}
	res.LagP50Ms, res.LagP99Ms, res.LagMaxMs = percentiles(lags, 50, 99, 100)
	res.TTFTP50Ms, res.TTFTP90Ms, res.TTFTP99Ms = percentiles(ttfts, 50, 90, 99)
	res.TTFTMeanMs = mean(ttfts)
	res.TPOTP50Ms, res.TPOTP99Ms, _ = percentiles(tpots, 50, 99, 99)
	res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = percentiles(latencies, 50, 99, 100)
	res.LatencyMeanMs = mean(latencies)

	res.CostRunUSD = o.USDPerHour * duration.Hours()
	res.USDPerMTotal = CostPerMillion(o.USDPerHour, res.TotalTPS)
	res.USDPerMOutput = CostPerMillion(o.USDPerHour, res.OutputTPS)
	res.Platform = platformCost(r.listed, r.samples)
	res.opts, res.samples, res.listed, res.unlisted = o, r.samples, r.listed, r.unlisted
	res.Note = res.note()
	return res
}

// Merge is one Result of several runs with the same options, as if they had been one run of
// them all back to back: segments of one measurement, interleaved with another's so that both
// meet the same conditions of the machine. Its percentiles are of every request of them all, its
// throughput their requests over the sum of their durations. The first run's options and start
// stand for them all.
func Merge(runs []Result) Result {
	if len(runs) == 0 {
		return Result{}
	}
	r := &runner{opts: runs[0].opts, url: runs[0].URL, failures: map[string]*Failure{}, listed: runs[0].listed,
		unlisted: runs[0].unlisted}
	var total time.Duration
	requests := 0
	for _, run := range runs {
		offset := total
		for _, s := range run.samples {
			s.sent += offset // back to back: each run starts where the last ended
			r.samples = append(r.samples, s)
		}
		r.sent.Add(int64(run.Sent))
		r.completed.Add(int64(run.Completed))
		r.failed.Add(int64(run.Failed))
		r.maxInFlight.Store(max(r.maxInFlight.Load(), int64(run.MaxInFlight)))
		for _, f := range run.Failures {
			if had := r.failures[f.Kind]; had != nil {
				had.Count += f.Count
			} else {
				f := f
				r.failures[f.Kind] = &f
			}
		}
		total += time.Duration(run.DurationS * float64(time.Second))
		requests += run.Requests
	}
	r.opts.Requests = requests
	return r.result(runs[0].StartedAt, total)
}

// note says what the figures include and whether the client held the schedule.
func (r Result) note() string {
	notes := []string{"Latencies are measured at this client and include its own HTTP and JSON work."}
	lag := fmt.Sprintf("arrivals were sent %.2f ms after they were due at the 99th percentile", r.LagP99Ms)
	switch {
	case r.Rate == 0 && r.Concurrency > 0:
		notes = append(notes, fmt.Sprintf("All requests were released at once, %d at a time.", r.Concurrency))
	case r.Rate == 0:
		notes = append(notes, "All requests were released at once.")
	case r.LagP99Ms <= ms(lateLag):
		notes = append(notes, fmt.Sprintf("The client kept to the Poisson schedule: %s.", lag))
	case r.Concurrency > 0 && r.MaxInFlight >= r.Concurrency:
		notes = append(notes, fmt.Sprintf("The concurrency cap of %d held arrivals back: %s, so the cap, "+
			"not the rate, set the load.", r.Concurrency, lag))
	default:
		notes = append(notes, fmt.Sprintf("The client fell behind its schedule: %s (sent at %.1f/s for %g/s asked), "+
			"so it, not the endpoint, limited the load; lower the rate or use a faster client machine.",
			lag, r.SendRate, r.Rate))
	}
	if r.Offering != "" {
		notes = append(notes, fmt.Sprintf("Every request was pinned to offering %s; %d answers came from it and %d did not "+
			"(those are failures, in no figure).", r.Offering, r.FromOffering, r.NotFromOffering))
	}
	if r.unlisted != "" {
		notes = append(notes, "The platform's cost is not computed: "+r.unlisted+".")
	}
	if r.Platform != nil {
		notes = append(notes, "The platform's cost is each answer's usage at the price the catalog publishes for the "+
			"offering's tier, as the meter charges it: computed, not read from an invoice.")
	}
	if r.WithoutUsage > 0 {
		notes = append(notes, fmt.Sprintf("%d responses reported no usage: their input tokens are not counted, "+
			"and their output tokens are their content chunks.", r.WithoutUsage))
	}
	return strings.Join(notes, " ")
}

// writtenHeaders are the added headers as the result writes them: the value of one whose name
// suggests a credential (Authorization, an API key, a token, a cookie) is not written.
func writtenHeaders(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, vs := range h {
		name := strings.ToLower(k)
		if strings.Contains(name, "auth") || strings.Contains(name, "key") || strings.Contains(name, "token") ||
			strings.Contains(name, "cookie") || strings.Contains(name, "secret") {
			out[k] = "(not written)"
			continue
		}
		out[k] = strings.Join(vs, ", ")
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// percentiles sorts xs and returns three of its percentiles, interpolated linearly between the
// closest ranks as numpy (and so benchmark_serving) computes them; zeros when xs is empty.
func percentiles(xs []float64, p, q, r float64) (float64, float64, float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	return percentile(xs, p), percentile(xs, q), percentile(xs, r)
}

// percentile is the p-th percentile of sorted xs.
func percentile(sorted []float64, p float64) float64 {
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(rank)
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (rank-float64(lo))*(sorted[lo+1]-sorted[lo])
}
