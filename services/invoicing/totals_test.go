package invoicing

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// A price change in the middle of March gives two lines, each at its own price: the price its
// requests' tickets fixed when they were routed, so that a request routed just before the
// change and finished after it keeps the old price (docs/failure-cases.md, case 14).
func TestAPriceChangeMidMonthGivesTwoLinesAtTheirPrices(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC), in: 1_000_000, out: 1_000_000})
	w.use(request{customer: acme, rig: fjord, at: priceMove.Add(30 * time.Second), in: 1_000_000, out: 1_000_000, priceID: w.price})
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 20, 9, 0, 0, 0, time.UTC), in: 3_000_000, out: 1_000_000})
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)
	if len(inv.Lines) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(inv.Lines), inv.Lines)
	}
	old, now := inv.Lines[0], inv.Lines[1]
	if old.PriceID != w.price || *old.InputPrice != 150_000 || *old.OutputPrice != 300_000 || old.Requests != 2 ||
		old.Charge != pico(2*charge(1_000_000, 1_000_000)) || old.Amount != 90 {
		t.Errorf("the old price's line: %+v", old)
	}
	if now.PriceID != w.newPrice || *now.InputPrice != 200_000 || *now.OutputPrice != 500_000 || now.Requests != 1 ||
		now.Charge != pico(chargeNew(3_000_000, 1_000_000)) || now.Amount != 1_10 || !now.PriceFrom.Equal(priceMove) {
		t.Errorf("the new price's line: %+v", now)
	}
	if inv.Total != 2_00 {
		t.Errorf("total %s, want $2.00", inv.Total)
	}
}

// An invoice's total is the sum of its usage rows' charges, rounded to the cent once per line:
// per tier, model and price version of usage_events, each sum rounded half up. Requests that
// produced no output are counted on their line and charged nothing.
func TestTheTotalIsItsUsageRowsRoundedPerLine(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	var oldCharge, newCharge int64
	for i := range 40 {
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 17 * time.Hour)
		in, out := int64(12_345+i*7_771), int64((i%5)*3_333)
		w.use(request{customer: acme, rig: fjord, at: at, in: in, out: out})
		switch {
		case out == 0:
		case at.Before(priceMove):
			oldCharge += charge(in, out)
		default:
			newCharge += chargeNew(in, out)
		}
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)

	rows, err := w.pool.Query(w.ctx(), `SELECT price_id, count(*), sum(charge_pico), count(*) FILTER (WHERE output_tokens = 0)
		FROM usage_events WHERE account_id = $1 GROUP BY 1 ORDER BY 1`, acme)
	if err != nil {
		t.Fatal(err)
	}
	var total Cents
	i := 0
	for rows.Next() {
		var price, requests, free int64
		var sum money.BigPico
		if err := rows.Scan(&price, &requests, &sum, &free); err != nil {
			t.Fatal(err)
		}
		c, _ := CentsOf(sum)
		total += c
		l := inv.Lines[i]
		if l.PriceID != price || l.Requests != requests || l.Charge != sum || l.Amount != c || l.UnchargedRequests != free {
			t.Errorf("line %d: %+v; the usage rows say price %d, %d requests (%d free), %s", i+1, l, price, requests, free, sum)
		}
		i++
	}
	if rows.Err() != nil || i != len(inv.Lines) {
		t.Fatalf("%d price versions in the usage rows, %d lines", i, len(inv.Lines))
	}
	if want := cents(oldCharge) + cents(newCharge); inv.Total != total || inv.Total != want {
		t.Errorf("total %s; the usage rows rounded per line make %s, the requests %s", inv.Total, total, want)
	}
	if check, err := w.svc.CheckInvoiceUsage(w.ctx(), inv.ID); err != nil || !check.Matches {
		t.Errorf("the exact check: %+v, %v", check, err)
	}
}

