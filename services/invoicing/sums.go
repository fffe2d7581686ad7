package invoicing

import (
	"time"

	"github.com/gpumarket/gpumarket/services/money"
)

// usageSums are sums of hourly rollups, or of the document lines that invoiced them, under one
// line's key.
type usageSums struct {
	requests, input, output                            int64
	unchargedRequests, unchargedInput, unchargedOutput int64
	// cached and unchargedCached are the cached input tokens among input and unchargedInput.
	cached, unchargedCached int64
	charge, payable         money.BigPico
}

func (a usageSums) plus(b usageSums) usageSums {
	return usageSums{
		requests: a.requests + b.requests, input: a.input + b.input, output: a.output + b.output,
		unchargedRequests: a.unchargedRequests + b.unchargedRequests, unchargedInput: a.unchargedInput + b.unchargedInput,
		unchargedOutput: a.unchargedOutput + b.unchargedOutput,
		cached:          a.cached + b.cached, unchargedCached: a.unchargedCached + b.unchargedCached,
		charge: a.charge.Add(b.charge), payable: a.payable.Add(b.payable),
	}
}

func (a usageSums) minus(b usageSums) usageSums {
	return a.plus(usageSums{
		requests: -b.requests, input: -b.input, output: -b.output, unchargedRequests: -b.unchargedRequests,
		unchargedInput: -b.unchargedInput, unchargedOutput: -b.unchargedOutput, cached: -b.cached,
		unchargedCached: -b.unchargedCached, charge: b.charge.Neg(), payable: b.payable.Neg(),
	})
}

// zero reports whether nothing is left: no request, token or money.
func (a usageSums) zero() bool {
	return a.requests == 0 && a.input == 0 && a.output == 0 && a.unchargedRequests == 0 && a.unchargedInput == 0 &&
		a.unchargedOutput == 0 && a.cached == 0 && a.unchargedCached == 0 && a.charge.Sign() == 0 && a.payable.Sign() == 0
}

// pricedAt is what the sums' charged tokens cost at the unit prices: the charged cached input
// tokens at cached, the rest of the charged input at in, the charged output at out. It is the
// charge the line must carry, exactly, when the rows were priced at them.
func (a usageSums) pricedAt(in, cached, out int64) money.BigPico {
	chargedCached := a.cached - a.unchargedCached
	return mul(a.input-a.unchargedInput-chargedCached, in).Add(mul(chargedCached, cached)).Add(mul(a.output-a.unchargedOutput, out))
}

// mul is tokens × price picodollars, exactly.
func mul(tokens, price int64) money.BigPico {
	if p, err := money.ChargeFor(abs(tokens), money.MicroUSD(abs(price))); err == nil {
		if (tokens < 0) != (price < 0) {
			return money.BigPicoOf(p).Neg()
		}
		return money.BigPicoOf(p)
	}
	// Past the range of money.Pico: add the product up in halves of the tokens, exactly.
	half := tokens / 2
	return mul(half, price).Add(mul(tokens-half, price))
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// usageKey is an invoice line's key: tier, model and price version.
type usageKey struct {
	tier, model string
	priceID     int64
}

// offerKey is a statement line's key: offering, model and asks.
type offerKey struct {
	offering, model string
	askIn, askOut   int64
	askCached       int64 // the cached input ask: the input ask scaled by its price version's ratio
}

// byPeriod holds a document's sums for its own period and the one before, whose late usage it
// may carry.
type byPeriod[K comparable] struct {
	current, earlier map[K]usageSums
}

func newByPeriod[K comparable]() byPeriod[K] {
	return byPeriod[K]{current: map[K]usageSums{}, earlier: map[K]usageSums{}}
}

func (b byPeriod[K]) add(current bool, k K, s usageSums) {
	m := b.earlier
	if current {
		m = b.current
	}
	m[k] = m[k].plus(s)
}

// shareSums are a provider's part of an account's usage.
type shareSums struct {
	charge, payable money.BigPico
}

// price is a row of the price book as a line shows it.
type price struct {
	input, output, cached money.MicroUSD
	from                  time.Time
	model                 string // "" for a tier's default
}

// ledgerFigures are what the ledger holds of one ledger account for a period: its balance now,
// the sums of its postings of transactions that occurred since the period's start and since
// its end, the period's sums per kind of transaction, and its transactions other than usage.
type ledgerFigures struct {
	balance, sinceStart, sinceEnd money.BigPico
	byKind                        map[string]money.BigPico
	entries                       []ledgerEntry
}

// ledgerEntry is a transaction of the period, with the credit note it records if any.
type ledgerEntry struct {
	LedgerEntry
	creditNoteID, creditNoteNumber string
}

func (f ledgerFigures) opening() money.BigPico { return f.balance.Add(f.sinceStart.Neg()) }
func (f ledgerFigures) closing() money.BigPico { return f.balance.Add(f.sinceEnd.Neg()) }

// moved reports whether anything was posted in the period.
func (f ledgerFigures) moved() bool {
	for _, v := range f.byKind {
		if v.Sign() != 0 {
			return true
		}
	}
	return len(f.entries) > 0
}
