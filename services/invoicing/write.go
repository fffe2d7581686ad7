package invoicing

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
)

// Writing computed drafts: a chunk's headers in one statement, their parts (lines, shares,
// ledger entries) replaced by COPY. Only drafts are written; the triggers refuse the parts of
// any other document.

// pendingInvoice is a computed draft to write.
type pendingInvoice struct {
	id        string // the draft's id: the stored draft's, or a new one
	accountID string
	poNumber  *string // a fixed PO number, kept; nil follows the customer's
	existed   bool
	d         invoiceDraft
}

// pendingStatement is a computed statement draft to write.
type pendingStatement struct {
	id         string
	providerID string
	existed    bool
	d          statementDraft
}

// numeric is an exact amount as pgx writes a NUMERIC.
func numeric(b money.BigPico) pgtype.Numeric {
	raw, _ := b.MarshalJSON() // the picodollars as an integer
	var n pgtype.Numeric
	_ = n.Scan(string(raw))
	return n
}

// picoText is an exact amount as the text of a NUMERIC.
func picoText(b money.BigPico) string {
	raw, _ := b.MarshalJSON()
	return string(raw)
}

func uuidOf(id string) pgtype.UUID {
	var u pgtype.UUID
	_ = u.Scan(id)
	return u
}

func optionalUUID(id string) any {
	if id == "" {
		return nil
	}
	return uuidOf(id)
}

func optionalDate(p Period) any {
	if p.IsZero() {
		return nil
	}
	return p.Start()
}

func flagsText(flags []Flag) string {
	parts := make([]string, len(flags))
	for i, f := range flags {
		parts[i] = string(f)
	}
	return strings.Join(parts, ",")
}

// notesText is what each flag says, in the order of flags, as a JSON array for the database.
func notesText(flags []Flag, notes map[Flag]string) string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = notes[f]
	}
	raw, _ := json.Marshal(out)
	return string(raw)
}

