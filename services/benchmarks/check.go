package benchmarks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/routing"
)

// Bounds of an attachable result.
const (
	// MaxResultBytes bounds a result: loadgen writes a few kilobytes.
	MaxResultBytes = 64 << 10
	// MinCompleted is the fewest answers a result's percentiles may rest on.
	MinCompleted = 10
	maxRequests  = 1_000_000
	maxRate      = 10_000     // requests per second
	maxTPS       = 10_000_000 // tokens per second
	maxDuration  = 7 * 24 * time.Hour
	// clockSkew is how far ahead of the platform's clock a run may seem to have ended, and how long
	// before its rig was listed it may seem to have started: the two machines' clocks differ.
	clockSkew = 5 * time.Minute
	// tolerance is the relative difference allowed between a figure and what the result's own
	// counts make of it: loadgen writes them from the same numbers, rounded only by JSON.
	tolerance = 0.01
)

// Methods are the loadgen methods (load.Method) whose results can be attached.
var Methods = []string{"gpumarket-loadgen/1"}

// result is what the platform reads of loadgen's JSON result (cmd/loadgen/load.Result).
type result struct {
	Method       string    `json:"method"`
	BaseURL      string    `json:"base_url"`
	Offering     string    `json:"offering"`
	Model        string    `json:"model"`
	Stream       bool      `json:"stream"`
	Rate         float64   `json:"rate"`
	Requests     int       `json:"requests"`
	StartedAt    time.Time `json:"started_at"`
	Sent         int       `json:"sent"`
	Completed    int       `json:"completed"`
	Failed       int       `json:"failed"`
	DurationS    float64   `json:"duration_s"`
	ReqS         float64   `json:"req_s"`
	InTok        int64     `json:"in_tok"`
	OutTok       int64     `json:"out_tok"`
	TotalTPS     float64   `json:"total_tps"`
	TTFTP50Ms    float64   `json:"ttft_p50_ms"`
	TTFTP90Ms    float64   `json:"ttft_p90_ms"`
	TTFTP99Ms    float64   `json:"ttft_p99_ms"`
	LatP50Ms     float64   `json:"latency_p50_ms"`
	FromOffering int       `json:"from_offering"`
}

