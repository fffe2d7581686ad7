package routing

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// The sliding window the live figures are computed over: the observations of the last Window, at most the last
// WindowSize of them.
const (
	Window     = 5 * time.Minute
	WindowSize = 2000
	// sparseWindow lets an offering with little traffic keep its newest catalog.MinMeasuredRequests observations
	// up to this old, so that a rig serving a few requests a minute still earns measured figures, and can lose
	// a tier it only claimed. Busy offerings are not affected: their last Window holds more.
	sparseWindow = time.Hour
	// figuresTTL is how long Pick reuses an offering's figures before computing them again: computing sorts
	// the window, which the request path should not do on every request.
	figuresTTL = time.Second
)

// Observation is one request to an offering as a gateway saw it, from outside the rig: network, queueing and
// the rig's own work included, which is what the customer waited.
type Observation struct {
	// RequestID identifies the request, so that it is counted once however many times it reaches the window
	// (this gateway's observation, and the same request shared by another replica or delivered twice). The first
	// observation of a request stands. Empty means the observation is counted without that check, and is not
	// shared with other replicas.
	RequestID string
	// At is when the request ended; zero means now. Observations older than an hour are ignored.
	At time.Time
	// TTFT is the time to the first token; zero when none came.
	TTFT time.Duration
	// Streamed says the answer was relayed as a stream, where the first token is seen when it comes: only then
	// is TTFT a time to first token. A whole answer's first byte comes when the whole answer is done, so its
	// TTFT would be its generation time; the window keeps such a request for throughput and errors, but not
	// among the times to first token a tier's promise is judged on. The platform's own probes are streamed.
	Streamed bool
	// Duration runs from the request's arrival to its last byte.
	Duration     time.Duration
	InputTokens  int64
	OutputTokens int64
	Status       usage.Status
}

// Figures are an offering's live figures over a window.
//
// Percentiles are exact, by nearest rank over the window's times to first token: P50 is the value ranked
// ceil(0.50 N), P99 the one ranked ceil(0.99 N), of the N streamed requests (customers' and the platform's
// probes) that produced a first token and did not fail. A request answered whole has no time to first token.
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

// Observe records a request this gateway sent to an offering, in the window its tier and routing go by, and
// shares it with the other gateway replicas once Start has run (see share.go). It costs a map lookup and a slot
// in a ring: the gateway calls it on the request path.
func (r *Router) Observe(offeringID string, o Observation) {
	if r.observe(offeringID, o) && o.RequestID != "" {
		r.share(offeringID, o)
	}
}

// observe records a gateway observation, this replica's or another's, and reports whether it was new.
func (r *Router) observe(offeringID string, o Observation) bool {
	now := r.cfg.Now()
	if o.At.IsZero() {
		o.At = now
	}
	if now.Sub(o.At) > sparseWindow {
		return false
	}
	s := r.state(offeringID)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.measured.add(sampleOf(o))
}

// ObserveUsage records a metered request as its rig's agent reported it: the meter's feed, called with each
// stored usage event and the time the request ended (the event's time). The rig's figures go to a window of
// their own (ReportedFigures), written to the catalog beside the gateway's and compared with them; they never
// decide a tier or a route, for they are the provider's word about its own rig.
func (r *Router) ObserveUsage(u usage.Usage, at time.Time) {
	now := r.cfg.Now()
	if at.IsZero() {
		at = now
	}
	if now.Sub(at) > sparseWindow {
		return
	}
	s := r.state(u.OfferingID)
	s.mu.Lock()
	defer s.mu.Unlock()
	// The meter zeroes the time to first token of a request whose route ticket says it was not streamed
	// (ticket.Claims.Stream), so a rig's figure that is left is one of a streamed request.
	s.reported.add(sampleOf(Observation{
		RequestID:    u.RequestID,
		At:           at,
		TTFT:         millis(u.TTFTMillis),
		Streamed:     u.TTFTMillis > 0,
		Duration:     millis(u.DurationMillis),
		InputTokens:  u.InputTokens,
		OutputTokens: u.OutputTokens,
		Status:       u.Status,
	}))
}

// Figures returns the offering's live figures now, as the gateways measured them; zero for an offering never
// observed.
func (r *Router) Figures(offeringID string) Figures {
	return r.figures(offeringID, func(s *offeringState) *window { return &s.measured })
}

// ReportedFigures returns the offering's figures now as its rig reported them in its usage events.
func (r *Router) ReportedFigures(offeringID string) Figures {
	return r.figures(offeringID, func(s *offeringState) *window { return &s.reported })
}

