package routing

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

func TestFiguresAreExactPercentilesOverTheWindow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n             int
		wantP50, want float64
	}{{1, 1, 1}, {2, 1, 2}, {100, 50, 99}, {101, 51, 100}, {1000, 500, 990}}
	for _, c := range cases {
		b := setup(t)
		for i := c.n; i >= 1; i-- { // out of order: the window sorts
			b.r.Observe("o", Observation{TTFT: millis(float64(i)), Streamed: true, Status: usage.StatusOK})
		}
		f := b.r.Figures("o")
		if f.Requests != c.n || f.TTFTP50Ms != c.wantP50 || f.TTFTP99Ms != c.want {
			t.Errorf("%d requests of 1..%d ms: %+v; want P50 %g, P99 %g", c.n, c.n, f, c.wantP50, c.want)
		}
	}
}

func TestFailedRequestsAreCountedApartFromLatency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.observe("o", 10, 30)
	for range 5 {
		b.r.Observe("o", Observation{TTFT: millis(9000), Streamed: true, Duration: millis(9000), Status: usage.StatusError})
	}
	b.r.Observe("o", Observation{TTFT: millis(40), Streamed: true, Duration: millis(500), OutputTokens: 3, Status: usage.StatusCanceled})
	b.r.Observe("o", Observation{Duration: millis(500), Status: usage.StatusCanceled}) // no first token
	if f := b.r.Figures("o"); f.Requests != 11 || f.Errors != 5 || f.TTFTP99Ms != 40 {
		t.Fatalf("figures %+v; want 11 requests with a first token, 5 errors, P99 40 ms", f)
	}
}

// TestTokensPerSecondIsOverBusyTime: input plus output tokens over the time at least one request was in flight,
// so that idle time between requests does not dilute the rig's throughput and overlapping requests add up.
func TestTokensPerSecondIsOverBusyTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	end := b.clock.Now()
	obs := func(at time.Time, d time.Duration, in, out int64) {
		b.r.Observe("o", Observation{At: at, TTFT: 50 * time.Millisecond, Streamed: true, Duration: d, InputTokens: in, OutputTokens: out, Status: usage.StatusOK})
	}
	obs(end.Add(-60*time.Second), time.Second, 50, 50)     // alone: 100 tokens in 1 s
	obs(end, 2*time.Second, 100, 300)                      // [end-2s, end]
	obs(end.Add(-time.Second), time.Second, 200, 200)      // [end-2s, end-1s], inside the one above
	obs(end.Add(-500*time.Millisecond), time.Second, 0, 0) // no tokens: not counted
	// 900 tokens over 1 s + 2 s busy.
	if f := b.r.Figures("o"); math.Abs(f.TokensPerSec-300) > 1e-9 {
		t.Fatalf("tokens per second %g, want 300", f.TokensPerSec)
	}
}

func TestTheWindowSlides(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.observe("o", catalog.MinMeasuredRequests, 500)
	b.clock.Advance(Window + time.Second)
	b.observe("o", catalog.MinMeasuredRequests, 20)
	if f := b.r.Figures("o"); f.Requests != catalog.MinMeasuredRequests || f.TTFTP99Ms != 20 {
		t.Fatalf("figures %+v; want only the last five minutes", f)
	}

	// At most the last WindowSize observations.
	b.observe("o", WindowSize-10, 30)
	if f := b.r.Figures("o"); f.Requests != WindowSize || f.TTFTP50Ms != 30 {
		t.Fatalf("figures %+v; want the last %d", f, WindowSize)
	}
}

