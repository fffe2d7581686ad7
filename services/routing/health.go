package routing

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
)

// HeartbeatTimeout is how recent an offering's last heartbeat must be for it to be healthy. Rigs beat every 5 s
// (the agent's default), so two lost in a row are forgiven and a third is not.
const HeartbeatTimeout = 15 * time.Second

// Heartbeat is what a rig publishes on heartbeat.<provider_id>.<offering_id> (events.HeartbeatSubject), for the
// gateway to route on. It is the contract between gpuagent and the gateway: the agent marshals this type.
type Heartbeat struct {
	OfferingID string    `json:"offering_id"`
	ProviderID string    `json:"provider_id"`
	InFlight   int       `json:"in_flight"` // requests being served
	Queued     int       `json:"queued"`    // requests waiting
	Capacity   int       `json:"capacity"`  // requests the rig serves at once
	At         time.Time `json:"at"`        // the rig's clock; freshness is judged by the router's own clock
	// Native names the APIs besides chat completions the rig's engine serves natively, as its agent found by
	// trying them upstream (catalog.NativeMessages, catalog.NativeResponses); the gateway passes such a request
	// through to the rig untouched, and translates it to chat completions for a rig without.
	Native []string `json:"native,omitempty"`
}

// onHeartbeat records a heartbeat. The subject names its sender truthfully (a rig may publish only its own, see
// natsserver.RigUser), so the body must name the same provider and offering or it is ignored.
func (r *Router) onHeartbeat(msg *nats.Msg) {
	provider, offering, err := events.ParseHeartbeatSubject(msg.Subject)
	if err != nil {
		r.log.Debug("routing: heartbeat on an unexpected subject ignored", "subject", msg.Subject, "error", err)
		return
	}
	var hb Heartbeat
	if err := json.Unmarshal(msg.Data, &hb); err != nil {
		r.log.Debug("routing: malformed heartbeat ignored", "subject", msg.Subject, "error", err)
		return
	}
	if hb.ProviderID != provider || hb.OfferingID != offering {
		r.log.Warn("routing: heartbeat whose body names another rig than its subject ignored", "subject", msg.Subject,
			"provider_id", hb.ProviderID, "offering_id", hb.OfferingID)
		return
	}
	r.recordHeartbeat(hb)
}

// recordHeartbeat makes the offering healthy for HeartbeatTimeout from now.
func (r *Router) recordHeartbeat(hb Heartbeat) {
	s := r.state(hb.OfferingID)
	now := r.cfg.Now()
	s.mu.Lock()
	s.heartbeat, s.heardAt = hb, now
	s.mu.Unlock()
}

func (s *offeringState) healthyLocked(now time.Time) bool {
	return !s.heardAt.IsZero() && now.Sub(s.heardAt) <= HeartbeatTimeout
}

// Begin counts a request the gateway sends to the offering as in flight until the returned end is called (once
// the response is over, whether it succeeded or not; calling end again does nothing). Between heartbeats this
// gateway's own count is the freshest load figure it has.
func (r *Router) Begin(offeringID string) (end func()) {
	s := r.state(offeringID)
	s.inFlight.Add(1)
	var ended atomic.Bool
	return func() {
		if ended.CompareAndSwap(false, true) {
			s.inFlight.Add(-1)
		}
	}
}
