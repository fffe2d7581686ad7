package load

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/simulation"
)

// zeroServer serves a simulation without latency under the model name "sim".
func zeroServer(t *testing.T, opts simulation.Options) *httptest.Server {
	t.Helper()
	opts.Profile, opts.Model = simulation.Zero(), "sim"
	srv := httptest.NewServer(simulation.NewHandler(opts))
	t.Cleanup(srv.Close)
	return srv
}

// countingServer serves h and counts the connections its clients open.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// reused reports whether a run's requests shared their connections: without reuse there is one
// per request; with it, about one per request in flight, and some more, because a connection goes
// back to the pool a moment after its response has been read and a request can open another
// meanwhile.
func reused(conns int64, res Result) bool { return conns*2 <= int64(res.Requests) }

func run(t *testing.T, o Options) Result {
	t.Helper()
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestPoissonScheduleHasTheMeanRateAndExponentialGaps(t *testing.T) {
	t.Parallel()
	const n, rate = 20_000, 50.0
	due := poissonSchedule(n, rate, 7)
	if due[0] != 0 || !slices.IsSorted(due) {
		t.Fatalf("schedule does not start at zero in order: %v ...", due[:5])
	}
	// n-1 exponential gaps: the rate's relative standard deviation is 1/sqrt(n-1), 0.7%.
	got := float64(n-1) / due[n-1].Seconds()
	if math.Abs(got-rate)/rate > 0.03 {
		t.Errorf("mean rate %.2f/s, want %g/s within 3%%", got, rate)
	}
	// Exponential gaps have a standard deviation equal to their mean, and 1 - 1/e of them fall
	// below the mean.
	var sum, sumSq float64
	below := 0
	for i := 1; i < n; i++ {
		g := (due[i] - due[i-1]).Seconds()
		sum, sumSq = sum+g, sumSq+g*g
		if g < 1/rate {
			below++
		}
	}
	m := sum / (n - 1)
	if cv := math.Sqrt(sumSq/(n-1)-m*m) / m; math.Abs(cv-1) > 0.05 {
		t.Errorf("coefficient of variation of the gaps %.3f, want 1 within 0.05", cv)
	}
	if f := float64(below) / (n - 1); math.Abs(f-(1-1/math.E)) > 0.02 {
		t.Errorf("%.3f of the gaps below the mean, want %.3f", f, 1-1/math.E)
	}
	if again := poissonSchedule(n, rate, 7); !slices.Equal(due, again) {
		t.Error("the same seed drew another schedule")
	}
	for _, r := range []float64{0, math.Inf(1)} {
		if due := poissonSchedule(5, r, 7); slices.ContainsFunc(due, func(d time.Duration) bool { return d != 0 }) {
			t.Errorf("rate %g: %v, want all at zero", r, due)
		}
	}
}

// fixedLatency streams chat completions that wait ttft for their first token and tpot between
// tokens, on a schedule from the request's arrival, as a GPU serving them would.
func fixedLatency(ttft, tpot time.Duration, tokens int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(data string) {
			fmt.Fprintf(w, "data: %s\n\n", data)
			_ = rc.Flush()
		}
		send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
		for k := range tokens {
			time.Sleep(time.Until(start.Add(ttft + time.Duration(k)*tpot)))
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":" w%d"}}]}`, k))
		}
		send(fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, tokens, tokens+5))
		send("[DONE]")
	}
}

// The tests of timing run alone (not in parallel), so that the other tests do not delay them.

