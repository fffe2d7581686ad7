package routing

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
)

// The sliding window the live figures are computed over: the observations of the last Window, at most the last
// WindowSize of them.
const (
	Window     = 5 * time.Minute
	WindowSize = 2000
	// sparseWindow lets an offering with little traffic keep its newest catalog.MinMeasuredRequests observations
	// up to this old, so that a rig serving a few requests a minute still earns measured figures, and can lose
	// a tier it only claimed (FIELD-CASES 17). Busy offerings are not affected: their last Window holds more.
	sparseWindow = time.Hour
	// figuresTTL is how long Pick reuses an offering's figures before computing them again: computing sorts
	// the window, which the request path should not do on every request.
	figuresTTL = time.Second
)

// Source says who saw a request.
type Source string

const (
	SourceGateway Source = "gateway" // the gateway, from the outside: what the customer waited
	SourceMeter   Source = "meter"   // the rig's agent, in a metered usage event
)

// Observation is one request to an offering as the gateway or the meter saw it.
type Observation struct {
	// RequestID identifies the request to both sources, so that it is counted once. When the gateway and the
	// meter both report it, the gateway's observation is kept, whichever arrived first: it is measured from
	// outside the rig, network included, while the meter's is the provider's agent's own measurement. Empty
	// means the observation is counted without that check.
	RequestID string
	// At is when the request ended; zero means now. Observations older than an hour are ignored.
	At time.Time
	// TTFT is the time to the first token; zero when none came.
	TTFT time.Duration
	// Duration runs from the request's arrival to its last byte.
	Duration     time.Duration
	InputTokens  int64
	OutputTokens int64
	Status       metering.Status
	Source       Source // empty means SourceGateway
}

// Figures are an offering's live figures over the window.
//
// Percentiles are exact, by nearest rank over the window's times to first token: P50 is the value ranked
// ceil(0.50 N), P99 the one ranked ceil(0.99 N), of the N requests that produced a first token and did not fail.
// Failed requests are counted apart: they have no time to first token, and the circuit breaker deals with them.
//
// TokensPerSec is what the catalog's tokens per second means (the benchmark's total_tps, which its cost and
// energy per million tokens divide by): input plus output tokens of the window's requests, divided by the time the
// offering was busy with at least one of them, the union of their [end - duration, end] intervals. Under
// sustained load that is the rig's throughput; at a trickle of traffic it is a single stream's, not a figure
// diluted by idle time.
type Figures struct {
	Requests     int     `json:"requests"` // observations with a time to first token: what the figures rest on
	Errors       int     `json:"errors"`
	TTFTP50Ms    float64 `json:"ttft_p50_ms"`
	TTFTP99Ms    float64 `json:"ttft_p99_ms"`
	TokensPerSec float64 `json:"tokens_per_second"`
}

// Observe records a request to an offering. It costs a map lookup and a slot in a ring: the gateway calls it on
// the request path.
func (r *Router) Observe(offeringID string, o Observation) {
	now := r.cfg.Now()
	if o.At.IsZero() {
		o.At = now
	}
	if now.Sub(o.At) > sparseWindow {
		return
	}
	s := r.state(offeringID)
	s.mu.Lock()
	s.add(o)
	s.mu.Unlock()
}

// ObserveUsage records a metered request: the meter's feed, called with each stored usage event and the time
// the request ended (the event's time).
func (r *Router) ObserveUsage(u metering.Usage, at time.Time) {
	r.Observe(u.OfferingID, Observation{
		RequestID:    u.RequestID,
		At:           at,
		TTFT:         millis(u.TTFTMillis),
		Duration:     millis(u.DurationMillis),
		InputTokens:  u.InputTokens,
		OutputTokens: u.OutputTokens,
		Status:       u.Status,
		Source:       SourceMeter,
	})
}

