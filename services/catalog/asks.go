package catalog

import (
	"fmt"
	"strings"

	"github.com/gpumarket/gpumarket/services/money"
)

// Fields of a listing's asks, as forms, the API and field errors name them.
const (
	FieldAskInput  = "ask_input_usd_per_mtok"
	FieldAskOutput = "ask_output_usd_per_mtok"
)

// maxAsk bounds an ask: $1,000 per million tokens.
const maxAsk = 1000 * 1_000_000

// Covers reports whether the tier at this price may carry an offering with these asks: neither
// ask is above the price of the same kind of token. Then whatever a request's mix of input and
// output tokens, its customer pays at least what its provider is paid. Listing, the public
// catalog and routing all go by it.
func (p Price) Covers(askInput, askOutput money.MicroUSD) bool {
	return askInput <= p.Input && askOutput <= p.Output
}

// AskProblems says, by ask field, why asks cannot be carried in the tier at prices (the prices
// in force for the listing's model: its own row, else the tier's default; ModelPricesAt): each
// ask above the price of its kind of token, or the tier having no price at all. It is empty when
// the price covers both.
func AskProblems(tier Tier, prices map[Tier]Price, askInput, askOutput money.MicroUSD) map[string]string {
	p, ok := prices[tier]
	if !ok {
		return map[string]string{FieldAskInput: fmt.Sprintf(
			"The %s tier has no price yet, so no rig in it can be paid; list it once the platform has priced the tier.", tier)}
	}
	out := map[string]string{}
	whose := fmt.Sprintf("the %s tier's price", tier)
	if p.Model != "" {
		whose = fmt.Sprintf("the %s tier's price for %s", tier, p.Model)
	}
	above := func(field, kind string, ask, price money.MicroUSD) {
		if ask > price {
			out[field] = fmt.Sprintf("Your ask for %s tokens, %s per million, is above %s of %s: "+
				"customers would pay less than you are paid. Ask at most %s.", kind, ask, whose, price, price)
		}
	}
	above(FieldAskInput, "input", askInput, p.Input)
	above(FieldAskOutput, "output", askOutput, p.Output)
	return out
}

// Priced reports whether the offering's tier, at prices (the prices in force for its model,
// ModelPricesAt), covers its asks: only then does the public catalog list it and routing send it
// traffic.
func (o Offering) Priced(prices map[Tier]Price) bool {
	p, ok := prices[o.Tier]
	return ok && p.Covers(o.AskInput, o.AskOutput)
}

// NotRoutedBecause tells the offering's provider why, at prices (for its model), its rig is neither listed in the
// public catalog nor routed to, and what to do; "" when its asks are within its tier's price.
func (o Offering) NotRoutedBecause(prices map[Tier]Price) string {
	problems := AskProblems(o.Tier, prices, o.AskInput, o.AskOutput)
	if len(problems) == 0 {
		return ""
	}
	parts := []string{"Not routed and not in the public catalog."}
	for _, f := range []string{FieldAskInput, FieldAskOutput} {
		if m := problems[f]; m != "" {
			parts = append(parts, m)
		}
	}
	return strings.Join(parts, " ")
}
