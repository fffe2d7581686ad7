package routing

import (
	"context"
	"errors"
	"sync"
	"time"
)

// readyWait is how long after its heartbeat request a router reports ready although some listed rigs have not
// answered: a rig that is down never will, and the others should not wait for it. Rigs answer at once, so two
// seconds is many round trips.
const readyWait = 2 * time.Second

// readiness is where Start's heartbeat request stands.
type readiness struct {
	mu          sync.Mutex
	requestedAt time.Time // zero until Start has sent the request
	ready       bool      // latched once true
}

func (rd *readiness) requested(at time.Time) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.requestedAt, rd.ready = at, false
}

// What Ready fails with, besides ErrNotLoaded.
var (
	ErrNotStarted    = errors.New("routing: not started")
	ErrAwaitingBeats = errors.New("routing: waiting for the rigs to answer the heartbeat request")
)

// Ready reports whether the router can route the platform's traffic, for /readyz: Start has loaded the catalog
// and asked the rigs for a heartbeat, and either every offering of the catalog has been heard from since, or
// readyWait has passed since the request. Once ready it stays ready.
func (r *Router) Ready(context.Context) error {
	rd := &r.ready
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.ready {
		return nil
	}
	if rd.requestedAt.IsZero() {
		return ErrNotStarted
	}
	snap := r.snap.Load()
	if snap == nil {
		return ErrNotLoaded
	}
	if now := r.cfg.Now(); now.Sub(rd.requestedAt) < readyWait && !r.heardAllSince(snap, rd.requestedAt) {
		return ErrAwaitingBeats
	}
	rd.ready = true
	return nil
}

// heardAllSince reports whether every offering of the snapshot has sent a heartbeat at or after t.
func (r *Router) heardAllSince(snap *snapshot, t time.Time) bool {
	for _, l := range snap.listed {
		l.state.mu.Lock()
		heard := !l.state.heardAt.Before(t)
		l.state.mu.Unlock()
		if !heard {
			return false
		}
	}
	return true
}
