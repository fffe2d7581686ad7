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

	// The window: a ring of the last WindowSize observations, in arrival order (figures.go).
	ring      []sample
	next      int            // where the next observation goes
	byRequest map[string]int // request id -> its slot in ring, to count a request once
	// Figures as Pick last computed them, reused for figuresTTL.
	cached   Figures
	cachedAt time.Time
	// Scratch space for computing figures without allocating each time.
	ttfts []float64
	spans []span

	// Health (health.go): the last heartbeat and when this process received it.
	heartbeat Heartbeat
	heardAt   time.Time

	// Circuit breaker (breaker.go).
	failures   int       // consecutive
	openUntil  time.Time // zero: closed; in the past: half-open
	trialUntil time.Time // a half-open trial is out until then

	// Tier (tiers.go): the tier live traffic moved the offering to, and when; "" until it moves.
	tier        catalog.Tier
	tierMovedAt time.Time
}

func newOfferingState() *offeringState {
	return &offeringState{byRequest: map[string]int{}}
}

// view is what Pick needs of an offering at one instant, read under one lock.
type view struct {
	figures  Figures
	tier     catalog.Tier // the live tier, "" when traffic has not moved it
	healthy  bool
	provider string // from the heartbeat's subject
	load     int    // max of this gateway's in-flight count and the rig's reported in-flight plus queued
	capacity int    // from the heartbeat; 0 when unknown
	circuit  circuit
}

func (s *offeringState) view(now time.Time) view {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := view{
		figures:  s.cachedFigures(now),
		tier:     s.tier,
		healthy:  s.healthyLocked(now),
		provider: s.heartbeat.ProviderID,
		capacity: s.heartbeat.Capacity,
		circuit:  s.circuitLocked(now),
	}
	v.load = int(s.inFlight.Load())
	if v.healthy {
		v.load = max(v.load, s.heartbeat.InFlight+s.heartbeat.Queued)
	}
	return v
}
