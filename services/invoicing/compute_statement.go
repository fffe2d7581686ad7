package invoicing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// What a provider's statement is computed from, and the computation (see docs/invoicing.md,
// "Statements").

// offering is an offering as a statement line names it.
type offering struct {
	gpu, region string
	gpuCount    int
}

// previousStatement is the provider's latest statement before the period, which its carry
// comes from.
type previousStatement struct {
	id         string
	status     Status
	period     Period
	carriedOut Cents
}

// providerInputs is everything a provider's statement for a period is computed from.
type providerInputs struct {
	providerID, providerName string
	details                  BillingDetails
	current                  *existingDoc
	carriesLate              bool
	usage                    byPeriod[offerKey] // the rollups per offering and asks
	invoiced                 byPeriod[offerKey] // what issued statements already paid of them
	offerings                map[string]offering
	ledger                   ledgerFigures // the provider's payable
	previous                 *previousStatement
	lastMonth                *Cents // the previous period's statement earnings
	// held counts the period's requests flagged with an excess above zero that finance had
	// not released by the period's end (unresolved, released later, or clawed back);
	// heldPayable is their earnings, held out of the statement. unresolved and
	// unresolvedPayable are those of them finance has not resolved at all. released counts the
	// held requests of earlier periods finance released in this one, releasedPayable their
	// earnings, paid on this statement.
	held, unresolved, released                      int64
	heldPayable, unresolvedPayable, releasedPayable money.BigPico
}

// statementDraft is a computed statement.
type statementDraft struct {
	lines                                                      []StatementLine
	earnings, late, clawbacks, carriedIn, net, payout, carried Cents
	held                                                       Cents // released less held
	carriedFrom                                                string
	payable                                                    PayableSummary
	flags                                                      []Flag
	notes                                                      map[Flag]string
	active                                                     bool
}

