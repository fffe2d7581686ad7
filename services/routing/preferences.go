package routing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/services/money"
)

// Provider preferences (docs/gateway.md, "Provider preferences"). A request may say where it is served the way
// OpenRouter's "provider" object says it (order, only, ignore, sort, max_price, allow_fallbacks), and by
// gpumarket's own rules of its "gpumarket" object (hardware class, region, a cap on carbon). They narrow and
// order the candidates that the tier, the caps, health and circuits leave; they never admit an offering those
// rules refuse.
//
// A provider is named as the catalog shows it, by its display name, case and punctuation aside ("Lisboa
// Compute", "lisboa-compute"), or one of its offerings by id: an entry names every offering of the model whose
// provider has that name, or the one offering with that id.

// Sort is an explicit order of the candidates (provider.sort). An explicit sort ranks strictly by its figure:
// there is no draw among near-equals.
type Sort string

const (
	// SortPrice is the cheapest ask first. The customer pays the tier's price whichever rig serves, so price
	// here is what the provider asks, as in gpumarket's default order.
	SortPrice Sort = "price"
	// SortThroughput is the most tokens per second first: the live window's figure once it holds
	// catalog.MinMeasuredRequests requests, else the catalog's measured or claimed one; unknown last.
	SortThroughput Sort = "throughput"
	// SortLatency is the shortest expected time to first token first: the P50 routing expects (live once the
	// window holds enough traffic, else the catalog's), longer the more loaded the rig (choice.wait).
	SortLatency Sort = "latency"
)

// Valid reports whether the sort is one routing knows.
func (s Sort) Valid() bool { return s == SortPrice || s == SortThroughput || s == SortLatency }

// Hardware classes, as services/hardware classes each GPU model.
const (
	HardwareConsumer   = "consumer"
	HardwareEnterprise = "enterprise"
)

// Preferences are a request's provider preferences. The zero value changes nothing.
type Preferences struct {
	// Order names providers or offerings to try first, in this order; the others follow in routing's own order
	// unless NoFallbacks (provider.order).
	Order []string
	// Only keeps the offerings an entry names (provider.only); Ignore drops them (provider.ignore).
	Only   []string
	Ignore []string
	// Sort is an explicit order ("": routing's own, the cheapest with a draw among near-equals).
	Sort Sort
	// NoFallbacks is provider.allow_fallbacks false: with Order, only the offerings it names, in its order;
	// without, only the first candidate. The gateway fails over among those alone.
	NoFallbacks bool
	// MaxPromptPrice and MaxCompletionPrice cap what the request pays per million input and output tokens
	// (provider.max_price.prompt and .completion): the tier's price in force that a candidate's route ticket
	// would carry. Nil means no cap; a cap of 0 admits only a free tier.
	MaxPromptPrice     *money.MicroUSD
	MaxCompletionPrice *money.MicroUSD
	// HardwareClass keeps the offerings whose GPU is of the class, consumer or enterprise, as services/hardware
	// classes it (gpumarket.hardware_class); "" keeps every class.
	HardwareClass string
	// Regions keeps the offerings in one of the regions, by code (gpumarket.region); empty keeps every region.
	Regions []string
	// MaxGCO2ePerMTok caps the estimated grams of CO2e per million tokens (gpumarket.max_gco2e_per_mtok,
	// carbon.go); an offering without an estimate is not shown to be under it, and is dropped. 0 means no cap.
	MaxGCO2ePerMTok float64
}

