package gateway

import (
	"net/http"
	"strconv"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/routing"
)

// The carbon of an answer (docs/planner-and-carbon-routing.md). Every answer from a rig whose
// carbon routing can estimate carries the estimate per million tokens as a header; a whole
// (non-streaming) answer also carries the request's own estimate, its usage's tokens times the
// estimate per token: as a header when the answer is small enough to read before relaying it
// (every chat answer is), and otherwise as a trailer, since the gateway relays a large body
// as it comes and learns its usage only at its end, after the headers have gone.
const (
	CarbonPerMTokHeader = "X-GPUMarket-Gco2e-Per-Mtok"
	CarbonHeader        = "X-GPUMarket-Gco2e"
)

// The two in their canonical form, as Header.Set would write them, to be set without
// canonicalising them anew on every answer.
var (
	carbonPerMTokKey = http.CanonicalHeaderKey(CarbonPerMTokHeader)
	carbonKey        = http.CanonicalHeaderKey(CarbonHeader)
)

// setCarbonHeaders sets the estimate per million tokens and, for a whole answer, announces the
// request's estimate as a trailer. It reports whether it did.
func setCarbonHeaders(h http.Header, cand routing.Candidate, whole bool) (trailer bool) {
	if cand.GCO2ePerToken <= 0 {
		return false
	}
	h[carbonPerMTokKey] = []string{strconv.FormatFloat(carbon.PerMillionTokens(cand.GCO2ePerToken), 'f', 3, 64)}
	if whole {
		h.Set("Trailer", CarbonHeader)
	}
	return whole
}

// setCarbonTrailer sets the request's estimate from the tokens its answer reported.
func setCarbonTrailer(h http.Header, cand routing.Candidate, o outcome) {
	if o.usage == nil || cand.GCO2ePerToken <= 0 {
		return
	}
	tokens := float64(o.usage.Input + o.usage.Output)
	h[carbonKey] = []string{strconv.FormatFloat(tokens*cand.GCO2ePerToken, 'f', 6, 64)}
}
