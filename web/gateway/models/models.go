// Package models writes the entries of the /v1 gateway's GET /v1/models: each model on offer by its name and as
// <model>:<tier>, with its tiers and, in OpenRouter's shape, what its tokens cost. The gateway (package gateway),
// its only importer, serves them; this package imports none of the gateway's packages.
package models

import (
	"fmt"
	"strings"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
)

// Model is an entry of GET /v1/models, in OpenAI's shape, with the tiers it is offered in
// and, in OpenRouter's shape, what its tokens cost.
type Model struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	OwnedBy string         `json:"owned_by"`
	Tiers   []catalog.Tier `json:"tiers"`
	// Pricing is what a request naming the entry pays; absent for a bare model name whose tier
	// (standard, or the key's default tier) does not offer it.
	Pricing *Pricing `json:"pricing,omitempty"`
}

// Pricing is a price of the price book as OpenRouter's models API writes one: dollars
// per token, as decimal strings, for prompt (input) and completion (output) tokens, and for a prompt
// token the engine read from its cache.
type Pricing struct {
	Prompt         string `json:"prompt"`
	Completion     string `json:"completion"`
	InputCacheRead string `json:"input_cache_read"`
}

// pricingOf writes the price p in OpenRouter's shape.
func pricingOf(p catalog.Price) *Pricing {
	return &Pricing{Prompt: perToken(p.Input), Completion: perToken(p.Output), InputCacheRead: perToken(p.CachedInput)}
}

// perToken writes a price per million tokens as the exact decimal string of dollars per token:
// $0.90 per million is "0.0000009". A price in micro-dollars per million tokens is a price in
// 10^-12 dollars per token, so the division is a shift of the decimal point, never a float.
func perToken(perMillion money.MicroUSD) string {
	v, sign := int64(perMillion), ""
	if v < 0 {
		sign, v = "-", -v
	}
	const scale = 1_000_000_000_000
	frac := strings.TrimRight(fmt.Sprintf("%012d", v%scale), "0")
	if frac == "" {
		return fmt.Sprintf("%s%d", sign, v/scale)
	}
	return fmt.Sprintf("%s%d.%s", sign, v/scale, frac)
}

// Entries are the entries of GET /v1/models for the models on offer, seen by a key whose
// default tier is keyTier ("" for none): a bare model name is asked for in keyTier, else standard.
func Entries(list []routing.ModelTiers, keyTier catalog.Tier) []Model {
	bareTier := catalog.TierStandard
	if keyTier.Valid() {
		bareTier = keyTier
	}
	data := make([]Model, 0, 4*len(list))
	for _, m := range list {
		bare := Model{ID: m.Model, Object: "model", OwnedBy: "gpumarket", Tiers: m.Tiers}
		if p, ok := m.Prices[bareTier]; ok {
			bare.Pricing = pricingOf(p)
		}
		data = append(data, bare)
		for _, t := range m.Tiers {
			e := Model{ID: m.Model + ":" + string(t), Object: "model", OwnedBy: "gpumarket", Tiers: []catalog.Tier{t}}
			if p, ok := m.Prices[t]; ok {
				e.Pricing = pricingOf(p)
			}
			data = append(data, e)
		}
	}
	return data
}