// buildStatement computes the provider's statement for period p. Its usage lines are the
// period's rollups per offering and asks (what the provider asked, fixed per request), less
// what issued statements already paid of them; late-usage lines the same for the period
// before, when it carries them; clawback lines are the credit notes of the period that took
// back part of its payable. Net = carried in + earnings + late earnings + clawbacks: paid out
// when it reaches the minimum payout, carried over to the next statement otherwise (a negative
// net is carried too, and nets against the next one's earnings).
func buildStatement(p Period, in *providerInputs, minimum Cents) (statementDraft, error) {
	var d statementDraft
	addLines := func(kind LineKind, usagePeriod Period, usage, invoiced map[offerKey]usageSums, total *Cents) error {
		keys := unionKeys(usage, invoiced)
		slices.SortFunc(keys, func(a, b offerKey) int {
			if c := strings.Compare(a.model, b.model); c != 0 {
				return c
			}
			if c := strings.Compare(a.offering, b.offering); c != 0 {
				return c
			}
			if c := cmp.Compare(a.askIn, b.askIn); c != 0 {
				return c
			}
			if c := cmp.Compare(a.askOut, b.askOut); c != 0 {
				return c
			}
			return cmp.Compare(a.askCached, b.askCached)
		})
		for _, k := range keys {
			s := usage[k].minus(invoiced[k])
			if s.zero() {
				continue
			}
			amount, err := CentsOf(s.payable)
			if err != nil {
				return err
			}
			line := StatementLine{Kind: kind, UsagePeriod: usagePeriod, OfferingID: k.offering, Model: k.model,
				AskInput: money.MicroUSD(k.askIn), AskOutput: money.MicroUSD(k.askOut), Requests: s.requests,
				InputTokens: s.input, OutputTokens: s.output, UnchargedRequests: s.unchargedRequests,
				UnchargedInputTokens: s.unchargedInput, UnchargedOutputTokens: s.unchargedOutput, Earned: s.payable, Amount: amount,
				AskCachedInput: money.MicroUSD(k.askCached), CachedInputTokens: s.cached, UnchargedCachedInputTokens: s.unchargedCached}
			line.Description = offeringDescription(line, in.offerings[k.offering])
			if s.pricedAt(k.askIn, k.askCached, k.askOut) != s.payable {
				d.flags = appendFlag(d.flags, FlagUsageMismatch)
			}
			d.lines = append(d.lines, line)
			*total += amount
		}
		return nil
	}
	if err := addLines(LineUsage, p, in.usage.current, in.invoiced.current, &d.earnings); err != nil {
		return d, err
	}
	if in.carriesLate {
		if err := addLines(LineLateUsage, p.Prev(), in.usage.earlier, in.invoiced.earlier, &d.late); err != nil {
			return d, err
		}
	}
	for _, e := range in.ledger.entries {
		if e.Kind != "credit_note" || e.Amount.Sign() == 0 {
			continue
		}
		amount, err := CentsOf(e.Amount)
		if err != nil {
			return d, err
		}
		d.lines = append(d.lines, StatementLine{Kind: LineClawback, Earned: e.Amount, Amount: amount,
			TransactionID: e.TransactionID, CreditNoteID: e.creditNoteID,
			Description: fmt.Sprintf("Credit note %s: the share of a credited invoice taken back", e.creditNoteNumber)})
		d.clawbacks += amount
	}
	if in.held > 0 && in.heldPayable.Sign() > 0 {
		amount, err := CentsOf(in.heldPayable)
		if err != nil {
			return d, err
		}
		d.lines = append(d.lines, StatementLine{Kind: LineHeld, UsagePeriod: p, Requests: in.held, Earned: in.heldPayable.Neg(),
			Amount: -amount, Description: fmt.Sprintf("Held: the earnings of %s flagged with an excess (reported above "+
				"the bill, or billed above the response), paid on a later statement once finance releases them", requestsText(in.held))})
		d.held -= amount
	}
	if in.released > 0 && in.releasedPayable.Sign() > 0 {
		amount, err := CentsOf(in.releasedPayable)
		if err != nil {
			return d, err
		}
		d.lines = append(d.lines, StatementLine{Kind: LineReleased, UsagePeriod: p, Requests: in.released, Earned: in.releasedPayable,
			Amount: amount, Description: fmt.Sprintf("Released by finance: the held earnings of %s of earlier months",
				requestsText(in.released))})
		d.held += amount
	}
	for i := range d.lines {
		d.lines[i].No = i + 1
	}

	if in.previous != nil {
		d.carriedIn, d.carriedFrom = in.previous.carriedOut, in.previous.id
	}
	d.net = d.carriedIn + d.earnings + d.late + d.clawbacks + d.held
	if d.net >= minimum {
		d.payout = d.net
	} else {
		d.carried = d.net
	}

	f := in.ledger
	d.payable = PayableSummary{Opening: f.opening(), Closing: f.closing(), Usage: f.byKind["usage"],
		CreditNotes: f.byKind["credit_note"], Payouts: f.byKind["payout"]}
	for kind, v := range f.byKind {
		switch kind {
		case "usage", "credit_note", "payout":
		default:
			d.payable.Other = d.payable.Other.Add(v)
		}
	}

	d.notes = map[Flag]string{}
	if slices.Contains(d.flags, FlagUsageMismatch) {
		d.notes[FlagUsageMismatch] = mismatchNote
	}
	if in.unresolved > 0 {
		d.flags = appendFlag(d.flags, FlagDiscrepancy)
		d.notes[FlagDiscrepancy] = fmt.Sprintf("%s flagged with an excess: %s of earnings held until finance resolves them",
			requestsText(in.unresolved), RequestDollars(in.unresolvedPayable))
	}
	if d.net < 0 {
		d.flags = appendFlag(d.flags, FlagNegativeBalance)
		d.notes[FlagNegativeBalance] = fmt.Sprintf("the net is %s, below zero", d.net)
	}
	if in.lastMonth != nil && *in.lastMonth > 0 && d.earnings > spikeFactor**in.lastMonth {
		d.flags = appendFlag(d.flags, FlagSpike)
		d.notes[FlagSpike] = spikeNote(d.earnings, *in.lastMonth)
	}
	d.active = len(d.lines) > 0 || in.current != nil
	return d, nil
}

func appendFlag(flags []Flag, f Flag) []Flag {
	if slices.Contains(flags, f) {
		return flags
	}
	return append(flags, f)
}

// offeringDescription writes a statement line: "4x NVIDIA GeForce RTX 4090 in Norway ·
// model · asks $0.05 input, $0.10 output per million tokens".
func offeringDescription(l StatementLine, o offering) string {
	var b strings.Builder
	if l.Kind == LineLateUsage {
		fmt.Fprintf(&b, "Usage of %s metered after its statement was issued: ", l.UsagePeriod.Label())
	}
	if o.gpu != "" {
		name := o.gpu
		if g, ok := catalog.GPUBySKU(o.gpu); ok {
			name = g.Name
		}
		fmt.Fprintf(&b, "%dx %s in %s · ", o.gpuCount, name, catalog.RegionName(o.region))
	}
	fmt.Fprintf(&b, "%s · asks %s input, %s output per million tokens", l.Model, l.AskInput, l.AskOutput)
	if l.UnchargedRequests > 0 {
		fmt.Fprintf(&b, "; %s of the requests produced no output and earned nothing", grouped(l.UnchargedRequests))
	}
	return b.String()
}