// TestAQuietOfferingKeepsItsNewestRequestsForAnHour: a rig serving a few requests a minute still earns figures
// over catalog.MinMeasuredRequests: a claim is replaced by traffic, even thin traffic.
func TestAQuietOfferingKeepsItsNewestRequestsForAnHour(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 120 { // one every 20 s for 40 minutes
		b.observe("o", 1, 900)
		b.clock.Advance(20 * time.Second)
	}
	if f := b.r.Figures("o"); f.Requests != catalog.MinMeasuredRequests || f.TTFTP99Ms != 900 {
		t.Fatalf("figures %+v; want the newest %d", f, catalog.MinMeasuredRequests)
	}
	b.clock.Advance(2 * time.Hour)
	if f := b.r.Figures("o"); f.Requests != 0 {
		t.Fatalf("figures %+v; want none after an hour", f)
	}
	b.r.Observe("o", Observation{At: b.clock.Now().Add(-61 * time.Minute), TTFT: time.Millisecond, Streamed: true, Status: usage.StatusOK})
	if f := b.r.Figures("o"); f.Requests != 0 {
		t.Fatalf("figures %+v; an observation over an hour old was kept", f)
	}
}

// TestARigsOwnReportsAreKeptApartFromTheGatewaysMeasurements: what the gateway observed is the measured
// window (Figures), what the rig reported through the meter the reported one (ReportedFigures); neither moves
// the other, and each counts a request id once, the first observation standing.
func TestARigsOwnReportsAreKeptApartFromTheGatewaysMeasurements(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	gateway := func(id string, ttftMs float64) {
		b.r.Observe("o", Observation{RequestID: id, At: now, TTFT: millis(ttftMs), Streamed: true, Status: usage.StatusOK})
	}
	rig := func(id string, ttftMs float64) {
		b.r.ObserveUsage(usage.Usage{RequestID: id, OfferingID: "o", TTFTMillis: ttftMs, DurationMillis: 1000,
			InputTokens: 10, OutputTokens: 10, Status: usage.StatusOK}, now)
	}
	rig("r1", 5)
	gateway("r1", 300)
	gateway("r2", 300)
	rig("r2", 5)
	rig("r3", 5)   // a request another replica routed, reported by its rig only
	rig("r3", 900) // a redelivery: the first stands
	gateway("r4", 300)
	gateway("r4", 900) // the gateway reporting twice: the first stands
	if f := b.r.Figures("o"); f.Requests != 3 || f.TTFTP50Ms != 300 || f.TTFTP99Ms != 300 {
		t.Fatalf("measured figures %+v; want r1, r2 and r4 at the gateway's 300 ms", f)
	}
	if f := b.r.ReportedFigures("o"); f.Requests != 3 || f.TTFTP99Ms != 5 || f.TokensPerSec != 60 {
		t.Fatalf("reported figures %+v; want r1, r2 and r3 at the rig's 5 ms, 60 tokens over 1 s", f)
	}
}

// TestRequestIDsLeaveWithTheirObservations: the ring forgets a request id when it overwrites its observation,
// so the index stays as small as the window.
func TestRequestIDsLeaveWithTheirObservations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range WindowSize + 500 {
		b.r.Observe("o", Observation{RequestID: fmt.Sprintf("r%d", i), TTFT: time.Millisecond, Streamed: true, Status: usage.StatusOK})
	}
	s := b.r.state("o")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.measured.byRequest) != WindowSize || len(s.measured.ring) != WindowSize {
		t.Fatalf("%d request ids for %d observations; want %d", len(s.measured.byRequest), len(s.measured.ring), WindowSize)
	}
}

func BenchmarkObserve(b *testing.B) {
	r := New(Config{Catalog: &fakeCatalog{}})
	o := Observation{RequestID: "", TTFT: 30 * time.Millisecond, Streamed: true, Duration: time.Second, OutputTokens: 100, Status: usage.StatusOK}
	for b.Loop() {
		r.Observe("o", o)
	}
}

func BenchmarkPick(b *testing.B) {
	var os []catalog.Offering
	for i := range 8 {
		os = append(os, offering(fmt.Sprintf("o%d", i), "m", st, money.MicroUSD(100_000+1000*i)))
	}
	bb := setup(b, os...)
	for _, o := range os {
		bb.observe(o.ID, WindowSize, 50)
	}
	for b.Loop() {
		if _, err := bb.r.Pick(Request{Model: "m"}); err != nil {
			b.Fatal(err)
		}
	}
}
