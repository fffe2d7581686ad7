package routing

import (
	"cmp"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// Probes. An offering demoted by its measured P99 is offered only in a worse tier, and the traffic of that tier
// (batch above all) may bring it no streamed request at all: its window would then never hold the fresh times
// to first token that could earn its tier back. So the platform probes it itself: while an offering's live tier
// is worse than the tier its claim earns, each gateway replica sends it a small streamed request of its own
// every ProbeEvery (the gateway's prober), and observes it as any streamed request (Observe with Streamed set),
// shared with the other replicas. Once the window's P99 over the probes and whatever streamed traffic it still
// has is back under the better tier's bound with the margin to spare, Flush promotes it (nextTier), and
// customers' streamed requests judge it from then on.
//
// The same probes qualify a rig: an offering whose rig is pending or offline is probed while its agent
// heartbeats, and RecordProbe makes it active after catalog.ProbesToQualify passes in a row
// (docs/listing-states.md). Customers' requests never reach it until then (Pick).
const ProbeEvery = 3 * time.Second

// ProbeTargets returns the offerings to probe now, each as a candidate in its live tier, healthy by its
// heartbeat (from its own provider) and its circuit not open:
//   - a qualified offering in a worse live tier than the one its claimed P99 earns (batch when it claims none,
//     which is never worse), offered in both. An offering that is merely not offered in its tier (its asks
//     above the price) is not probed: no latency would bring it back.
//   - an offering whose rig is pending or offline, offered in its tier, marked Qualifying: its probes decide
//     whether it becomes active (RecordProbe). Its heartbeat says its agent is connected; without one there is
//     nothing to probe.
func (r *Router) ProbeTargets() []Candidate {
	snap := r.snap.Load()
	if snap == nil {
		return nil
	}
	now := r.cfg.Now()
	var out []Candidate
	for _, l := range snap.listed {
		v := l.state.view(now)
		if !v.healthy || v.provider != l.ProviderAccountID || v.circuit == circuitOpen {
			continue
		}
		tier := cmp.Or(v.tier, l.Tier)
		if l.qualified() {
			claimed := catalog.TierBatch
			if l.ClaimedTTFTP99Ms != nil {
				claimed = catalog.TierForP99(*l.ClaimedTTFTP99Ms)
			}
			if rank(tier) <= rank(claimed) {
				continue
			}
			if _, ok := snap.offered(l, claimed, now); !ok {
				continue
			}
		}
		price, ok := snap.offered(l, tier, now) // the probe is routed in the live tier, at its price
		if !ok {
			continue
		}
		out = append(out, Candidate{OfferingID: l.ID, ProviderID: l.ProviderAccountID, Model: l.Model, Tier: tier,
			Qualifying: !l.qualified(), PriceID: price.ID, PriceInput: price.Input, PriceOutput: price.Output,
			PriceCachedInput: price.CachedInput,
			AskInput:         l.AskInput, AskOutput: l.AskOutput, GPUName: l.GPUName, GPUCount: l.GPUCount,
			TTFTP50Ms: v.figures.TTFTP50Ms, TTFTP99Ms: v.figures.TTFTP99Ms, InFlight: v.load, Capacity: v.capacity})
	}
	return out
}
