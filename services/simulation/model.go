package simulation

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Latency is what one request waits: TTFT before its first token, TPOT between two tokens.
type Latency struct {
	TTFT time.Duration
	TPOT time.Duration
}

// Model draws the latencies of a profile at a concurrency. It is safe for concurrent use; its
// draws are a deterministic sequence given the seed.
type Model struct {
	zero   bool
	points []loadPoint // by concurrency, latencies non-decreasing along it

	mu  sync.Mutex
	rng *rand.Rand
}

// loadPoint is a level placed at its Little's-law concurrency.
type loadPoint struct {
	concurrency float64
	level       Level
}

// NewModel prepares the profile's levels for drawing: each placed at its concurrency, in order
// of it, with every latency figure replaced by the lowest that any level at equal or higher
// concurrency measured (see the package doc for why).
func NewModel(p Profile, seed uint64) *Model {
	m := &Model{zero: p.IsZero(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, l := range p.Levels {
		m.points = append(m.points, loadPoint{l.Concurrency(), l})
	}
	slices.SortStableFunc(m.points, func(a, b loadPoint) int { return cmp.Compare(a.concurrency, b.concurrency) })
	for i := len(m.points) - 2; i >= 0; i-- {
		l, next := &m.points[i].level, m.points[i+1].level
		l.TTFTP50Ms = min(l.TTFTP50Ms, next.TTFTP50Ms)
		l.TTFTP90Ms = min(l.TTFTP90Ms, next.TTFTP90Ms)
		l.TTFTP99Ms = min(l.TTFTP99Ms, next.TTFTP99Ms)
		l.TPOTP50Ms = min(l.TPOTP50Ms, next.TPOTP50Ms)
		l.TPOTP99Ms = min(l.TPOTP99Ms, next.TPOTP99Ms)
	}
	return m
}

// At returns the figures the model uses at a concurrency: those of the nearest level below it
// and above it, interpolated linearly in concurrency (latencies geometrically, in their
// logarithm); below the lowest level or above the highest, that level's. Run is zero. The
// zero-latency profile has all figures zero.
func (m *Model) At(concurrency float64) Level {
	if m.zero {
		return Level{}
	}
	i, _ := slices.BinarySearchFunc(m.points, concurrency, func(p loadPoint, c float64) int {
		return cmp.Compare(p.concurrency, c)
	})
	switch {
	case i == 0:
		return m.points[0].level
	case i == len(m.points):
		return m.points[i-1].level
	}
	a, b := m.points[i-1], m.points[i]
	t := (concurrency - a.concurrency) / (b.concurrency - a.concurrency)
	lin := func(x, y float64) float64 { return x + t*(y-x) }
	geo := func(x, y float64) float64 { return math.Exp(lin(math.Log(x), math.Log(y))) }
	return Level{
		QPS:              lin(a.level.QPS, b.level.QPS),
		ReqS:             lin(a.level.ReqS, b.level.ReqS),
		TTFTP50Ms:        geo(a.level.TTFTP50Ms, b.level.TTFTP50Ms),
		TTFTP90Ms:        geo(a.level.TTFTP90Ms, b.level.TTFTP90Ms),
		TTFTP99Ms:        geo(a.level.TTFTP99Ms, b.level.TTFTP99Ms),
		TPOTP50Ms:        geo(a.level.TPOTP50Ms, b.level.TPOTP50Ms),
		TPOTP99Ms:        geo(a.level.TPOTP99Ms, b.level.TPOTP99Ms),
		TotalTPS:         lin(a.level.TotalTPS, b.level.TotalTPS),
		MeanInputTokens:  lin(a.level.MeanInputTokens, b.level.MeanInputTokens),
		MeanOutputTokens: lin(a.level.MeanOutputTokens, b.level.MeanOutputTokens),
	}
}

// Draw returns the latencies of one request that arrives when concurrency requests, itself
// included, are in flight: its TTFT and its TPOT, each a draw from the distribution that
// matches the percentiles At gives. The zero-latency profile draws zeros.
func (m *Model) Draw(concurrency int) Latency {
	if m.zero {
		return Latency{}
	}
	l := m.At(float64(concurrency))
	m.mu.Lock()
	u1, u2 := m.rng.Float64(), m.rng.Float64()
	m.mu.Unlock()
	return Latency{
		TTFT: millis(ttftQuantiles(l.TTFTP50Ms, l.TTFTP90Ms, l.TTFTP99Ms).at(u1)),
		TPOT: millis(tpotQuantiles(l.TPOTP50Ms, l.TPOTP99Ms).at(u2)),
	}
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// quantileFn is a quantile function whose logarithm is piecewise linear in the probability u
// between n knots (u[i], exp(logv[i])), with u[0] = 0 and u[n-1] = 1.
type quantileFn struct {
	n    int
	u    [5]float64
	logv [5]float64
}

// ttftQuantiles passes through the three measured percentiles. Below the median it continues
// the slope from p50 to p90 down to u = 0, above p99 the slope from p90 to p99 up to u = 1.
func ttftQuantiles(p50, p90, p99 float64) quantileFn {
	l50, l90, l99 := math.Log(p50), math.Log(p90), math.Log(p99)
	low := l50 - 0.5*(l90-l50)/0.4
	high := l99 + 0.01*(l99-l90)/0.09
	return quantileFn{n: 5, u: [5]float64{0, 0.5, 0.9, 0.99, 1}, logv: [5]float64{low, l50, l90, l99, high}}
}

// tpotQuantiles passes through the two measured percentiles, with the slope between them
// continued to u = 0 and u = 1.
func tpotQuantiles(p50, p99 float64) quantileFn {
	l50, l99 := math.Log(p50), math.Log(p99)
	slope := (l99 - l50) / 0.49
	return quantileFn{n: 4, u: [5]float64{0, 0.5, 0.99, 1}, logv: [5]float64{l50 - 0.5*slope, l50, l99, l99 + 0.01*slope}}
}

// at is the value at probability u in [0, 1].
func (q quantileFn) at(u float64) float64 {
	i := 1
	for i < q.n-1 && u > q.u[i] {
		i++
	}
	t := (u - q.u[i-1]) / (q.u[i] - q.u[i-1])
	return math.Exp(q.logv[i-1] + t*(q.logv[i]-q.logv[i-1]))
}

// mean is the distribution's mean, the integral of the quantile function over u: on a piece of
// width w whose logarithm runs from a to b, w (e^b - e^a) / (b - a).
func (q quantileFn) mean() float64 {
	var sum float64
	for i := 1; i < q.n; i++ {
		w, a, b := q.u[i]-q.u[i-1], q.logv[i-1], q.logv[i]
		if math.Abs(b-a) < 1e-12 {
			sum += w * math.Exp(a)
			continue
		}
		sum += w * (math.Exp(b) - math.Exp(a)) / (b - a)
	}
	return sum
}