func TestStreamingMeasuresTTFTAndTPOT(t *testing.T) {
	const ttft, tpot, tokens = 60 * time.Millisecond, 15 * time.Millisecond, 8
	srv, conns := countingServer(t, fixedLatency(ttft, tpot, tokens))
	res := run(t, Options{URL: srv.URL + "/v1", Model: "m", Rate: 100, Requests: 20, Concurrency: 4, Stream: true,
		MaxTokens: tokens})

	if res.Completed != 20 || res.Failed != 0 {
		t.Fatalf("%d ok, %d failed: %+v", res.Completed, res.Failed, res.Failures)
	}
	// Timers run late, never early: allow a few milliseconds above, none below.
	within := func(name string, got float64, want time.Duration, slack float64) {
		if w := ms(want); got < w-0.5 || got > w+slack {
			t.Errorf("%s %.2f ms, want %.0f ms (+%g)", name, got, w, slack)
		}
	}
	within("TTFT p50", res.TTFTP50Ms, ttft, 10)
	within("TTFT mean", res.TTFTMeanMs, ttft, 20)
	within("TPOT p50", res.TPOTP50Ms, tpot, 2)
	// The p99 of 20 requests is their second worst: one timer late on a busy machine moves it, so
	// it has the slack of a scheduler's delay; the p50 above holds the measure itself to 2 ms.
	within("TPOT p99", res.TPOTP99Ms, tpot, 10)
	within("latency p50", res.LatencyP50Ms, ttft+(tokens-1)*tpot, 15)
	if !(res.TTFTP50Ms <= res.TTFTP90Ms && res.TTFTP90Ms <= res.TTFTP99Ms && res.LatencyP99Ms <= res.LatencyMaxMs) {
		t.Errorf("percentiles out of order: %+v", res)
	}
	if res.InputTokens != 20*5 || res.OutputTokens != 20*tokens || res.WithoutUsage != 0 {
		t.Errorf("tokens %d in, %d out, %d without usage", res.InputTokens, res.OutputTokens, res.WithoutUsage)
	}
	if n := conns.Load(); !reused(n, res) {
		t.Errorf("%d connections for 20 requests, at most 4 in flight: streams do not reuse them", n)
	}
}

func TestStreamsOfASimulatedRigMeasureItsProfile(t *testing.T) {
	p, ok := simulation.Lookup("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "h100-pcie", 1)
	if !ok {
		t.Fatal("no H100 profile")
	}
	// Twice as fast as the rig: a TTFT of about 18 ms and a TPOT of about 10 ms at low load.
	srv := httptest.NewServer(simulation.NewHandler(simulation.Options{Profile: p, Speed: 2, Seed: 3}))
	defer srv.Close()
	res := run(t, Options{URL: srv.URL + "/v1", Rate: 20, Requests: 20, Stream: true, MaxTokens: 20, PromptTokens: 50})

	if res.Completed != 20 || res.Model != p.Model {
		t.Fatalf("%d ok of model %q: %+v", res.Completed, res.Model, res.Failures)
	}
	lo := p.Levels[0]
	if res.TTFTP50Ms < lo.TTFTP50Ms/2*0.5 || res.TTFTP50Ms > lo.TTFTP99Ms/2+10 {
		t.Errorf("TTFT p50 %.2f ms, want near the profile's %.2f ms / 2", res.TTFTP50Ms, lo.TTFTP50Ms)
	}
	if res.TPOTP50Ms < lo.TPOTP50Ms/2*0.5 || res.TPOTP50Ms > lo.TPOTP99Ms/2+2 {
		t.Errorf("TPOT p50 %.2f ms, want near the profile's %.2f ms / 2", res.TPOTP50Ms, lo.TPOTP50Ms)
	}
	// The simulation counts "user" and each word of the prompt as one token: the synthetic
	// prompt is as long as asked.
	if perRequest := float64(res.InputTokens) / 20; perRequest != 51 {
		t.Errorf("%.1f input tokens per request, want 50 and the role", perRequest)
	}
	if res.OutputTokens != 20*20 {
		t.Errorf("%d output tokens, want 400", res.OutputTokens)
	}
}

func TestNonStreamingKeepsTheRate(t *testing.T) {
	srv, conns := countingServer(t, simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: "sim"}))
	res := run(t, Options{URL: srv.URL + "/v1", Model: "sim", Rate: 500, Requests: 500, MaxTokens: 4, PromptTokens: 8})

	if res.Completed != 500 || res.Failed != 0 {
		t.Fatalf("%d ok, %d failed: %+v", res.Completed, res.Failed, res.Failures)
	}
	if math.Abs(res.SendRate-500)/500 > 0.15 {
		t.Errorf("sent at %.1f/s, want 500/s within 15%%", res.SendRate)
	}
	if res.TTFTP50Ms != 0 || res.TPOTP50Ms != 0 || res.LatencyP50Ms <= 0 || res.LatencyMaxMs < res.LatencyP99Ms {
		t.Errorf("non-streaming figures: TTFT %g, TPOT %g, latency p50 %g p99 %g max %g",
			res.TTFTP50Ms, res.TPOTP50Ms, res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs)
	}
	if n := conns.Load(); !reused(n, res) {
		t.Errorf("%d connections for 500 requests, at most %d in flight: they are not reused", n, res.MaxInFlight)
	}
	if res.OutputTokens != 500*4 || res.InputTokens != 500*9 {
		t.Errorf("tokens %d in, %d out; want 4500 in, 2000 out", res.InputTokens, res.OutputTokens)
	}
	if got := res.InputTPS + res.OutputTPS; math.Abs(got-res.TotalTPS) > 1e-9 || res.ReqS <= 0 {
		t.Errorf("throughput %g req/s, %g + %g != %g tokens/s", res.ReqS, res.InputTPS, res.OutputTPS, res.TotalTPS)
	}
}

