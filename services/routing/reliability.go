package routing

import (
	"slices"

	"github.com/gpumarket/gpumarket/services/reliability"
)

// Reliability in routing (docs/reliability.md, "Routing"). Each offering's uptime over the last day, counted
// from the gateway's record in PostgreSQL, places it: at or above reliability.PreferredPercent, or with fewer
// than reliability.WarmUp requests in the day, it is preferred; below, degraded, tried only after every
// preferred candidate; below reliability.FallbackPercent, a fallback, tried only when no other candidate is
// left. Every replica reads the same figures, refreshed over the same windows, so they place each offering
// alike.

// Standings tells where an offering stands by its uptime; *reliability.Board implements it.
type Standings interface {
	Standing(offeringID string) reliability.Standing
}

var _ Standings = (*reliability.Board)(nil)

// standing is the offering's standing, preferred when the router has no figures.
func (r *Router) standing(offeringID string) reliability.Standing {
	if r.cfg.Reliability == nil {
		return reliability.Preferred
	}
	return r.cfg.Reliability.Standing(offeringID)
}

// byStanding groups the candidates by standing, preferred first, each group in the candidates' order.
func byStanding(cs []choice) [][]choice {
	groups := make([][]choice, reliability.Fallback+1)
	for _, c := range cs {
		groups[c.standing] = append(groups[c.standing], c)
	}
	return slices.DeleteFunc(groups, func(g []choice) bool { return len(g) == 0 })
}
