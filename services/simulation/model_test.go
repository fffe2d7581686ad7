package simulation

import (
	"math"
	"slices"
	"testing"
	"time"
)

// draws returns n sorted TTFT and TPOT draws in milliseconds at a concurrency.
func draws(t *testing.T, m *Model, concurrency, n int) (ttft, tpot []float64) {
	t.Helper()
	for range n {
		l := m.Draw(concurrency)
		ttft = append(ttft, float64(l.TTFT)/float64(time.Millisecond))
		tpot = append(tpot, float64(l.TPOT)/float64(time.Millisecond))
	}
	slices.Sort(ttft)
	slices.Sort(tpot)
	return ttft, tpot
}

func percentile(sorted []float64, p float64) float64 { return sorted[int(p*float64(len(sorted)-1))] }

func within(t *testing.T, what string, got, lo, hi float64) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %.2f, want within [%g, %g]", what, got, lo, hi)
	}
}

func TestDrawsMatchTheMeasuredPercentilesOf14BOnH100(t *testing.T) {
	t.Parallel()
	p, ok := Lookup("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "h100-pcie", 1)
	if !ok {
		t.Fatal("no profile")
	}
	m := NewModel(p, 1)
	const n = 20000

	// One request in flight is below the 1 qps runs (about 4 in flight): their figures,
	// p50 35.05-35.76 ms, p90 43.0-43.12, p99 44.33-45.55, TPOT p50 19.51-19.58.
	ttft, tpot := draws(t, m, 1, n)
	within(t, "TTFT p50 at 1 in flight", percentile(ttft, 0.50), 34, 37)
	within(t, "TTFT p90 at 1 in flight", percentile(ttft, 0.90), 42, 44.5)
	within(t, "TTFT p99 at 1 in flight", percentile(ttft, 0.99), 43, 47)
	within(t, "TPOT p50 at 1 in flight", percentile(tpot, 0.50), 19, 20)

	// About 34 in flight is the 16 qps runs: p50 40.65-41.88, p99 54.41-56.03.
	ttft, _ = draws(t, m, 34, n)
	within(t, "TTFT p50 at 34 in flight", percentile(ttft, 0.50), 39.5, 43)
	within(t, "TTFT p99 at 34 in flight", percentile(ttft, 0.99), 52, 58)

	// Past the 32 qps runs (about 53 in flight): p50 87.68-89.2, p99 193.01-211.4, TPOT p50
	// 31.42-32.06.
	ttft, tpot = draws(t, m, 100, n)
	within(t, "TTFT p50 at 100 in flight", percentile(ttft, 0.50), 85, 92)
	within(t, "TTFT p99 at 100 in flight", percentile(ttft, 0.99), 185, 220)
	within(t, "TPOT p50 at 100 in flight", percentile(tpot, 0.50), 30.5, 33)

	// Between the 16 and the 32 qps runs, in between.
	ttft, _ = draws(t, m, 43, n)
	within(t, "TTFT p50 at 43 in flight", percentile(ttft, 0.50), 45, 85)
}

func TestLatencyNeverFallsAsConcurrencyRises(t *testing.T) {
	t.Parallel()
	for _, p := range Profiles() {
		m := NewModel(p, 1)
		prev := m.At(0)
		for c := 1.0; c <= 300; c += 0.5 {
			l := m.At(c)
			if l.TTFTP50Ms < prev.TTFTP50Ms-1e-9 || l.TTFTP90Ms < prev.TTFTP90Ms-1e-9 ||
				l.TTFTP99Ms < prev.TTFTP99Ms-1e-9 || l.TPOTP50Ms < prev.TPOTP50Ms-1e-9 ||
				l.TPOTP99Ms < prev.TPOTP99Ms-1e-9 {
				t.Errorf("%s: latency falls from %g to %g in flight", p, c-0.5, c)
				break
			}
			if !(l.TTFTP50Ms <= l.TTFTP90Ms && l.TTFTP90Ms <= l.TTFTP99Ms && l.TPOTP50Ms <= l.TPOTP99Ms) {
				t.Errorf("%s: percentiles out of order at %g in flight: %+v", p, c, l)
				break
			}
			prev = l
		}
	}
}

func TestSlowLowRateRunsGiveWayToFasterBusierOnes(t *testing.T) {
	t.Parallel()
	// 4x RTX 4090 with the 14B model measured p99 1199 ms at 1 qps but 482, 448 and 337 ms at 4,
	// 8 and 16 qps: a light load gets the 16 qps figure.
	p, _ := Lookup("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "rtx-4090", 4)
	if got := NewModel(p, 1).At(1).TTFTP99Ms; got != 337.07 {
		t.Fatalf("p99 at 1 in flight = %g, want 337.07", got)
	}
}

func TestZeroDrawsNothing(t *testing.T) {
	t.Parallel()
	m := NewModel(Zero(), 1)
	for _, c := range []int{0, 1, 10, 1000} {
		if l := m.Draw(c); l != (Latency{}) {
			t.Fatalf("zero profile drew %+v at %d in flight", l, c)
		}
	}
	if m.At(5) != (Level{}) || !Zero().IsZero() {
		t.Fatal("zero profile has figures")
	}
}

func TestDrawsAreDeterministicForASeed(t *testing.T) {
	t.Parallel()
	p := Profiles()[0]
	a, b, c := NewModel(p, 7), NewModel(p, 7), NewModel(p, 8)
	same := true
	for i := range 100 {
		da, db, dc := a.Draw(i), b.Draw(i), c.Draw(i)
		if da != db {
			t.Fatalf("draw %d: %v and %v from one seed", i, da, db)
		}
		same = same && da == dc
	}
	if same {
		t.Fatal("two seeds drew the same sequence")
	}
}

func TestQuantileFunctionPassesThroughThePercentilesAndIntegratesToItsMean(t *testing.T) {
	t.Parallel()
	q := ttftQuantiles(35, 43, 45.5)
	for _, c := range []struct{ u, want float64 }{{0.5, 35}, {0.9, 43}, {0.99, 45.5}} {
		if got := q.at(c.u); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("at(%g) = %g, want %g", c.u, got, c.want)
		}
	}
	if lo, want := q.at(0), 35*math.Pow(35.0/43, 1.25); math.Abs(lo-want) > 1e-9 {
		t.Errorf("at(0) = %g, want %g", lo, want)
	}
	tp := tpotQuantiles(20, 24)
	if math.Abs(tp.at(0.5)-20) > 1e-9 || math.Abs(tp.at(0.99)-24) > 1e-9 {
		t.Errorf("TPOT quantiles miss their percentiles: %g, %g", tp.at(0.5), tp.at(0.99))
	}
	for _, f := range []quantileFn{q, tp, ttftQuantiles(210, 9794, 10680), ttftQuantiles(10, 10, 10)} {
		const steps = 200000
		var sum float64
		for i := range steps {
			sum += f.at((float64(i) + 0.5) / steps)
		}
		if numeric := sum / steps; math.Abs(f.mean()-numeric) > 1e-3*numeric {
			t.Errorf("mean %g, numerically %g", f.mean(), numeric)
		}
	}
}

func TestConcurrencyIsLittlesLaw(t *testing.T) {
	t.Parallel()
	// Constant latencies make the means exact: 2 requests/s x (0.1 s + 100 x 0.02 s) = 4.2.
	l := Level{ReqS: 2, TTFTP50Ms: 100, TTFTP90Ms: 100, TTFTP99Ms: 100, TPOTP50Ms: 20, TPOTP99Ms: 20, MeanOutputTokens: 100}
	if got := l.Concurrency(); math.Abs(got-4.2) > 1e-9 {
		t.Fatalf("concurrency %g, want 4.2", got)
	}
}
