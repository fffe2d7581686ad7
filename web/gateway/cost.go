package gateway

import (
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// What a request cost, in its answer.
//
// As OpenRouter does, the usage object of an answer carries "cost": what the request costs its customer, in
// dollars, as a JSON number (exact: twelve decimal places, picodollars). It is the gateway's figure: the answer's
// reported tokens, each bounded by the route ticket (routing.BoundsFor), at the price the ticket names (the
// cached prompt tokens the usage reports, within the input, at its cached input price) — the
// figure the meter bills unless the rig's own report, checked against what the gateway saw, comes in lower
// (docs/metering-integrity.md). The usage API has the meter's final figure. A generation that produced no output
// token costs nothing, and an embedding its input, as the meter bills them. It goes in the usage member of a whole
// answer the gateway reads whole (relaySmall: every answer of known length up to maxUsageScan) and in a stream's
// usage chunk when the client asked for it; an answer of unknown or larger length carries none.

// costOf is the request's cost for the usage an answer reported; ok is false when there is none to tell.
func costOf(a *attempt, req *gatewayRequest, u *admission.TokenCount) (money.Pico, bool) {
	if u == nil {
		return 0, false
	}
	in, out := u.Input, u.Output
	if b := req.bounds.MaxInputTokens; b > 0 {
		in = min(in, b)
	}
	if req.ep.kind == ticket.KindEmbedding {
		out = 0
	} else {
		if b := req.bounds.MaxOutputTokens; b >= 0 {
			out = min(out, b)
		}
		if out == 0 {
			return 0, true
		}
	}
	// The meter bills no fewer cached tokens than the answer shows (docs/metering-integrity.md, "Cached input
	// tokens"), so the figure priced with them is still what it bills at most.
	cached := min(max(u.Cached, 0), in)
	ci, err := money.ChargeFor(in-cached, a.cand.PriceInput)
	if err != nil {
		return 0, false
	}
	cc, err := money.ChargeFor(cached, a.cand.PriceCachedInput)
	if err != nil {
		return 0, false
	}
	if ci, err = ci.Add(cc); err != nil {
		return 0, false
	}
	co, err := money.ChargeFor(out, a.cand.PriceOutput)
	if err != nil {
		return 0, false
	}
	c, err := ci.Add(co)
	return c, err == nil
}
