package routing

import (
	"encoding/json"
	"math"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"
)

// Gateway replicas share what they observe, so that every replica's window holds an offering's whole traffic as
// the gateways saw it, whichever replica routed each request. Each router publishes the observations of its own
// requests on events.ObservedSubject (core NATS) in batches, at most every ShareEvery or as soon as maxShareBatch are
// waiting, and adds the other replicas' to its window, counting each request id once and skipping its own
// batches by their instance id. Only platform processes may publish there: a rig's NATS user may publish its own
// usage and heartbeat subjects and nothing else, so no rig can put figures in the gateways' windows.
//
// Core NATS delivers at most once and not to a replica that was down: a replica that starts sees the traffic
// from then on, and its window fills within Window, as it does from its own requests.
const (
	// DefaultShareEvery is how often a router publishes what it has observed since the last batch.
	DefaultShareEvery = 200 * time.Millisecond
	// maxShareBatch is the most observations one message carries, about 200 bytes each.
	maxShareBatch = 500
	// maxSharePending bounds what waits to be published while NATS is unreachable; beyond it observations are
	// kept in this replica's window only.
	maxSharePending = 20_000
)

// instanceHeader names the publishing router's instance on each batch, so that a router skips its own without
// decoding it; the body names it too (ObservedBatch.Instance).
const instanceHeader = "Gpumarket-Instance"

// ObservedBatch is a message on events.ObservedSubject.
type ObservedBatch struct {
	Instance     string            `json:"instance"` // the publishing router's Config.Instance
	Observations []ObservedRequest `json:"observations"`
}

// ObservedRequest is one gateway observation as replicas share it.
type ObservedRequest struct {
	OfferingID   string       `json:"offering_id"`
	RequestID    string       `json:"request_id"`
	At           time.Time    `json:"at"`
	TTFTMs       float64      `json:"ttft_ms"`
	Streamed     bool         `json:"streamed"`
	DurationMs   float64      `json:"duration_ms"`
	InputTokens  int64        `json:"input_tokens"`
	OutputTokens int64        `json:"output_tokens"`
	Status       usage.Status `json:"status"`
}

// observation turns a shared request back into an Observation, or reports false for one no gateway would
// have published.
func (o ObservedRequest) observation() (Observation, bool) {
	ok := o.OfferingID != "" && len(o.OfferingID) <= 100 && o.RequestID != "" && len(o.RequestID) <= 200 && !o.At.IsZero() &&
		finiteNonNegative(o.TTFTMs) && finiteNonNegative(o.DurationMs) && o.InputTokens >= 0 && o.OutputTokens >= 0
	switch o.Status {
	case usage.StatusOK, usage.StatusError, usage.StatusCanceled:
	default:
		ok = false
	}
	return Observation{RequestID: o.RequestID, At: o.At, TTFT: millis(o.TTFTMs), Streamed: o.Streamed, Duration: millis(o.DurationMs),
		InputTokens: o.InputTokens, OutputTokens: o.OutputTokens, Status: o.Status}, ok
}

func finiteNonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// sharer holds this router's observations until they are published.
type sharer struct {
	mu      sync.Mutex
	on      bool // from Start until its context ends
	pending []ObservedRequest
	dropped int           // observations not shared because pending was full, since the last publish
	kick    chan struct{} // a full batch is waiting
}

// share queues one of this gateway's observations for the other replicas.
func (r *Router) share(offeringID string, o Observation) {
	sh := &r.sharer
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.on {
		return
	}
	if len(sh.pending) >= maxSharePending {
		sh.dropped++
		return
	}
	if o.At.IsZero() {
		o.At = r.cfg.Now()
	}
	sh.pending = append(sh.pending, ObservedRequest{OfferingID: offeringID, RequestID: o.RequestID, At: o.At.UTC(),
		TTFTMs: float64(o.TTFT) / float64(time.Millisecond), Streamed: o.Streamed, DurationMs: float64(o.Duration) / float64(time.Millisecond),
		InputTokens: o.InputTokens, OutputTokens: o.OutputTokens, Status: o.Status})
	if len(sh.pending) == maxShareBatch {
		select {
		case sh.kick <- struct{}{}:
		default:
		}
	}
}

// publishShared publishes what is waiting, in batches of at most maxShareBatch.
func (r *Router) publishShared() {
	sh := &r.sharer
	sh.mu.Lock()
	pending, dropped := sh.pending, sh.dropped
	sh.pending, sh.dropped = nil, 0
	sh.mu.Unlock()
	if dropped > 0 {
		r.log.Warn("routing: observations not shared with the other gateways: too many waiting", "dropped", dropped)
	}
	for len(pending) > 0 {
		n := min(len(pending), maxShareBatch)
		body, err := json.Marshal(ObservedBatch{Instance: r.cfg.Instance, Observations: pending[:n]})
		if err == nil {
			msg := nats.NewMsg(events.ObservedSubject)
			msg.Header.Set(instanceHeader, r.cfg.Instance)
			msg.Data = body
			err = r.cfg.NATS.PublishMsg(msg)
		}
		if err != nil {
			r.log.Warn("routing: sharing observations with the other gateways failed", "observations", n, "error", err)
		}
		pending = pending[n:]
	}
}

// onObserved adds another replica's observations to the windows; this router's own batches, and requests
// already in a window, are skipped. A malformed message, or observation, is ignored.
func (r *Router) onObserved(msg *nats.Msg) {
	if msg.Header.Get(instanceHeader) == r.cfg.Instance {
		return // this router's own batch: not even decoded
	}
	var b ObservedBatch
	if err := json.Unmarshal(msg.Data, &b); err != nil {
		r.log.Debug("routing: malformed batch of shared observations ignored", "error", err)
		return
	}
	if b.Instance == r.cfg.Instance {
		return
	}
	for _, sh := range b.Observations {
		if o, ok := sh.observation(); ok {
			r.observe(sh.OfferingID, o)
		}
	}
}