// Figures returns the offering's live figures now; zero for an offering never observed.
func (r *Router) Figures(offeringID string) Figures {
	r.mu.RLock()
	s := r.offerings[offeringID]
	r.mu.RUnlock()
	if s == nil {
		return Figures{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.computeLocked(r.cfg.Now())
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// sample is an observation as the window keeps it.
type sample struct {
	requestID  string
	source     Source
	at         time.Time
	ttftMs     float64 // 0 when the request produced no first token or failed
	durationMs float64
	tokens     int64 // input plus output
	failed     bool
}

func sampleOf(o Observation) sample {
	x := sample{requestID: o.RequestID, source: SourceGateway, at: o.At, tokens: max(o.InputTokens, 0) + max(o.OutputTokens, 0),
		failed: o.Status == metering.StatusError}
	if o.Source == SourceMeter {
		x.source = SourceMeter
	}
	if !x.failed && o.TTFT > 0 {
		x.ttftMs = float64(o.TTFT) / float64(time.Millisecond)
	}
	if o.Duration > 0 {
		x.durationMs = float64(o.Duration) / float64(time.Millisecond)
	}
	return x
}

// add puts an observation in the ring, counting each request id once (see Observation.RequestID).
func (s *offeringState) add(o Observation) {
	x := sampleOf(o)
	if x.requestID != "" {
		if i, ok := s.byRequest[x.requestID]; ok {
			if x.source == SourceGateway && s.ring[i].source == SourceMeter {
				s.ring[i] = x
			}
			return
		}
	}
	i := s.next
	if len(s.ring) < WindowSize {
		s.ring = append(s.ring, x)
	} else {
		if old := s.ring[i].requestID; old != "" && s.byRequest[old] == i {
			delete(s.byRequest, old)
		}
		s.ring[i] = x
	}
	s.next = (i + 1) % WindowSize
	if x.requestID != "" {
		s.byRequest[x.requestID] = i
	}
}

// eachInWindow calls f with the window's observations, newest first: those of the last Window, and older ones
// up to sparseWindow until catalog.MinMeasuredRequests are taken.
func (s *offeringState) eachInWindow(now time.Time, f func(*sample)) {
	n, taken := len(s.ring), 0
	for k := 1; k <= n; k++ {
		x := &s.ring[(s.next-k+n)%n]
		age := now.Sub(x.at)
		if age <= Window || (taken < catalog.MinMeasuredRequests && age <= sparseWindow) {
			f(x)
			taken++
		}
	}
}

// cachedFigures returns the figures Pick routes on, computed at most figuresTTL ago.
func (s *offeringState) cachedFigures(now time.Time) Figures {
	if s.cachedAt.IsZero() || now.Sub(s.cachedAt) >= figuresTTL || now.Before(s.cachedAt) {
		return s.computeLocked(now)
	}
	return s.cached
}

// span is a request's busy interval in Unix nanoseconds.
type span struct{ from, to int64 }

// computeLocked computes the figures over the window (see Figures) and caches them.
func (s *offeringState) computeLocked(now time.Time) Figures {
	var f Figures
	var tokens int64
	s.ttfts, s.spans = s.ttfts[:0], s.spans[:0]
	s.eachInWindow(now, func(x *sample) {
		switch {
		case x.failed:
			f.Errors++
		case x.ttftMs > 0:
			s.ttfts = append(s.ttfts, x.ttftMs)
		}
		if x.durationMs > 0 && x.tokens > 0 {
			tokens += x.tokens
			end := x.at.UnixNano()
			s.spans = append(s.spans, span{from: end - int64(x.durationMs*float64(time.Millisecond)), to: end})
		}
	})
	if f.Requests = len(s.ttfts); f.Requests > 0 {
		slices.Sort(s.ttfts)
		f.TTFTP50Ms = nearestRank(s.ttfts, 50)
		f.TTFTP99Ms = nearestRank(s.ttfts, 99)
	}
	if busy := busyNanos(s.spans); busy > 0 {
		f.TokensPerSec = float64(tokens) / (float64(busy) / float64(time.Second))
	}
	s.cached, s.cachedAt = f, now
	return f
}

// nearestRank is the pct-th percentile of sorted values: the value ranked ceil(pct/100 * N), 1-based.
func nearestRank(sorted []float64, pct int) float64 {
	rank := (pct*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

// busyNanos is the length of the union of the spans. It sorts them.
func busyNanos(spans []span) int64 {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var busy int64
	var cur span
	for i, sp := range spans {
		switch {
		case i == 0:
			cur = sp
		case sp.from <= cur.to:
			cur.to = max(cur.to, sp.to)
		default:
			busy += cur.to - cur.from
			cur = sp
		}
	}
	if len(spans) > 0 {
		busy += cur.to - cur.from
	}
	return busy
}