// Check reads a loadgen result and holds it to the listing it is attached to: a result of a
// known method, of this offering and its model, streamed, with counts and figures that agree with
// each other and lie in plausible ranges, of a run that has ended by now. gatewayURL is the
// platform's gateway (…/v1): a run through another address is accepted and marked so. Every
// problem is reported at once, in the provider's words, under the field "result".
func Check(raw []byte, o catalog.Offering, gatewayURL string, now time.Time) (Benchmark, error) {
	invalid := func(msg string) error {
		return &services.Error{Code: services.CodeInvalid, Message: msg, Fields: map[string]string{"result": msg}}
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return Benchmark{}, invalid("Upload loadgen's JSON result, or paste it: the field is empty.")
	case len(raw) > MaxResultBytes:
		return Benchmark{}, invalid(fmt.Sprintf("The result is %d KB; loadgen's is a few KB, and at most %d KB is taken.",
			(len(raw)+1023)/1024, MaxResultBytes/1024))
	}
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		return Benchmark{}, invalid("This is not loadgen's JSON result (" + err.Error() + "): attach the file loadgen -json FILE wrote, as it is.")
	}
	if !knownMethod(r.Method) {
		return Benchmark{}, invalid(fmt.Sprintf("This is not a result of gpumarket's loadgen of a known method (its method is %q, want %s): "+
			"run loadgen -offering %s -json FILE and attach FILE.", r.Method, strings.Join(Methods, " or "), o.ID))
	}

	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch {
	case r.Offering == "":
		add("The run was not pinned to an offering: run loadgen with -offering %s, so that this rig serves every request.", o.ID)
	case r.Offering != o.ID:
		add("This result measured offering %s, not this rig's (%s): attach it to that rig, or run loadgen with -offering %s.",
			r.Offering, o.ID, o.ID)
	}
	if model, _ := routing.SplitModelTier(r.Model); model != o.Model {
		add("This result measured model %q; this rig serves %q.", r.Model, o.Model)
	}
	if r.BaseURL == "" {
		add("The result does not say which API the run called (base_url).")
	}
	if !r.Stream {
		add("The run did not stream (-stream=false), so it has no time to first token: run it streaming, as loadgen does by default.")
	}

	// The counts.
	switch {
	case r.Requests < 1 || r.Requests > maxRequests:
		add("The run asked for %d requests; a result is taken for 1 to %d.", r.Requests, maxRequests)
	case r.Completed < MinCompleted:
		add("Only %d requests succeeded; percentiles over fewer than %d say little: run more (the benchmark sent 200).", r.Completed, MinCompleted)
	case r.Failed < 0 || r.Completed+r.Failed > r.Sent || r.Sent > r.Requests:
		add("The counts do not add up: %d succeeded and %d failed of %d sent, of %d asked.", r.Completed, r.Failed, r.Sent, r.Requests)
	case r.Offering != "" && r.FromOffering != r.Completed:
		add("%d answers came from the offering, but %d succeeded: a result of this method has them equal.", r.FromOffering, r.Completed)
	}
	if !finite(r.Rate, r.DurationS, r.ReqS, r.TotalTPS, r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms, r.LatP50Ms) {
		add("A figure is not a number.")
	} else {
		duration := time.Duration(r.DurationS * float64(time.Second))
		const eps = 1e-9
		switch {
		case r.Rate < 0 || r.Rate > maxRate:
			add("The rate of %g requests per second is outside 0 to %d.", r.Rate, maxRate)
		case r.DurationS <= 0 || duration > maxDuration:
			add("The run lasted %g s; a result is taken of a run up to a week long.", r.DurationS)
		case r.TTFTP50Ms <= 0 || r.TTFTP50Ms > r.TTFTP90Ms+eps || r.TTFTP90Ms > r.TTFTP99Ms+eps || r.TTFTP50Ms > r.LatP50Ms+eps:
			add("The times to first token are not in order (p50 %g ms, p90 %g ms, p99 %g ms, latency p50 %g ms).",
				r.TTFTP50Ms, r.TTFTP90Ms, r.TTFTP99Ms, r.LatP50Ms)
		case r.TotalTPS <= 0 || r.TotalTPS > maxTPS:
			add("A throughput of %g tokens per second is outside what a rig serves.", r.TotalTPS)
		case !near(r.TotalTPS, float64(r.InTok+r.OutTok)/r.DurationS) || !near(r.ReqS, float64(r.Completed)/r.DurationS):
			add("The throughput (%g tokens/s, %g requests/s) is not what the run's tokens and answers over its %g s make.",
				r.TotalTPS, r.ReqS, r.DurationS)
		}
		end := r.StartedAt.Add(duration)
		switch {
		case r.StartedAt.IsZero():
			add("The result does not say when the run started.")
		case end.After(now.Add(clockSkew)):
			add("The run is dated %s, in the future: check the clock of the machine that ran it.", end.UTC().Format(time.RFC3339))
		case r.Offering == o.ID && r.StartedAt.Before(o.CreatedAt.Add(-clockSkew)):
			add("The run started %s, before this rig was listed: measure the listing as it is.", r.StartedAt.UTC().Format(time.RFC3339))
		}
	}
	if len(problems) > 0 {
		return Benchmark{}, invalid(strings.Join(problems, " "))
	}

	return Benchmark{
		OfferingID: o.ID, ProviderAccountID: o.ProviderAccountID, StartedAt: r.StartedAt.UTC(), Method: r.Method,
		Model: r.Model, BaseURL: r.BaseURL, ThroughGateway: sameAPI(r.BaseURL, gatewayURL), Rate: r.Rate, Requests: r.Requests,
		Completed: r.Completed, TTFTP50Ms: r.TTFTP50Ms, TTFTP99Ms: r.TTFTP99Ms, TotalTPS: r.TotalTPS, Result: string(raw),
	}, nil
}

func knownMethod(m string) bool {
	for _, k := range Methods {
		if m == k {
			return true
		}
	}
	return false
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// near reports whether a figure is within tolerance of what it should be.
func near(got, want float64) bool {
	return math.Abs(got-want) <= tolerance*math.Max(math.Abs(want), 1e-9)
}

// sameAPI reports whether two base URLs are the same API: the same scheme, host and path, with
// case and a trailing slash aside.
func sameAPI(a, b string) bool {
	ua, err1 := url.Parse(strings.TrimRight(a, "/"))
	ub, err2 := url.Parse(strings.TrimRight(b, "/"))
	return err1 == nil && err2 == nil && b != "" && strings.EqualFold(ua.Scheme, ub.Scheme) &&
		strings.EqualFold(ua.Host, ub.Host) && ua.Path == ub.Path
}
