package invoicing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// What an invoice is computed from, for one account and period, and the computation itself:
// a pure function of what load read, so that the close and an approval compute a draft the
// same way (see docs/invoicing.md, "The close").

// existingDoc is a document already stored for the account and a period.
type existingDoc struct {
	id, status, number string
	poNumber           *string // a fixed PO number (a regenerated draft's); nil follows the customer's
}

// creditGiven is a credit note that put money back for the account's period: the regenerated
// invoice shows it as a credit line.
type creditGiven struct {
	id, number string
	reason     VoidReason
	credited   money.BigPico
	clawedBack money.BigPico
}

// customerInputs is everything an account's invoice for a period is computed from.
type customerInputs struct {
	accountID, accountName string
	details                BillingDetails
	current                *existingDoc // the period's invoice, if any
	// carriesLate says whether this invoice carries the earlier period's late usage: that
	// period was closed and the account has no draft for it (a draft gets its own late usage
	// when it is approved).
	carriesLate bool
	usage       byPeriod[usageKey] // the rollups
	invoiced    byPeriod[usageKey] // what issued invoices already billed of the same usage
	shares      byPeriod[string]   // the rollups by provider
	sharesBy    byPeriod[string]   // what issued invoices already billed of them
	ledger      ledgerFigures
	credits     []creditGiven
	previous    *Cents // the previous period's invoice total
	// flagged counts the period's requests flagged with an excess above zero that finance has
	// not resolved, flaggedCharge what the customer was charged for them.
	flagged       int64
	flaggedCharge money.BigPico
}

// invoiceDraft is a computed invoice.
type invoiceDraft struct {
	lines   []InvoiceLine
	shares  []providerShare
	entries []LedgerEntry
	balance BalanceSummary
	total   Cents
	due     Cents
	flags   []Flag
	notes   map[Flag]string // what each flag is about, and how much
	// active is false when the account did nothing in the period that an invoice would show.
	active bool
}

// providerShare is a provider's part of an invoice's usage of one period.
type providerShare struct {
	usagePeriod Period
	provider    string
	shareSums
}

// buildInvoice computes the account's invoice for period p from its inputs.
//
// Its usage lines are the period's rollups per tier, model and price version, less what issued
// invoices already billed of them (nothing, unless a voided invoice's replacement or an earlier
// close left some); its late-usage lines, when it carries them, the same for the period before.
// Credit notes that moved money for the period are credit lines. Each line is rounded to cents
// by CentsOf; the total is the sum of the lines' cents.
func buildInvoice(p Period, in *customerInputs, prices map[int64]price) (invoiceDraft, error) {
	var d invoiceDraft
	mismatch := false
	addLines := func(kind LineKind, usagePeriod Period, usage, invoiced map[usageKey]usageSums) error {
		keys := unionKeys(usage, invoiced)
		slices.SortFunc(keys, func(a, b usageKey) int {
			if c := cmp.Compare(catalog.TierRank(a.tier), catalog.TierRank(b.tier)); c != 0 {
				return c
			}
			if c := strings.Compare(a.tier, b.tier); c != 0 {
				return c
			}
			if c := strings.Compare(a.model, b.model); c != 0 {
				return c
			}
			return cmp.Compare(prices[a.priceID].from.UnixNano(), prices[b.priceID].from.UnixNano())
		})
		for _, k := range keys {
			s := usage[k].minus(invoiced[k])
			if s.zero() {
				continue
			}
			amount, err := CentsOf(s.charge)
			if err != nil {
				return err
			}
			line := InvoiceLine{Kind: kind, UsagePeriod: usagePeriod, Tier: k.tier, Model: k.model, PriceID: k.priceID,
				Requests: s.requests, InputTokens: s.input, OutputTokens: s.output, UnchargedRequests: s.unchargedRequests,
				UnchargedInputTokens: s.unchargedInput, UnchargedOutputTokens: s.unchargedOutput, Charge: s.charge, Amount: amount,
				CachedInputTokens: s.cached, UnchargedCachedInputTokens: s.unchargedCached, payable: s.payable}
			if pr, ok := prices[k.priceID]; ok && k.priceID != 0 {
				in, out, cached, from := pr.input, pr.output, pr.cached, pr.from
				line.InputPrice, line.OutputPrice, line.CachedInputPrice, line.PriceFrom = &in, &out, &cached, &from
				line.ModelPrice = pr.model != ""
				if s.pricedAt(int64(in), int64(cached), int64(out)) != s.charge {
					mismatch = true
				}
			}
			line.Description = usageDescription(line, p)
			d.lines = append(d.lines, line)
		}
		return nil
	}
	if err := addLines(LineUsage, p, in.usage.current, in.invoiced.current); err != nil {
		return d, err
	}
	if in.carriesLate {
		if err := addLines(LineLateUsage, p.Prev(), in.usage.earlier, in.invoiced.earlier); err != nil {
			return d, err
		}
	}
	for _, c := range in.credits {
		amount, err := CentsOf(c.credited)
		if err != nil {
			return d, err
		}
		d.lines = append(d.lines, InvoiceLine{Kind: LineCredit, Charge: c.credited.Neg(), Amount: -amount,
			payable: c.clawedBack.Neg(), CreditNoteID: c.id, Description: fmt.Sprintf("Credit note %s: %s", c.number, strings.ToLower(c.reason.Text()))})
	}
	for i := range d.lines {
		d.lines[i].No = i + 1
		d.total += d.lines[i].Amount
	}

	d.shares = sharesLeft(p, in.shares.current, in.sharesBy.current)
	if in.carriesLate {
		d.shares = append(d.shares, sharesLeft(p.Prev(), in.shares.earlier, in.sharesBy.earlier)...)
	}

	f := in.ledger
	d.balance = BalanceSummary{Opening: f.opening(), Closing: f.closing(), Purchases: f.byKind["purchase"],
		Refunds: f.byKind["refund"], CreditNotes: f.byKind["credit_note"], UsageCharged: f.byKind["usage"]}
	// Every other kind (none is posted to a customer's credit today) is counted with the
	// adjustments, so that the summary always adds up.
	for kind, v := range f.byKind {
		switch kind {
		case "purchase", "refund", "credit_note", "usage":
		default:
			d.balance.Adjustments = d.balance.Adjustments.Add(v)
		}
	}
	for _, e := range f.entries {
		d.entries = append(d.entries, e.LedgerEntry)
	}
	if d.balance.Closing.Sign() < 0 {
		due, err := CentsOf(d.balance.Closing.Neg())
		if err != nil {
			return d, err
		}
		d.due = due
	}

	d.notes = map[Flag]string{}
	if mismatch {
		d.flags = append(d.flags, FlagUsageMismatch)
		d.notes[FlagUsageMismatch] = mismatchNote
	}
	if in.flagged > 0 {
		d.flags = append(d.flags, FlagDiscrepancy)
		d.notes[FlagDiscrepancy] = fmt.Sprintf("%s flagged with an excess, %s charged, not yet resolved",
			requestsText(in.flagged), RequestDollars(in.flaggedCharge))
	}
	if d.balance.Closing.Sign() < 0 {
		d.flags = append(d.flags, FlagNegativeBalance)
		d.notes[FlagNegativeBalance] = fmt.Sprintf("credit below zero at the end of the month: %s due", d.due)
	}
	if in.previous != nil && *in.previous > 0 && d.total > spikeFactor**in.previous {
		d.flags = append(d.flags, FlagSpike)
		d.notes[FlagSpike] = spikeNote(d.total, *in.previous)
	}
	d.active = len(d.lines) > 0 || f.moved() || in.current != nil
	return d, nil
}