// writeInvoices writes the drafts of period p, inside tx.
func writeInvoices(ctx context.Context, tx pgx.Tx, p Period, now time.Time, drafts []pendingInvoice) error {
	if len(drafts) == 0 {
		return nil
	}
	var existing []string
	n := len(drafts)
	ids, accounts, po, flags := make([]string, n), make([]string, n), make([]pgtype.Text, n), make([]string, n)
	notes := make([]string, n)
	total, due := make([]int64, n), make([]int64, n)
	opening, purchases, refunds, adjustments, credits, usage, closing := make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, w := range drafts {
		if w.existed {
			existing = append(existing, w.id)
		}
		b := w.d.balance
		ids[i], accounts[i], flags[i], notes[i] = w.id, w.accountID, flagsText(w.d.flags), notesText(w.d.flags, w.d.notes)
		if w.poNumber != nil {
			po[i] = pgtype.Text{String: *w.poNumber, Valid: true}
		}
		total[i], due[i] = int64(w.d.total), int64(w.d.due)
		opening[i], purchases[i], refunds[i], adjustments[i] = picoText(b.Opening), picoText(b.Purchases), picoText(b.Refunds), picoText(b.Adjustments)
		credits[i], usage[i], closing[i] = picoText(b.CreditNotes), picoText(b.UsageCharged), picoText(b.Closing)
	}
	if len(existing) > 0 {
		for _, table := range []string{"invoice_lines", "invoice_provider_shares", "invoice_ledger_entries", "invoice_summaries"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE invoice_id = ANY ($1::text[]::uuid[])`, existing); err != nil {
				return wrapf(err, "invoicing: clear the drafts' %s", table)
			}
		}
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO invoices (id, account_id, period, status, total_cents, amount_due_cents, opening_balance_pico,
			purchases_pico, refunds_pico, adjustments_pico, credit_notes_pico, usage_charged_pico, closing_balance_pico,
			po_number, flags, flag_notes, computed_at, created_at)
		SELECT id::uuid, account_id::uuid, $1, 'draft', total, due, opening::numeric, purchases::numeric, refunds::numeric,
			adjustments::numeric, credits::numeric, usage::numeric, closing::numeric, po, string_to_array(flags, ','),
			ARRAY(SELECT jsonb_array_elements_text(notes::jsonb)), $2, $2
		FROM unnest($3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::text[],
			$11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[])
			AS u (id, account_id, total, due, opening, purchases, refunds, adjustments, credits, usage, closing, po, flags, notes)
		ON CONFLICT (id) DO UPDATE SET total_cents = EXCLUDED.total_cents, amount_due_cents = EXCLUDED.amount_due_cents,
			opening_balance_pico = EXCLUDED.opening_balance_pico, purchases_pico = EXCLUDED.purchases_pico,
			refunds_pico = EXCLUDED.refunds_pico, adjustments_pico = EXCLUDED.adjustments_pico,
			credit_notes_pico = EXCLUDED.credit_notes_pico, usage_charged_pico = EXCLUDED.usage_charged_pico,
			closing_balance_pico = EXCLUDED.closing_balance_pico, flags = EXCLUDED.flags, flag_notes = EXCLUDED.flag_notes,
			computed_at = EXCLUDED.computed_at`,
		p.Start(), now, ids, accounts, total, due, opening, purchases, refunds, adjustments, credits, usage, closing, po, flags,
		notes); err != nil {
		return wrapf(err, "invoicing: write %d invoice drafts of %s", n, p)
	}

	// The savings and carbon of the period's usage per tier (docs/methodology.md): read in the
	// close's transaction for the whole chunk, stored with the drafts, kept as issued.
	summary, err := reports.PeriodSummaries(ctx, tx, accounts, p.Start(), p.End())
	if err != nil {
		return wrapf(err, "invoicing: the savings and carbon of %d invoices of %s", n, p)
	}
	var lines, shares, entries, summaries [][]any
	for _, w := range drafts {
		id := uuidOf(w.id)
		for _, t := range summary[w.accountID] {
			summaries = append(summaries, []any{id, t.Tier, numeric(t.Spend), t.SpendCents, numeric(t.Baseline), t.EnergyKWh,
				t.MeasuredKWh, t.SimulatedKWh, t.GCO2e, t.BaselineGCO2e, t.MethodVersion})
		}
		for _, l := range w.d.lines {
			var in, out, cached any
			if l.InputPrice != nil {
				in, out = int64(*l.InputPrice), int64(*l.OutputPrice)
			}
			if l.CachedInputPrice != nil {
				cached = int64(*l.CachedInputPrice)
			}
			lines = append(lines, []any{id, int32(l.No), string(l.Kind), optionalDate(l.UsagePeriod), l.Tier, l.Model, l.PriceID,
				in, out, l.Requests, l.InputTokens, l.OutputTokens, l.UnchargedRequests, l.UnchargedInputTokens,
				l.UnchargedOutputTokens, numeric(l.Charge), numeric(l.payable), int64(l.Amount), l.Description,
				optionalUUID(l.CreditNoteID), cached, l.CachedInputTokens, l.UnchargedCachedInputTokens})
		}
		for _, s := range w.d.shares {
			shares = append(shares, []any{id, s.usagePeriod.Start(), uuidOf(s.provider), numeric(s.charge), numeric(s.payable)})
		}
		for _, e := range w.d.entries {
			entries = append(entries, []any{id, uuidOf(e.TransactionID), e.Kind, e.Memo, e.OccurredAt, numeric(e.Amount)})
		}
	}
	for _, c := range []struct {
		table   string
		columns []string
		rows    [][]any
	}{
		{"invoice_lines", []string{"invoice_id", "line_no", "kind", "usage_period", "tier", "model", "price_id", "input_price",
			"output_price", "requests", "input_tokens", "output_tokens", "uncharged_requests", "uncharged_input_tokens",
			"uncharged_output_tokens", "charge_pico", "payable_pico", "amount_cents", "description", "credit_note_id",
			"cached_input_price", "cached_input_tokens", "uncharged_cached_input_tokens"}, lines},
		{"invoice_provider_shares", []string{"invoice_id", "usage_period", "provider_account_id", "charge_pico", "payable_pico"}, shares},
		{"invoice_ledger_entries", []string{"invoice_id", "transaction_id", "kind", "memo", "occurred_at", "amount_pico"}, entries},
		{"invoice_summaries", []string{"invoice_id", "tier", "spend_pico", "spend_cents", "baseline_pico", "energy_kwh",
			"measured_kwh", "simulated_kwh", "g_co2e", "baseline_g_co2e", "method_version"}, summaries},
	} {
		if len(c.rows) == 0 {
			continue
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.columns, pgx.CopyFromRows(c.rows)); err != nil {
			return wrapf(err, "invoicing: write the drafts' %s", c.table)
		}
	}
	return nil
}

// writeStatements writes the statement drafts of period p, inside tx.
func writeStatements(ctx context.Context, tx pgx.Tx, p Period, now time.Time, minimum Cents, drafts []pendingStatement) error {
	if len(drafts) == 0 {
		return nil
	}
	var existing []string
	n := len(drafts)
	ids, providers, carriedFrom, flags := make([]string, n), make([]string, n), make([]pgtype.Text, n), make([]string, n)
	notes, held := make([]string, n), make([]int64, n)
	earnings, late, clawbacks, carriedIn, net, payout, carried := make([]int64, n), make([]int64, n), make([]int64, n),
		make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	opening, usage, credits, payouts, other, closing := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n)
	for i, w := range drafts {
		if w.existed {
			existing = append(existing, w.id)
		}
		d := w.d
		ids[i], providers[i], flags[i], notes[i], held[i] = w.id, w.providerID, flagsText(d.flags), notesText(d.flags, d.notes), int64(d.held)
		if d.carriedFrom != "" {
			carriedFrom[i] = pgtype.Text{String: d.carriedFrom, Valid: true}
		}
		earnings[i], late[i], clawbacks[i], carriedIn[i] = int64(d.earnings), int64(d.late), int64(d.clawbacks), int64(d.carriedIn)
		net[i], payout[i], carried[i] = int64(d.net), int64(d.payout), int64(d.carried)
		opening[i], usage[i], credits[i] = picoText(d.payable.Opening), picoText(d.payable.Usage), picoText(d.payable.CreditNotes)
		payouts[i], other[i], closing[i] = picoText(d.payable.Payouts), picoText(d.payable.Other), picoText(d.payable.Closing)
	}
	if len(existing) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM statement_lines WHERE statement_id = ANY ($1::text[]::uuid[])`, existing); err != nil {
			return wrapf(err, "invoicing: clear the statement drafts' lines")
		}
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO statements (id, provider_account_id, period, status, earnings_cents, late_earnings_cents, clawbacks_cents,
			carried_in_cents, carried_from_statement_id, net_cents, payout_cents, carried_out_cents, minimum_payout_cents,
			opening_payable_pico, usage_posted_pico, credit_notes_posted_pico, payouts_posted_pico, other_posted_pico,
			closing_payable_pico, flags, flag_notes, held_cents, computed_at, created_at)
		SELECT id::uuid, provider::uuid, $1, 'draft', earnings, late, clawbacks, carried_in, carried_from::uuid, net, payout,
			carried, $3, opening::numeric, usage::numeric, credits::numeric, payouts::numeric, other::numeric,
			closing::numeric, string_to_array(flags, ','), ARRAY(SELECT jsonb_array_elements_text(notes::jsonb)), held, $2, $2
		FROM unnest($4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::bigint[],
			$12::bigint[], $13::bigint[], $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[],
			$21::text[], $22::bigint[])
			AS u (id, provider, earnings, late, clawbacks, carried_in, carried_from, net, payout, carried, opening, usage,
				credits, payouts, other, closing, flags, notes, held)
		ON CONFLICT (id) DO UPDATE SET earnings_cents = EXCLUDED.earnings_cents, late_earnings_cents = EXCLUDED.late_earnings_cents,
			clawbacks_cents = EXCLUDED.clawbacks_cents, carried_in_cents = EXCLUDED.carried_in_cents,
			carried_from_statement_id = EXCLUDED.carried_from_statement_id, net_cents = EXCLUDED.net_cents,
			payout_cents = EXCLUDED.payout_cents, carried_out_cents = EXCLUDED.carried_out_cents,
			minimum_payout_cents = EXCLUDED.minimum_payout_cents, opening_payable_pico = EXCLUDED.opening_payable_pico,
			usage_posted_pico = EXCLUDED.usage_posted_pico, credit_notes_posted_pico = EXCLUDED.credit_notes_posted_pico,
			payouts_posted_pico = EXCLUDED.payouts_posted_pico, other_posted_pico = EXCLUDED.other_posted_pico,
			closing_payable_pico = EXCLUDED.closing_payable_pico, flags = EXCLUDED.flags, flag_notes = EXCLUDED.flag_notes,
			held_cents = EXCLUDED.held_cents, computed_at = EXCLUDED.computed_at`,
		p.Start(), now, int64(minimum), ids, providers, earnings, late, clawbacks, carriedIn, carriedFrom, net, payout, carried,
		opening, usage, credits, payouts, other, closing, flags, notes, held); err != nil {
		return wrapf(err, "invoicing: write %d statement drafts of %s", n, p)
	}
	var lines [][]any
	for _, w := range drafts {
		id := uuidOf(w.id)
		for _, l := range w.d.lines {
			lines = append(lines, []any{id, int32(l.No), string(l.Kind), optionalDate(l.UsagePeriod), optionalUUID(l.OfferingID),
				l.Model, int64(l.AskInput), int64(l.AskOutput), l.Requests, l.InputTokens, l.OutputTokens, l.UnchargedRequests,
				l.UnchargedInputTokens, l.UnchargedOutputTokens, numeric(l.Earned), int64(l.Amount), l.Description,
				optionalUUID(l.TransactionID), optionalUUID(l.CreditNoteID), int64(l.AskCachedInput), l.CachedInputTokens,
				l.UnchargedCachedInputTokens})
		}
	}
	if len(lines) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"statement_lines"}, []string{"statement_id", "line_no", "kind",
			"usage_period", "offering_id", "model", "ask_input_price", "ask_output_price", "requests", "input_tokens",
			"output_tokens", "uncharged_requests", "uncharged_input_tokens", "uncharged_output_tokens", "payable_pico",
			"amount_cents", "description", "transaction_id", "credit_note_id", "ask_cached_input_price", "cached_input_tokens",
			"uncharged_cached_input_tokens"}, pgx.CopyFromRows(lines)); err != nil {
			return wrapf(err, "invoicing: write the statement drafts' lines")
		}
	}
	return nil
}

// newID is a new document id.
func newID() (string, error) {
	id, err := services.NewUUID()
	return id, wrapf(err, "invoicing: a document id")
}
