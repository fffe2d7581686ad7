package routing

import (
	"strings"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// How a gateway request's own words become a routing Request (docs/gateway.md, "The rules the
// gateway asks of the services"): the tier is the first of a model suffix (<model>:realtime,
// :standard or :batch), the X-GPUMarket-Tier header, the body's gpumarket.tier, the API key's
// default tier, else standard; the routing order is the body's gpumarket.prefer, else the key's
// setting, else the cheapest first. The gateway checks each field's spelling first, answering a
// bad one beside its name; these rules take what it checked.

// Ask is what a request and its API key say about where it is served.
type Ask struct {
	// Model is the model as the request named it, with or without a tier suffix.
	Model string
	// HeaderTier and BodyTier are the tier the X-GPUMarket-Tier header and gpumarket.tier name;
	// "" where they name none.
	HeaderTier, BodyTier catalog.Tier
	// PreferCarbon is gpumarket.prefer: true for "carbon", false for "price", nil when unsaid.
	PreferCarbon *bool
	// The caps and the pinned offering of the body's gpumarket object (Request).
	MaxPricePerMTok money.MicroUSD
	MaxTTFTMillis   float64
	Offering        string
	// Preferences are the body's provider object and gpumarket's own rules of its gpumarket object
	// (preferences.go); nil when the body gives none.
	Preferences *Preferences
	// KeyTier and KeyPrefersCarbon are the API key's default tier ("" for none) and routing order.
	KeyTier          catalog.Tier
	KeyPrefersCarbon bool
}

// SplitModelTier splits a tier suffix off a model's name: "m:batch" is m in the batch tier. A
// suffix that is no tier is part of the name ("org/model:v2" names that model, tier "").
func SplitModelTier(model string) (string, catalog.Tier) {
	if i := strings.LastIndexByte(model, ':'); i >= 0 && catalog.Tier(model[i+1:]).Valid() {
		return model[:i], catalog.Tier(model[i+1:])
	}
	return model, ""
}

// RequestFor is the routing request an ask makes: the model without its tier suffix, the
// tier by the first that names one, the caps, the preferences, and the routing order (an explicit
// provider.sort orders instead of the carbon preference: rankingFor).
func RequestFor(a Ask) Request {
	model, tier := SplitModelTier(a.Model)
	for _, t := range []catalog.Tier{a.HeaderTier, a.BodyTier, a.KeyTier, catalog.TierStandard} {
		if tier != "" {
			break
		}
		tier = t
	}
	carbon := a.KeyPrefersCarbon
	if a.PreferCarbon != nil {
		carbon = *a.PreferCarbon
	}
	return Request{Model: model, Tier: tier, MaxPricePerMTok: a.MaxPricePerMTok, MaxTTFTMillis: a.MaxTTFTMillis,
		Offering: a.Offering, PreferCarbon: carbon, Preferences: a.Preferences}
}
