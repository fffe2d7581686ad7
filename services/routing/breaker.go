package routing

import "time"

// The circuit breaker: after FailureThreshold consecutive failures an offering gets no traffic for OpenFor; then
// it is half-open, and one request at a time is let through as a trial, whose Success closes the circuit and
// whose Failure opens it for another OpenFor.
const (
	FailureThreshold = 3
	OpenFor          = 30 * time.Second
	// trialLease is how long a half-open trial handed out by Pick is waited for. Pick returns failover
	// candidates the gateway may never try, so a trial that reports neither Success nor Failure is given up
	// after this, and another request may try.
	trialLease = 10 * time.Second
)

// circuit is a breaker's state at an instant.
type circuit int

const (
	circuitClosed   circuit = iota
	circuitOpen             // no traffic, or a half-open trial is out
	circuitHalfOpen         // the next request may try
)

func (s *offeringState) circuitLocked(now time.Time) circuit {
	switch {
	case s.openUntil.IsZero():
		return circuitClosed
	case now.Before(s.openUntil) || now.Before(s.trialUntil):
		return circuitOpen
	default:
		return circuitHalfOpen
	}
}

// reserveTrial hands out the half-open trial, unless another Pick took it first.
func (s *offeringState) reserveTrial(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.circuitLocked(now) != circuitHalfOpen {
		return s.circuitLocked(now) == circuitClosed
	}
	s.trialUntil = now.Add(trialLease)
	return true
}

// Failure records that a request to the offering failed before its first byte: a connection error, a timeout
// or a 5xx status. The gateway then tries the next candidate.
func (r *Router) Failure(offeringID string) {
	s := r.state(offeringID)
	now := r.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	switch {
	case s.openUntil.IsZero() && s.failures >= FailureThreshold,
		!s.openUntil.IsZero() && !now.Before(s.openUntil): // a failed trial
		s.openUntil, s.trialUntil = now.Add(OpenFor), time.Time{}
	}
}

// Success records that the offering answered a request (its first byte came): it closes the circuit.
func (r *Router) Success(offeringID string) {
	s := r.state(offeringID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures, s.openUntil, s.trialUntil = 0, time.Time{}, time.Time{}
}
