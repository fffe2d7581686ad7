package metering

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// What a request costs its customer and earns its provider (see docs/metering-integrity.md):
// its billable tokens at the price version and the asks its route ticket fixed at routing.

// priceRow is a version of a tier's price (a row of prices), in micro-dollars per million
// tokens: the tier's default, or the price of one model in the tier.
type priceRow struct {
	id          int64
	tier        string
	model       string // "" for the tier's default
	input, outp int64
	cached      int64 // a cached input token's price, at most input
}

// terms are what a request is billed at: the customer's price and the provider's asks.
type terms struct {
	price         priceRow
	askIn, askOut int64
	// askCached is what the provider is paid per million cached input tokens: cachedAsk.
	askCached      int64
	kind           ticket.Kind
	embeddingValid bool // for an embedding: the rig reported it served it (status ok)
}

// newTerms are the terms of a price version and a ticket's asks.
func newTerms(p priceRow, askIn, askOut int64, kind ticket.Kind, embeddingValid bool) terms {
	return terms{price: p, askIn: askIn, askOut: askOut, askCached: cachedAsk(askIn, p), kind: kind,
		embeddingValid: embeddingValid}
}

// cachedAsk is the provider's ask for a cached input token: its input ask scaled by the ratio
// of the price version's cached price to its input price, rounded down, so that caching takes
// from the provider's pay the share it takes from the customer's charge and never more (the
// provider keeps the rounding's fraction of a micro-dollar per million tokens away from it, the
// platform keeps it). At an input price of $0 there is no ratio: caching changes no charge, and
// no pay either. The product is taken in 128 bits; the quotient is at most askIn.
func cachedAsk(askIn int64, p priceRow) int64 {
	if askIn <= 0 || p.input <= 0 || p.cached < 0 || p.cached >= p.input {
		return askIn // no ask, or no discount to pass on (the price book keeps cached within input)
	}
	hi, lo := bits.Mul64(uint64(askIn), uint64(p.cached))
	q, _ := bits.Div64(hi, lo, uint64(p.input))
	return int64(q)
}

// charges is what tokens cost the customer and earn the provider at the terms: cached of the
// in input tokens at the cached price and cached ask, the rest of them at the input price and
// ask, out at the output price and ask. A generation that produced no completion token costs
// and earns nothing; an embedding, which never produces one, is charged for its input when it
// succeeded. cached is at most in (billableTokens). Amounts past the range of money.Pico are
// money.ErrOverflow.
func (t terms) charges(in, cached, out int64) (charge, payable money.Pico, err error) {
	if t.kind == ticket.KindEmbedding {
		if !t.embeddingValid {
			return 0, 0, nil
		}
		out = 0
	} else if out == 0 {
		return 0, 0, nil
	}
	cached = min(max(cached, 0), in)
	if charge, err = cost(in-cached, t.price.input, cached, t.price.cached, out, t.price.outp); err != nil {
		return 0, 0, err
	}
	if payable, err = cost(in-cached, t.askIn, cached, t.askCached, out, t.askOut); err != nil {
		return 0, 0, err
	}
	return charge, payable, nil
}