// Check returns the first problem with the preferences' own values, and the field it is about, named as in the
// gateway's request body; "" when there is none. Whether the names exist is checked against the catalog by Pick.
func (p *Preferences) Check() (field, problem string) {
	if p == nil {
		return "", ""
	}
	for _, l := range []struct {
		field   string
		entries []string
	}{{"provider.order", p.Order}, {"provider.only", p.Only}, {"provider.ignore", p.Ignore}} {
		for _, e := range l.entries {
			if nameKey(e) == "" {
				return l.field, fmt.Sprintf("%s names a provider by its name as the catalog shows it, or an offering by its id; %q is neither.", l.field, e)
			}
		}
	}
	for _, e := range p.Only {
		if slices.ContainsFunc(p.Ignore, func(i string) bool { return nameKey(i) == nameKey(e) }) {
			return "provider.ignore", fmt.Sprintf("provider.only and provider.ignore both name %q: keep it in one of them.", e)
		}
	}
	if p.NoFallbacks {
		for _, e := range p.Order {
			if slices.ContainsFunc(p.Ignore, func(i string) bool { return nameKey(i) == nameKey(e) }) {
				return "provider.order", fmt.Sprintf("provider.order names %q, which provider.ignore drops, and allow_fallbacks is false.", e)
			}
		}
	}
	if p.Sort != "" && !p.Sort.Valid() {
		return "provider.sort", `provider.sort must be "price", "throughput" or "latency".`
	}
	if p.MaxPromptPrice != nil && *p.MaxPromptPrice < 0 {
		return "provider.max_price.prompt", "provider.max_price.prompt is dollars per million prompt tokens, 0 or more."
	}
	if p.MaxCompletionPrice != nil && *p.MaxCompletionPrice < 0 {
		return "provider.max_price.completion", "provider.max_price.completion is dollars per million completion tokens, 0 or more."
	}
	if p.HardwareClass != "" && p.HardwareClass != HardwareConsumer && p.HardwareClass != HardwareEnterprise {
		return "gpumarket.hardware_class", `gpumarket.hardware_class must be "consumer" (e.g. RTX 4090) or "enterprise" (e.g. H100).`
	}
	for _, code := range p.Regions {
		if _, ok := hardware.RegionByCode(code); !ok {
			codes := make([]string, len(hardware.Regions))
			for i, r := range hardware.Regions {
				codes[i] = r.Code
			}
			return "gpumarket.region", fmt.Sprintf("gpumarket.region %q is not a region rigs are listed in; use one of %s.", code, strings.Join(codes, ", "))
		}
	}
	if p.MaxGCO2ePerMTok < 0 {
		return "gpumarket.max_gco2e_per_mtok", "gpumarket.max_gco2e_per_mtok is grams of CO2e per million tokens, more than 0."
	}
	return "", ""
}

// nameKey is how an entry, or a provider's display name, is compared: lower case, every run of characters
// other than letters and digits one hyphen, none at either end. An offering's id is its own key.
func nameKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	hyphen := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		hyphen = true
	}
	return b.String()
}

// names reports whether an entry names the offering: its id, or its provider's display name.
func (l *listed) names(entry string) bool {
	return entry == l.ID || (l.providerKey != "" && nameKey(entry) == l.providerKey)
}

func (l *listed) namedBy(entries []string) bool {
	return slices.ContainsFunc(entries, l.names)
}

// preferenceError is a request whose preferences leave no offering, naming the field that did.
func preferenceError(code services.Code, field, message string) error {
	return &services.Error{Code: code, Cause: ErrPreferences, Message: message, Fields: map[string]string{field: message}}
}