func (r *Router) figures(offeringID string, which func(*offeringState) *window) Figures {
	r.mu.RLock()
	s := r.offerings[offeringID]
	r.mu.RUnlock()
	if s == nil {
		return Figures{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return which(s).compute(r.cfg.Now())
}

func millis(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// sample is an observation as a window keeps it.
type sample struct {
	requestID  string
	at         time.Time
	ttftMs     float64 // 0 when the request produced no first token or failed
	durationMs float64
	tokens     int64 // input plus output
	failed     bool
}

func sampleOf(o Observation) sample {
	x := sample{requestID: o.RequestID, at: o.At, tokens: max(o.InputTokens, 0) + max(o.OutputTokens, 0),
		failed: o.Status == usage.StatusError}
	if !x.failed && o.Streamed && o.TTFT > 0 {
		x.ttftMs = float64(o.TTFT) / float64(time.Millisecond)
	}
	if o.Duration > 0 {
		x.durationMs = float64(o.Duration) / float64(time.Millisecond)
	}
	return x
}

// window is a ring of the last WindowSize observations of one offering from one source, in arrival order, with
// the figures last computed over it. Its owner's lock guards it.
type window struct {
	ring      []sample
	next      int            // where the next observation goes
	byRequest map[string]int // request id -> its slot in ring, to count a request once
	// Figures as last computed, reused for figuresTTL.
	cached   Figures
	cachedAt time.Time
	// Scratch space for computing figures without allocating each time.
	ttfts []float64
	spans []span
}

// add puts an observation in the ring unless its request is already there, and reports whether it did.
func (w *window) add(x sample) bool {
	if x.requestID != "" {
		if _, ok := w.byRequest[x.requestID]; ok {
			return false
		}
	}
	if w.byRequest == nil {
		w.byRequest = map[string]int{}
	}
	i := w.next
	if len(w.ring) < WindowSize {
		w.ring = append(w.ring, x)
	} else {
		if old := w.ring[i].requestID; old != "" && w.byRequest[old] == i {
			delete(w.byRequest, old)
		}
		w.ring[i] = x
	}
	w.next = (i + 1) % WindowSize
	if x.requestID != "" {
		w.byRequest[x.requestID] = i
	}
	return true
}

// eachInWindow calls f with the window's observations, newest first: those of the last Window, and older ones
// up to sparseWindow until catalog.MinMeasuredRequests are taken.
func (w *window) eachInWindow(now time.Time, f func(*sample)) {
	n, taken := len(w.ring), 0
	for k := 1; k <= n; k++ {
		x := &w.ring[(w.next-k+n)%n]
		age := now.Sub(x.at)
		if age <= Window || (taken < catalog.MinMeasuredRequests && age <= sparseWindow) {
			f(x)
			taken++
		}
	}
}

// cachedFigures returns the figures computed at most figuresTTL ago.
func (w *window) cachedFigures(now time.Time) Figures {
	if w.cachedAt.IsZero() || now.Sub(w.cachedAt) >= figuresTTL || now.Before(w.cachedAt) {
		return w.compute(now)
	}
	return w.cached
}

// span is a request's busy interval in Unix nanoseconds.
type span struct{ from, to int64 }

// compute computes the figures over the window (see Figures) and caches them.
func (w *window) compute(now time.Time) Figures {
	f := w.figuresOver(func(each func(*sample)) { w.eachInWindow(now, each) })
	w.cached, w.cachedAt = f, now
	return f
}

// FiguresOf computes the figures of past observations by the rules of the live ones (see Figures), over the
// newest WindowSize of them whatever their age: figures measured of traffic served before now, such as the
// demo's history (docs/demo-history.md).
func FiguresOf(obs []Observation) Figures {
	sorted := slices.SortedStableFunc(slices.Values(obs), func(a, b Observation) int { return a.At.Compare(b.At) })
	var w window
	for _, o := range sorted {
		w.add(sampleOf(o))
	}
	return w.figuresOver(func(each func(*sample)) {
		for i := range w.ring {
			each(&w.ring[i])
		}
	})
}

// figuresOver computes the figures over the observations each yields.
func (w *window) figuresOver(each func(func(*sample))) Figures {
	var f Figures
	var tokens int64
	w.ttfts, w.spans = w.ttfts[:0], w.spans[:0]
	each(func(x *sample) {
		switch {
		case x.failed:
			f.Errors++
		case x.ttftMs > 0:
			w.ttfts = append(w.ttfts, x.ttftMs)
		}
		if x.durationMs > 0 && x.tokens > 0 {
			tokens += x.tokens
			end := x.at.UnixNano()
			w.spans = append(w.spans, span{from: end - int64(x.durationMs*float64(time.Millisecond)), to: end})
		}
	})
	if f.Requests = len(w.ttfts); f.Requests > 0 {
		slices.Sort(w.ttfts)
		f.TTFTP50Ms = nearestRank(w.ttfts, 50)
		f.TTFTP99Ms = nearestRank(w.ttfts, 99)
	}
	if busy := busyNanos(w.spans); busy > 0 {
		f.TokensPerSec = float64(tokens) / (float64(busy) / float64(time.Second))
	}
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