// mismatchNote is what the usage-mismatch flag says.
const mismatchNote = "the total differs from the usage rows it sums"

// requestsText is "1 request" or "3 requests".
func requestsText(n int64) string { return money.Counted(n, "request", "requests") }

// spikeNote says how a total jumped against last month's.
func spikeNote(total, previous Cents) string {
	return fmt.Sprintf("%s this month against %s last month, more than %d times", total, previous, spikeFactor)
}

// sharesLeft are the providers' shares of a period's usage less what issued invoices billed.
func sharesLeft(p Period, usage, invoiced map[string]usageSums) []providerShare {
	keys := unionKeys(usage, invoiced)
	slices.Sort(keys)
	var out []providerShare
	for _, k := range keys {
		s := usage[k].minus(invoiced[k])
		if s.charge.Sign() == 0 && s.payable.Sign() == 0 {
			continue
		}
		out = append(out, providerShare{usagePeriod: p, provider: k, shareSums: shareSums{charge: s.charge, payable: s.payable}})
	}
	return out
}

func unionKeys[K comparable](a, b map[K]usageSums) []K {
	keys := make([]K, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// usageDescription writes a usage line as documents show it: "Standard tier · model · $0.15
// input, $0.30 output per million tokens (prices from 1 Mar 2026)", or, where the model has a
// price of its own in the tier, "(the model's own prices from 1 Mar 2026)", with the requests
// that were not charged, and for late usage the period it belongs to.
func usageDescription(l InvoiceLine, p Period) string {
	var b strings.Builder
	if l.Kind == LineLateUsage {
		fmt.Fprintf(&b, "Usage of %s metered after its invoice was issued: ", l.UsagePeriod.Label())
	}
	fmt.Fprintf(&b, "%s tier · %s", titleCase(l.Tier), l.Model)
	whose := "prices"
	if l.ModelPrice {
		whose = "the model's own prices"
	}
	switch {
	case l.InputPrice != nil && l.CachedInputTokens != 0 && l.CachedInputPrice != nil:
		fmt.Fprintf(&b, " · %s input, %s cached input, %s output per million tokens (%s from %s)",
			*l.InputPrice, *l.CachedInputPrice, *l.OutputPrice, whose, l.PriceFrom.UTC().Format("2 Jan 2006"))
	case l.InputPrice != nil:
		fmt.Fprintf(&b, " · %s input, %s output per million tokens (%s from %s)",
			*l.InputPrice, *l.OutputPrice, whose, l.PriceFrom.UTC().Format("2 Jan 2006"))
	default:
		b.WriteString(" · at the prices in force when it was served")
	}
	if l.UnchargedRequests > 0 {
		fmt.Fprintf(&b, "; %s of the requests produced no output and were not charged (%s input tokens)",
			grouped(l.UnchargedRequests), grouped(l.UnchargedInputTokens))
	}
	if l.CachedInputTokens != 0 {
		fmt.Fprintf(&b, "; %s of the input tokens were served from the prompt cache, at the cached input price",
			grouped(l.CachedInputTokens))
	}
	return b.String()
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// grouped writes n with thousands separators: 1,234,567.
func grouped(n int64) string {
	s := fmt.Sprint(abs(n))
	var b strings.Builder
	if n < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