// resolve checks the names of the preferences against every listed offering of the model, in any tier or
// state: provider.only must name at least one, and, when allow_fallbacks is false, every entry of provider.order
// one; provider.ignore may not drop every offering provider.only keeps. An entry that names nothing otherwise
// is let be: the provider may list the model later.
func (p *Preferences) resolve(model string, ls []*listed) error {
	if len(p.Only) > 0 {
		var kept []*listed
		for _, l := range ls {
			if l.namedBy(p.Only) {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			return preferenceError(services.CodeNotFound, "provider.only",
				fmt.Sprintf("provider.only names no provider or offering of %s (%s); the catalog lists who serves it.", model, strings.Join(p.Only, ", ")))
		}
		if !slices.ContainsFunc(kept, func(l *listed) bool { return !l.namedBy(p.Ignore) }) {
			return preferenceError(services.CodeInvalid, "provider.ignore",
				fmt.Sprintf("provider.ignore drops every offering of %s that provider.only keeps.", model))
		}
	}
	if p.NoFallbacks {
		for _, e := range p.Order {
			if !slices.ContainsFunc(ls, func(l *listed) bool { return l.names(e) }) {
				return preferenceError(services.CodeNotFound, "provider.order",
					fmt.Sprintf("provider.order names %q, no provider or offering of %s, and allow_fallbacks is false: name who serves it, or allow fallbacks.", e, model))
			}
		}
	}
	return nil
}

// filter keeps the choices the preferences admit, one rule at a time; the first rule that leaves none is the
// field the error names.
func (p *Preferences) filter(model string, tier catalog.Tier, cs []choice) ([]choice, error) {
	rules := []struct {
		field string
		keep  func(c choice) bool
		why   func() string
	}{
		{"provider.only", func(c choice) bool { return len(p.Only) == 0 || c.namedBy(p.Only) },
			func() string { return "none of the offerings it names is in the tier and under the caps" }},
		{"provider.ignore", func(c choice) bool { return !c.namedBy(p.Ignore) },
			func() string { return "it drops every offering in the tier under the caps" }},
		{"provider.order", func(c choice) bool { return !p.NoFallbacks || len(p.Order) == 0 || c.namedBy(p.Order) },
			func() string {
				return "allow_fallbacks is false, and none of the offerings it names is in the tier and under the caps"
			}},
		{"provider.max_price.prompt", func(c choice) bool { return p.MaxPromptPrice == nil || c.price.Input <= *p.MaxPromptPrice },
			func() string {
				return fmt.Sprintf("the tier's price per million prompt tokens is above $%s", p.MaxPromptPrice.Decimal())
			}},
		{"provider.max_price.completion", func(c choice) bool {
			return p.MaxCompletionPrice == nil || c.price.Output <= *p.MaxCompletionPrice
		}, func() string {
			return fmt.Sprintf("the tier's price per million completion tokens is above $%s", p.MaxCompletionPrice.Decimal())
		}},
		{"gpumarket.hardware_class", func(c choice) bool { return p.HardwareClass == "" || c.hardwareClass() == p.HardwareClass },
			func() string { return fmt.Sprintf("none runs on %s GPUs", p.HardwareClass) }},
		{"gpumarket.region", func(c choice) bool { return len(p.Regions) == 0 || slices.Contains(p.Regions, c.Region) },
			func() string { return fmt.Sprintf("none runs in %s", strings.Join(p.Regions, " or ")) }},
		{"gpumarket.max_gco2e_per_mtok", func(c choice) bool {
			return p.MaxGCO2ePerMTok == 0 || (c.gco2ePerToken > 0 && c.gco2ePerToken*1e6 <= p.MaxGCO2ePerMTok)
		}, func() string {
			return fmt.Sprintf("none is estimated at %g gCO2e per million tokens or less", p.MaxGCO2ePerMTok)
		}},
	}
	for _, rule := range rules {
		if cs = slices.DeleteFunc(cs, func(c choice) bool { return !rule.keep(c) }); len(cs) == 0 {
			return nil, preferenceError(services.CodeUnavailable, rule.field,
				fmt.Sprintf("No offering of %s in the %s tier meets %s: %s.", model, tier, rule.field, rule.why()))
		}
	}
	return cs, nil
}

// hardwareClass is the class of the offering's GPU, "" for a GPU services/hardware does not list.
func (c choice) hardwareClass() string {
	g, _ := hardware.GPUBySKU(c.GPU)
	return g.Class
}

// bySort is the order of an explicit sort: rigs with room before saturated ones, then the sort's figure, then
// the blended ask and the id.
func bySort(s Sort) func(a, b choice) int {
	return func(a, b choice) int {
		if a.saturated != b.saturated {
			if a.saturated {
				return 1
			}
			return -1
		}
		var by int
		switch s {
		case SortThroughput:
			if (a.tps > 0) != (b.tps > 0) {
				if a.tps > 0 {
					return -1
				}
				return 1
			}
			by = cmp.Compare(b.tps, a.tps)
		case SortLatency:
			by = cmp.Compare(a.wait(), b.wait())
		}
		return cmp.Or(by, cmp.Compare(a.askSum(), b.askSum()), strings.Compare(a.ID, b.ID))
	}
}