func TestFailuresAreCountedByStatus(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	byTurn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 4 {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":null}}`)
		case 2:
			http.Error(w, "no offering can serve", http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`)
		}
	}))
	defer byTurn.Close()
	res := run(t, Options{URL: byTurn.URL, Model: "m", Requests: 40})
	if res.Completed != 20 || res.Failed != 20 {
		t.Errorf("%d ok, %d failed; want 20 and 20", res.Completed, res.Failed)
	}
	want := []Failure{
		{Kind: "429", Count: 10, Example: "429 Too Many Requests: Rate limit reached"},
		{Kind: "503", Count: 10, Example: "503 Service Unavailable: no offering can serve"},
	}
	if !slices.Equal(res.Failures, want) {
		t.Errorf("failures %+v, want %+v", res.Failures, want)
	}

	flaky := zeroServer(t, simulation.Options{FailRate: 0.3, Seed: 5})
	res = run(t, Options{URL: flaky.URL + "/v1", Model: "sim", Requests: 100, Concurrency: 10, Stream: true, MaxTokens: 2})
	if len(res.Failures) != 1 || res.Failures[0].Kind != "500" || res.Failures[0].Count != res.Failed ||
		res.Completed+res.Failed != 100 || res.Failed < 10 || res.Failed > 50 {
		t.Errorf("fail rate 0.3: %d ok, %d failed: %+v", res.Completed, res.Failed, res.Failures)
	}
	if res.LatencyMaxMs == 0 || res.TTFTP50Ms == 0 {
		t.Error("failures hid the successes' latencies")
	}
}

func TestFailuresWithoutAStatusHaveTheirKind(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	stream := func(frames ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for _, f := range frames {
				fmt.Fprintf(w, "data: %s\n\n", f)
			}
		}
	}
	cases := []struct {
		name    string
		url     string
		handler http.Handler
		stream  bool
		timeout time.Duration
		kind    string
	}{
		{name: "refused", url: gone.URL, kind: "connection"},
		{name: "slow", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}), timeout: 200 * time.Millisecond, kind: "timeout"},
		{name: "cut", stream: true, handler: stream(`{"choices":[{"delta":{"content":"a"}}]}`), kind: "incomplete"},
		{name: "empty", stream: true, handler: stream(`{"choices":[{"delta":{"content":""}}]}`, "[DONE]"), kind: "no content"},
		{name: "error event", stream: true, handler: stream(`{"error":{"message":"out of memory"}}`), kind: "stream error"},
		{name: "not json", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<html>")
		}), kind: "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.handler != nil {
				srv := httptest.NewServer(c.handler)
				defer srv.Close()
				c.url = srv.URL
			}
			res := run(t, Options{URL: c.url, Model: "m", Requests: 3, Stream: c.stream, Timeout: c.timeout})
			if res.Failed != 3 || len(res.Failures) != 1 || res.Failures[0].Kind != c.kind || res.Failures[0].Example == "" {
				t.Errorf("%d failed: %+v; want 3 of kind %q with an example", res.Failed, res.Failures, c.kind)
			}
		})
	}
}

func TestConcurrencyCapHoldsArrivalsBack(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		fmt.Fprint(w, `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	res := run(t, Options{URL: srv.URL, Model: "m", Rate: 1000, Requests: 30, Concurrency: 3})
	if res.Completed != 30 || peak.Load() != 3 || res.MaxInFlight != 3 {
		t.Errorf("%d ok, server saw %d at once, client %d; want 30, 3, 3", res.Completed, peak.Load(), res.MaxInFlight)
	}
	if res.LagMaxMs < 100 || !strings.Contains(res.Note, "concurrency cap of 3 held arrivals back") {
		t.Errorf("lag max %.1f ms, note %q: the cap's delay is not visible", res.LagMaxMs, res.Note)
	}
}

func TestRequestsCarryKeyHeadersAndTheDiscoveredModel(t *testing.T) {
	t.Parallel()
	sim := simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: "served"})
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-GPUMarket-Tier")]++
		mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	defer srv.Close()
	res := run(t, Options{URL: srv.URL + "/v1/", APIKey: "gm-key", Endpoint: EndpointCompletions, Requests: 5,
		Stream: true, MaxTokens: 3, Prompts: []string{"one two", "three"},
		Header: http.Header{"x-gpumarket-tier": {"batch"}}})

	if res.Completed != 5 || res.Model != "served" || res.URL != srv.URL+"/v1/completions" {
		t.Fatalf("%d ok, model %q, url %s: %+v", res.Completed, res.Model, res.URL, res.Failures)
	}
	want := map[string]int{
		"GET /v1/models Bearer gm-key batch":       1,
		"POST /v1/completions Bearer gm-key batch": 5,
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("requests %v, want %v", seen, want)
	}
	// The prompts in turn: 2, 1, 2, 1, 2 tokens.
	if res.InputTokens != 8 || res.PromptTokens != 0 {
		t.Errorf("%d input tokens, prompt_tokens %d; want 8 and 0", res.InputTokens, res.PromptTokens)
	}
}