// cost is in tokens at inPrice, cached tokens at cachedPrice and out tokens at outPrice,
// exactly.
func cost(in, inPrice, cached, cachedPrice, out, outPrice int64) (money.Pico, error) {
	var sum money.Pico
	for _, part := range [...]struct{ n, price int64 }{{in, inPrice}, {cached, cachedPrice}, {out, outPrice}} {
		c, err := money.ChargeFor(part.n, money.MicroUSD(part.price))
		if err != nil {
			return 0, err
		}
		if sum, err = sum.Add(c); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// keepFlag decides whether a bill's flag goes on the discrepancies page: when the rig's
// report would have cost the customer more than was billed, or, for a bill that could not be
// checked against a complete record of the request, when it cost anything at all. A flag on
// a request that costs nothing either way (a failed attempt reported as such) is no
// discrepancy.
func keepFlag(f Flag, reported money.Pico, reportedOverflow bool, billed money.Pico) bool {
	switch {
	case f == "":
		return false
	case reportedOverflow || reported > billed:
		return true
	case f == FlagIncomplete || f == FlagNoGatewayRecord:
		return billed > 0
	default:
		return false
	}
}

// batchSums are what a batch charges each customer account and owes each of its providers:
// each becomes one ledger posting, whose amount is a money.Pico. An event whose addition
// would take a sum past that range is refused (admit), never the batch.
type batchSums map[string]*accountSums

type accountSums struct {
	charge    money.Pico
	providers map[string]money.Pico
}

// admit adds an event's charge and payable to its account's sums, or leaves them unchanged
// and returns money.ErrOverflow when either would pass the range of money.Pico. Every sum of
// a batch that reaches the database (its rollups, its keys' spend, the platform's margin) is
// one of these or a part of one, and charges and payables are never negative, so that none
// of them can overflow either.
func (s batchSums) admit(account, provider string, charge, payable money.Pico) error {
	a := s[account]
	if a == nil {
		a = &accountSums{providers: map[string]money.Pico{}}
		s[account] = a
	}
	c, err := a.charge.Add(charge)
	if err != nil {
		return fmt.Errorf("the batch's charges to account %s: %w", account, err)
	}
	p, err := a.providers[provider].Add(payable)
	if err != nil {
		return fmt.Errorf("the batch's payables to provider %s for account %s: %w", provider, account, err)
	}
	a.charge, a.providers[provider] = c, p
	return nil
}

// judge prices the candidates by the references, in order: each is refused, deferred to
// wait for the gateway's record of its attempt, or priced. See docs/metering-integrity.md.
func (m *Meter) judge(cands []candidate, refs references, now time.Time, out *storeResult) []pricedEvent {
	priced := make([]pricedEvent, 0, len(cands))
	sums := batchSums{}
	waits := recordWaits{settle: m.cfg.SettleTime, max: m.cfg.RecordWait}
	for i := range cands {
		c := &cands[i]
		u := &c.ev.Data
		reject := func(reason usage.RejectReason, detail string) {
			out.rejections = append(out.rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: reason, Detail: detail})
		}
		off, ok := refs.offerings[u.OfferingID]
		if !ok {
			reject(RejectUnknownOffering, "no offering "+u.OfferingID)
			continue
		}
		provider := off.provider
		if !refs.accounts[c.claims.AccountID] {
			reject(usage.RejectTicketInvalid, "the ticket names no account the platform holds: "+c.claims.AccountID)
			continue
		}
		if provider != c.providerID {
			reject(RejectForeign, fmt.Sprintf("provider %s reported for offering %s of provider %s", c.providerID, u.OfferingID, provider))
			continue
		}
		p, ok := refs.prices[c.claims.PriceID]
		if !ok || p.tier != c.claims.Tier {
			reject(RejectNoPrice, fmt.Sprintf("the ticket's price version %d is no %s price of the price book", c.claims.PriceID, c.claims.Tier))
			continue
		}
		if p.model != "" && p.model != off.model {
			reject(RejectNoPrice, fmt.Sprintf("the ticket's price version %d prices %s, not the offering's %s", c.claims.PriceID, p.model, off.model))
			continue
		}
		var rec *gatewayRecord
		if refs.recorded[i] {
			rec = &refs.records[i]
		}
		age := time.Duration(0)
		if !c.msg.Stored.IsZero() {
			age = now.Sub(c.msg.Stored)
		}
		bill := billableTokens(*u, c.claims, rec, age, waits)
		if bill.wait > 0 {
			out.deferred = append(out.deferred, Deferral{Message: c.msg, EventID: c.ev.ID, Delay: bill.wait})
			continue
		}
		t := newTerms(p, c.claims.AskInput, c.claims.AskOutput, c.claims.Kind, u.Status == usage.StatusOK)
		charge, payable, err := t.charges(bill.in, bill.cached, bill.out)
		if err != nil {
			reject(RejectOverflow, fmt.Sprintf("%d input (%d cached) and %d output tokens at the ticket's terms: %v",
				bill.in, bill.cached, bill.out, err))
			continue
		}
		if payable > charge {
			reject(RejectAskAbovePrice, fmt.Sprintf("the ticket's asks (%d in, %d out per million tokens) would pay the provider %s "+
				"for a request its customer pays %s at price version %d", t.askIn, t.askOut, payable, charge, p.id))
			continue
		}
		if err := sums.admit(c.claims.AccountID, provider, charge, payable); err != nil {
			reject(RejectOverflow, fmt.Sprintf("the event's charge %s: %v", charge, err))
			continue
		}
		reported, _, rerr := t.charges(u.InputTokens, u.CachedInputTokens, u.OutputTokens)
		pe := pricedEvent{c: c, t: t, in: bill.in, cached: bill.cached, out: bill.out, charge: charge, payable: payable,
			account: c.claims.AccountID, provider: provider}
		if keepFlag(bill.flag, reported, rerr != nil, charge) {
			pe.flag, pe.flagReason = bill.flag, bill.detail
		}
		priced = append(priced, pe)
	}
	return priced
}
