package catalog

// Tier is a service level that an offering's latency earns.
type Tier string

const (
	TierRealtime Tier = "realtime" // P99 time to first token <= 55 ms
	TierStandard Tier = "standard" // P99 time to first token <= 500 ms
	TierBatch    Tier = "batch"    // no latency promise; finished within 24 h
)

// Tiers in the order pages show them.
var Tiers = []Tier{TierRealtime, TierStandard, TierBatch}

// TierRank is a tier's place in Tiers, for sorting by tier; an unknown tier comes last.
func TierRank(t string) int {
	for i, x := range Tiers {
		if string(x) == t {
			return i
		}
	}
	return len(Tiers)
}

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return t == TierRealtime || t == TierStandard || t == TierBatch }

// Promise says in words what the tier guarantees.
func (t Tier) Promise() string {
	switch t {
	case TierRealtime:
		return "P99 time to first token ≤ 55 ms"
	case TierStandard:
		return "P99 time to first token ≤ 500 ms"
	default:
		return "no latency promise; finished within 24 h"
	}
}

// Tier bounds on P99 time to first token, in milliseconds.
const (
	RealtimeMaxP99Ms = 55
	StandardMaxP99Ms = 500
)

// TierForP99 is the tier a P99 time to first token earns.
func TierForP99(p99Ms float64) Tier {
	switch {
	case p99Ms <= RealtimeMaxP99Ms:
		return TierRealtime
	case p99Ms <= StandardMaxP99Ms:
		return TierStandard
	default:
		return TierBatch
	}
}