// The opening and closing balances are the sums of the customer's postings of transactions
// that occurred before the period's start and end; between them, each kind of movement is the
// sum of its postings, and the period's purchases, refunds and adjustments are listed. The
// amount due is the overdraft at the end, rounded to the cent (docs/failure-cases.md, case 13).
func TestBalancesAreTheirPostingsByLedgerTime(t *testing.T) {
	w := newWorld(t)
	acme, globex := w.account("Acme Labs"), w.account("Globex")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	w.buy(acme, time.Date(2026, 2, 20, 9, 0, 0, 0, time.UTC), 10_00)
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 2, 25, 9, 0, 0, 0, time.UTC), in: 1_000_000, out: 1_000_000}) // $0.45
	w.buy(acme, time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC), 20_00)
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC), in: 2_000_000, out: 1_000_000}) // $0.60
	w.post(acme, ledger.TransactionRefund, time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC), -5_00)
	w.post(acme, ledger.TransactionAdjustment, time.Date(2026, 3, 6, 9, 0, 0, 0, time.UTC), 1_23)
	w.buy(acme, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 7_00) // April's
	// Globex never bought credit: its usage is an overdraft.
	w.use(request{customer: globex, rig: fjord, at: time.Date(2026, 3, 7, 9, 0, 0, 0, time.UTC), in: 9_999_999, out: 1})

	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)
	sum := func(where string) money.BigPico {
		var b money.BigPico
		w.scan(`SELECT coalesce(sum(p.amount), 0) FROM ledger_postings p
			JOIN ledger_transactions t ON t.id = p.transaction_id
			JOIN ledger_accounts a ON a.id = p.ledger_account_id
			WHERE a.kind = 'customer_credit' AND a.owner_account_id = $1 AND `+where, []any{acme, march.Start(), march.End()}, &b)
		return b
	}
	b := inv.Balance
	for _, c := range []struct {
		name      string
		got, want money.BigPico
		exact     string
	}{
		{"opening", b.Opening, sum(`t.occurred_at < $2 AND $3 > $2`), "$9.55"},
		{"closing", b.Closing, sum(`t.occurred_at < $3 AND $2 < $3`), "$25.18"},
		{"purchases", b.Purchases, sum(`t.kind = 'purchase' AND t.occurred_at >= $2 AND t.occurred_at < $3`), "$20.00"},
		{"refunds", b.Refunds, sum(`t.kind = 'refund' AND t.occurred_at >= $2 AND t.occurred_at < $3`), "$-5.00"},
		{"adjustments", b.Adjustments, sum(`t.kind = 'adjustment' AND t.occurred_at >= $2 AND t.occurred_at < $3`), "$1.23"},
		{"usage", b.UsageCharged, sum(`t.kind = 'usage' AND t.occurred_at >= $2 AND t.occurred_at < $3`), "$-0.60"},
	} {
		if c.got != c.want || c.got.String() != c.exact {
			t.Errorf("%s: %s; the postings say %s, want %s", c.name, c.got, c.want, c.exact)
		}
	}
	if b.Opening.Add(b.Purchases).Add(b.Refunds).Add(b.Adjustments).Add(b.CreditNotes).Add(b.UsageCharged) != b.Closing {
		t.Error("the movements do not add up to the closing balance")
	}
	if len(inv.Entries) != 3 || inv.Entries[0].Kind != "purchase" || inv.Entries[1].Kind != "refund" || inv.Entries[2].Kind != "adjustment" {
		t.Errorf("entries %+v", inv.Entries)
	}
	if inv.AmountDue != 0 || len(inv.Flags) != 0 {
		t.Errorf("Acme covered March with prepaid credit: due %s, flags %v", inv.AmountDue, inv.Flags)
	}
	// Globex: 9,999,999 input tokens at $0.15 and one output token at $0.30 is $1.50000015.
	g := w.invoiceOf(globex, march)
	if g.Balance.Closing.String() != "$-1.50000015" || g.AmountDue != 1_50 || g.Total != 1_50 ||
		!slices.Contains(g.Flags, FlagNegativeBalance) || !equalActions(g.Actions, []Action{ActionApprove}) {
		t.Errorf("Globex: closing %s, due %s, total %s, flags %v", g.Balance.Closing, g.AmountDue, g.Total, g.Flags)
	}
}

// post posts a transaction of a kind moving cents into (or out of) the customer's credit
// against the platform's revenue.
func (w *world) post(customer string, kind ledger.TransactionKind, at time.Time, cents int64) {
	w.t.Helper()
	w.at(at)
	credit, _ := w.ledger.AccountFor(w.ctx(), ledger.AccountCustomerCredit, customer)
	revenue, _ := w.ledger.AccountFor(w.ctx(), ledger.AccountPlatformRevenue, "")
	amount := money.Pico(cents) * money.PicoPerCent
	if _, _, err := w.ledger.Post(w.ctx(), ledger.TransactionInput{Kind: kind, Memo: string(kind),
		Postings: []ledger.Posting{{Account: credit, Amount: amount}, {Account: revenue, Amount: -amount}}}); err != nil {
		w.t.Fatal(err)
	}
}