func TestStoppingEndsTheRunWithWhatItMeasured(t *testing.T) {
	t.Parallel()
	srv := zeroServer(t, simulation.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Options{URL: srv.URL + "/v1", Model: "sim", Rate: 100, Requests: 1000, MaxTokens: 2})
	if err == nil || res.Requests != 1000 || res.Sent == 0 || res.Sent > 100 || res.Completed+res.Failed != res.Sent {
		t.Errorf("stopped run: %v; sent %d, %d ok, %d failed", err, res.Sent, res.Completed, res.Failed)
	}
}

func TestCostPerMillionIsThePapersFormula(t *testing.T) {
	t.Parallel()
	// 4x RTX 4090 at 8 requests/s: $1.00 an hour, 1858.57 tokens/s of which 926.47 output,
	// $0.1495 per million tokens and $0.2998 per million output tokens in the benchmark's table.
	for _, c := range []struct{ usdPerHour, tps, want float64 }{
		{1.0, 1858.57, 0.1495}, {1.0, 926.47, 0.2998}, {2.0, 433.76, 1.2808}, {1.0, 0, 0},
	} {
		if got := CostPerMillion(c.usdPerHour, c.tps); math.Round(got*1e4)/1e4 != c.want {
			t.Errorf("CostPerMillion(%g, %g) = %.5f, want %.4f", c.usdPerHour, c.tps, got, c.want)
		}
	}

	srv := zeroServer(t, simulation.Options{})
	res := run(t, Options{URL: srv.URL + "/v1", Model: "sim", Requests: 50, MaxTokens: 8, PromptTokens: 8, USDPerHour: 2})
	if res.USDPerMTotal != CostPerMillion(2, res.TotalTPS) || res.USDPerMOutput != CostPerMillion(2, res.OutputTPS) ||
		res.USDPerMTotal <= 0 || math.Abs(res.CostRunUSD-2*res.DurationS/3600) > 1e-12 {
		t.Errorf("costs %+v", res)
	}
}

func TestPercentilesInterpolateAsNumpy(t *testing.T) {
	t.Parallel()
	p50, p99, p100 := percentiles([]float64{5, 1, 4, 2, 3}, 50, 99, 100)
	if p50 != 3 || math.Abs(p99-4.96) > 1e-12 || p100 != 5 {
		t.Errorf("p50 %g p99 %g p100 %g; want 3, 4.96, 5", p50, p99, p100)
	}
}

func TestResultJSONHasEveryField(t *testing.T) {
	t.Parallel()
	srv := zeroServer(t, simulation.Options{})
	res := run(t, Options{URL: srv.URL + "/v1", Model: "sim", Rate: 500, Requests: 20, Stream: true, MaxTokens: 4,
		PromptTokens: 8, USDPerHour: 0.25})
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"method", "loadgen_version", "base_url", "offering", "given_prompts", "seed", "timeout_s",
		"from_offering", "not_from_offering",
		"url", "endpoint", "model", "stream", "rate", "requests", "max_concurrency", "max_tokens", "prompt_tokens",
		"usd_per_h", "started_at", "sent", "completed", "failed", "failures", "duration_s", "req_s", "in_tok",
		"out_tok", "without_usage", "in_tps", "out_tps", "total_tps", "send_rate", "lag_p50_ms", "lag_p99_ms",
		"lag_max_ms", "max_in_flight", "ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms",
		"tpot_p99_ms", "latency_mean_ms", "latency_p50_ms", "latency_p99_ms", "latency_max_ms", "cost_run",
		"usd_per_M_total", "usd_per_M_output", "note",
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("JSON fields\n%v\nwant\n%v", keys, want)
	}
	for _, k := range []string{"completed", "req_s", "total_tps", "ttft_p50_ms", "latency_p99_ms", "usd_per_M_total", "send_rate"} {
		if v, _ := got[k].(float64); v <= 0 {
			t.Errorf("%s = %v, want a measured figure", k, got[k])
		}
	}
	if got["failures"] == nil || got["rate"] != 500.0 || got["stream"] != true {
		t.Errorf("failures %v, rate %v, stream %v", got["failures"], got["rate"], got["stream"])
	}

	// All at once: the rate is 0 (JSON has no infinity), and the result still encodes.
	res = run(t, Options{URL: srv.URL + "/v1", Model: "sim", Rate: math.Inf(1), Requests: 5})
	if _, err := json.Marshal(res); err != nil || res.Rate != 0 {
		t.Errorf("all at once: rate %g, %v", res.Rate, err)
	}
}

