package routing

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// offeringState is everything the router knows of one offering beyond its catalog row. Its lock is the
// offering's own, so requests to different offerings never wait on each other.
type offeringState struct {
	inFlight atomic.Int64 // requests this gateway has sent and not yet finished (Begin)

	mu sync.Mutex

	// The windows (figures.go): measured holds the gateways' observations, this replica's and the others'
	// (share.go), and decides the tier and routing; reported holds the rig's own figures from its usage events,
	// kept to be shown beside them and compared.
	measured window
	reported window
	// diverging is whether the last Flush found the rig's figures far better than the gateways' (logged when
	// it starts).
	diverging bool

	// Health (health.go): the last heartbeat and when this process received it.
	heartbeat Heartbeat
	heardAt   time.Time
	// heardWritten is the latest heartbeat time this router wrote down (SettleRigStates).
	heardWritten time.Time

	// Circuit breaker (breaker.go).
	failures   int       // consecutive
	openUntil  time.Time // zero: closed; in the past: half-open
	trialUntil time.Time // a half-open trial is out until then

	// Tier (tiers.go): the tier live traffic moved the offering to, and when; "" until it moves.
	tier        catalog.Tier
	tierMovedAt time.Time
}

func newOfferingState() *offeringState {
	return &offeringState{}
}

// view is what Pick needs of an offering at one instant, read under one lock.
type view struct {
	figures  Figures
	tier     catalog.Tier // the live tier, "" when traffic has not moved it
	healthy  bool
	provider string   // from the heartbeat's subject
	load     int      // max of this gateway's in-flight count and the rig's reported in-flight plus queued
	capacity int      // from the heartbeat; 0 when unknown
	native   []string // from the heartbeat: the APIs its engine serves natively
	circuit  circuit
}

func (s *offeringState) view(now time.Time) view {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := view{
		figures:  s.measured.cachedFigures(now),
		tier:     s.tier,
		healthy:  s.healthyLocked(now),
		provider: s.heartbeat.ProviderID,
		capacity: s.heartbeat.Capacity,
		native:   s.heartbeat.Native,
		circuit:  s.circuitLocked(now),
	}
	v.load = int(s.inFlight.Load())
	if v.healthy {
		v.load = max(v.load, s.heartbeat.InFlight+s.heartbeat.Queued)
	}
	return v
}