// An issued document never changes: the database refuses any change to it or to its lines,
// whoever writes the SQL, except recording its payment or its voiding; and the service allows
// only the actions its state lists.
func TestAnIssuedDocumentCannotBeChanged(t *testing.T) {
	w := newWorld(t)
	globex := w.account("Globex")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	for i := range 10 {
		w.use(request{customer: globex, rig: fjord, at: time.Date(2026, 3, 7, 9, i, 0, 0, time.UTC), in: 10_000_000, out: 100_000})
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(globex, march)
	if inv.AmountDue != 15_30 {
		t.Fatalf("due %s, want $15.30", inv.AmountDue)
	}
	if err := w.svc.MarkInvoicePaid(w.ctx(), w.finance, inv.ID, "wire 1"); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("marking a draft paid: %v, want a conflict", err)
	}
	w.approve(inv.ID)
	st := w.statementOf(fjordAccount, march)
	if _, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{st.ID}); err != nil {
		t.Fatal(err)
	}
	if res, _ := w.svc.ApproveInvoices(w.ctx(), w.finance, []string{inv.ID}); services.ErrorCode(res[0].Err) != services.CodeConflict {
		t.Errorf("approving an issued invoice again: %v, want a conflict", res[0].Err)
	}
	for _, sql := range []string{
		`UPDATE invoices SET total_cents = 1 WHERE id = $1`,
		`UPDATE invoices SET amount_due_cents = 0, status = 'paid', paid_at = now() WHERE id = $1`,
		`UPDATE invoices SET number = 'GPM-2026-999999' WHERE id = $1`,
		`UPDATE invoices SET status = 'draft' WHERE id = $1`,
		`UPDATE invoices SET buyer_legal_name = 'Someone else' WHERE id = $1`,
		`DELETE FROM invoices WHERE id = $1`,
		`UPDATE invoice_lines SET amount_cents = 1 WHERE invoice_id = $1`,
		`DELETE FROM invoice_lines WHERE invoice_id = $1`,
		`INSERT INTO invoice_lines (invoice_id, line_no, kind, usage_period, charge_pico, payable_pico, amount_cents, description)
			VALUES ($1, 9, 'usage', '2026-03-01', 1, 0, 100, 'extra')`,
		`UPDATE invoice_provider_shares SET payable_pico = 0 WHERE invoice_id = $1`,
	} {
		_, err := w.pool.Exec(w.ctx(), sql, inv.ID)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23001" {
			t.Errorf("%s: %v, want refused", sql, err)
		}
	}
	for _, sql := range []string{
		`UPDATE statements SET payout_cents = 0, carried_out_cents = net_cents WHERE id = $1`,
		`UPDATE statement_lines SET amount_cents = 0 WHERE statement_id = $1`,
	} {
		_, err := w.pool.Exec(w.ctx(), sql, st.ID)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23001" {
			t.Errorf("%s: %v, want refused", sql, err)
		}
	}
	after := w.mustInvoice(inv.ID)
	if after.Total != 15_30 || after.Lines[0].Amount != 15_30 || after.Status != StatusIssued || after.Buyer.LegalName != "Globex" {
		t.Errorf("after the attempts: %s %s %+v", after.Status, after.Total, after.Lines)
	}
	if !equalActions(after.Actions, []Action{ActionMarkPaid, ActionVoid}) {
		t.Errorf("an issued invoice with $15.30 due allows %v", after.Actions)
	}
	// Its payment is recorded once, with who and when; then only a void remains.
	w.at(time.Date(2026, 4, 20, 15, 0, 0, 0, time.UTC))
	if err := w.svc.MarkInvoicePaid(w.ctx(), w.finance2, inv.ID, "wire 2026-04-20"); err != nil {
		t.Fatal(err)
	}
	paid := w.mustInvoice(inv.ID)
	if paid.Status != StatusPaid || paid.PaidBy != "finance2@example.test" || !paid.PaidAt.Equal(w.clock()) ||
		paid.PaymentReference != "wire 2026-04-20" || !equalActions(paid.Actions, []Action{ActionVoid}) {
		t.Errorf("paid: %s by %s at %v ref %q actions %v", paid.Status, paid.PaidBy, paid.PaidAt, paid.PaymentReference, paid.Actions)
	}
	if err := w.svc.MarkInvoicePaid(w.ctx(), w.finance, inv.ID, "again"); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("marking a paid invoice paid again: %v", err)
	}
	_, err := w.pool.Exec(w.ctx(), `UPDATE invoices SET paid_at = now() WHERE id = $1`, inv.ID)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23001" {
		t.Errorf("changing a recorded payment: %v, want refused", err)
	}
}