func TestOptionsAreValidated(t *testing.T) {
	t.Parallel()
	ok := Options{URL: "http://127.0.0.1:1/v1", Requests: 1}
	for name, change := range map[string]func(*Options){
		"no URL":         func(o *Options) { o.URL = "" },
		"not http":       func(o *Options) { o.URL = "ftp://host/v1" },
		"no host":        func(o *Options) { o.URL = "http:///v1" },
		"endpoint":       func(o *Options) { o.Endpoint = "embeddings" },
		"negative rate":  func(o *Options) { o.Rate = -1 },
		"NaN rate":       func(o *Options) { o.Rate = math.NaN() },
		"no requests":    func(o *Options) { o.Requests = 0 },
		"negative cap":   func(o *Options) { o.Concurrency = -1 },
		"negative price": func(o *Options) { o.USDPerHour = -2 },
		"negative limit": func(o *Options) { o.Timeout = -time.Second },
	} {
		o := ok
		change(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: Run accepted", name)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
}

// Merge makes one result of runs back to back: every request counted, the percentiles of them
// all, the throughput over the sum of their durations, and the sending rate as if there were no
// gap between them.
func TestMergeIsTheRunsBackToBack(t *testing.T) {
	var slow atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(20 * time.Millisecond)
		}
		simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: "sim"}).ServeHTTP(w, r)
	}))
	defer srv.Close()
	o := Options{URL: srv.URL + "/v1", Model: "sim", Rate: 400, Requests: 200, MaxTokens: 4, PromptTokens: 8}
	fast := run(t, o)
	slow.Store(true)
	o.Seed = 1
	slowRes := run(t, o)
	m := Merge([]Result{fast, slowRes})
	if m.Requests != 400 || m.Sent != 400 || m.Completed != 400 || m.Failed != 0 {
		t.Fatalf("merged %d requests, %d sent, %d ok, %d failed; want 400 of each sent and ok", m.Requests, m.Sent, m.Completed, m.Failed)
	}
	if d := fast.DurationS + slowRes.DurationS; math.Abs(m.DurationS-d) > 1e-9 || math.Abs(m.ReqS-400/d) > 1e-6 {
		t.Errorf("merged %g s at %g req/s, want %g s at %g", m.DurationS, m.ReqS, d, 400/d)
	}
	// Half the requests took 20 ms more: the median lies between the two runs', the maximum is
	// the slow run's.
	if m.LatencyP50Ms < fast.LatencyP50Ms || m.LatencyP50Ms > slowRes.LatencyP50Ms || m.LatencyMaxMs != max(fast.LatencyMaxMs, slowRes.LatencyMaxMs) {
		t.Errorf("merged p50 %g max %g from p50s %g and %g, maxima %g and %g", m.LatencyP50Ms, m.LatencyMaxMs,
			fast.LatencyP50Ms, slowRes.LatencyP50Ms, fast.LatencyMaxMs, slowRes.LatencyMaxMs)
	}
	if math.Abs(m.SendRate-400)/400 > 0.2 {
		t.Errorf("merged send rate %g/s, want about the 400/s each run kept", m.SendRate)
	}
	if one := Merge([]Result{fast}); one.LatencyP50Ms != fast.LatencyP50Ms || one.LatencyP99Ms != fast.LatencyP99Ms || one.ReqS != fast.ReqS {
		t.Errorf("one run merged: %+v, want the run itself %+v", one, fast)
	}
}
