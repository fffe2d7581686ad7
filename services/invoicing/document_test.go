package invoicing

import (
	"bytes"
	"encoding/csv"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
)

// An invoice's document is the invoice: its lines one for one with their cents and exact
// amounts, its total the invoice's total_cents (which is its usage rows summed per price
// version and rounded per line), the movements of the prepaid balance printed with it, the
// buyer's and the seller's details, and the rounding rule in its notes; approved, it bears
// its number and the day it was issued.
func TestInvoiceDocumentIsTheInvoiceExactly(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	if _, err := w.svc.SetBillingDetails(w.ctx(), acme, "", BillingDetailsInput{LegalName: "Acme Labs Ltd",
		Address: "2 Quay Street\nGalway", Country: "IE", VATID: "IE9876543WA", PONumber: "PO-7"}); err != nil {
		t.Fatal(err)
	}
	w.buy(acme, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), 500)
	// Odd token counts at both price versions: each line is rounded on its own.
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), in: 1_234_567, out: 333_333})
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 11, 12, 0, 0, 0, time.UTC), in: 7, out: 3})
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 20, 8, 0, 0, 0, time.UTC), in: 2_000_001, out: 999_999})
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)

	d, err := InvoiceDocument(inv)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != documents.KindInvoice || d.Status != documents.StatusDraft || d.Number != "" || !d.IssueDate.Equal(inv.CreatedAt) ||
		d.Period != documents.Month(2026, time.March) || d.Currency != "USD" {
		t.Errorf("draft document: %s %s %q issued %s period %v currency %s", d.Kind, d.Status, d.Number, d.IssueDate, d.Period, d.Currency)
	}
	wantBuyer := documents.Party{LegalName: "Acme Labs Ltd", Address: []string{"2 Quay Street", "Galway"}, Country: "Ireland",
		VATID: "IE9876543WA", PONumber: "PO-7"}
	wantSeller := documents.Party{LegalName: "gpumarket Ltd", Address: []string{"1 Dock Road", "Dublin D01 X2Y3"}, Country: "Ireland",
		VATID: "IE1234567FA"}
	if !equalParty(d.Buyer, wantBuyer) || !equalParty(d.Seller, wantSeller) {
		t.Errorf("buyer %+v, seller %+v", d.Buyer, d.Seller)
	}

	// Two usage lines, one per price version, then the purchase and the usage the ledger charged.
	if len(inv.Lines) != 2 || len(d.Lines) != 4 {
		t.Fatalf("%d invoice lines, %d document lines, want 2 and 4", len(inv.Lines), len(d.Lines))
	}
	for i, l := range inv.Lines {
		dl := d.Lines[i]
		if dl.Kind != documents.LineUsage || dl.Description != l.Description || dl.Amount != documents.Cents(l.Amount) ||
			dl.Exact == nil || dl.Exact.Cmp(l.Charge) != 0 || dl.Tokens == nil || dl.Tokens.Input != l.InputTokens ||
			dl.Tokens.Output != l.OutputTokens || dl.Tokens.InputPrice != *l.InputPrice || dl.Tokens.OutputPrice != *l.OutputPrice ||
			dl.Tokens.Unpriced {
			t.Errorf("line %d: document %+v (tokens %+v), invoice %+v", i+1, dl, dl.Tokens, l)
		}
	}
	// Independently of the close: the usage rows summed per price version, each rounded once.
	var want Cents
	rows, err := w.pool.Query(w.ctx(), `SELECT sum(charge_pico)::text FROM usage_events WHERE account_id = $1 GROUP BY price_id`, acme)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			t.Fatal(err)
		}
		var p money.BigPico
		if err := p.Scan(text); err != nil {
			t.Fatal(err)
		}
		c, err := CentsOf(p)
		if err != nil {
			t.Fatal(err)
		}
		want += c
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if want == 0 || inv.Total != want || d.Totals.Subtotal != documents.Cents(want) || d.Totals.Total != documents.Cents(want) ||
		d.Totals.AmountDue != 0 {
		t.Errorf("totals %+v, invoice total %s, want %s from the usage rows", d.Totals, inv.Total, want)
	}
	usageCharged, err := CentsOf(inv.Balance.UsageCharged)
	if err != nil {
		t.Fatal(err)
	}
	closing, err := CentsOf(inv.Balance.Closing)
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Lines[2]; p.Kind != documents.LineCredits || p.Description != "Credits bought on 2026-03-02" || p.Amount != 5_00 {
		t.Errorf("the purchase: %+v", p)
	}
	if u := d.Lines[3]; u.Kind != documents.LineCredits || u.Description != "Usage charged in the period" ||
		u.Amount != documents.Cents(usageCharged) || usageCharged >= 0 {
		t.Errorf("the usage charged: %+v, want %s", u, usageCharged)
	}
	if b := d.Totals.Balance; b == nil || b.Opening != 0 || b.Closing != documents.Cents(closing) || closing != 5_00+usageCharged {
		t.Errorf("balance %+v, want 0 to %s ($5.00 bought, %s charged)", b, closing, usageCharged)
	}
	if len(d.Notes) < 2 || d.Notes[0] != roundingNote || d.Notes[1] != balanceNote {
		t.Errorf("notes %q, want the rounding rule first", d.Notes)
	}

	// Its CSV has a row per line; its PDF renders.
	var buf bytes.Buffer
	if err := documents.LinesCSV(&buf, d); err != nil {
		t.Fatal(err)
	}
	if csvRows, err := csv.NewReader(&buf).ReadAll(); err != nil || len(csvRows) != 1+len(d.Lines) || csvRows[1][0] != "DRAFT" {
		t.Errorf("CSV: %d rows (%v), want %d with DRAFT", len(csvRows), err, 1+len(d.Lines))
	}
	buf.Reset()
	if err := documents.PDF(&buf, d); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("%PDF-")) {
		t.Errorf("PDF: %v", err)
	}

	w.at(time.Date(2026, 4, 5, 10, 0, 0, 0, time.UTC))
	w.approve(inv.ID)
	issued, err := InvoiceDocument(w.mustInvoice(inv.ID))
	if err != nil {
		t.Fatal(err)
	}
	if issued.Status != documents.StatusIssued || issued.Number != "GPM-2026-000001" ||
		!issued.IssueDate.Equal(time.Date(2026, 4, 5, 10, 0, 0, 0, time.UTC)) || issued.Totals.Total != documents.Cents(want) {
		t.Errorf("issued document: %s %q issued %s total %d", issued.Status, issued.Number, issued.IssueDate, issued.Totals.Total)
	}
}

// A void for a service not delivered: the credit note's document carries the voided
// invoice's lines and total, credits the total back as the amount due to the buyer, and
// names in its notes the invoice it cancels and the reason with the note (its line break
// printed as a space). The voided invoice's document keeps its number and names its credit
// note; the regenerated draft's shows the credit as an adjustment and names the invoice it
// replaces.
func TestCreditNoteAndRegeneratedDocuments(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 2) // $3.60
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)
	w.approve(inv.ID)
	w.at(time.Date(2026, 4, 6, 9, 0, 0, 0, time.UTC))
	voided, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: inv.ID, By: w.finance, Reason: VoidNotDelivered, Note: "rig\ndown"})
	if err != nil {
		t.Fatal(err)
	}
	cn, err := w.svc.CreditNote(w.ctx(), voided.CreditNoteID)
	if err != nil {
		t.Fatal(err)
	}
	d, err := CreditNoteDocument(cn)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != documents.KindCreditNote || d.Status != documents.StatusIssued || d.Number != "GPM-2026-000001-CN01" ||
		!d.IssueDate.Equal(cn.IssuedAt) || d.Currency != "USD" || len(d.Lines) != len(cn.Lines) || len(d.Lines) != 1 ||
		d.Lines[0].Amount != 3_60 || d.Totals.Total != 3_60 || d.Totals.Subtotal != 3_60 || d.Totals.AmountDue != 3_60 ||
		d.Totals.Balance != nil {
		t.Fatalf("credit note document: %s %s %q %d lines, totals %+v", d.Kind, d.Status, d.Number, len(d.Lines), d.Totals)
	}
	for _, want := range []string{"This credit note cancels invoice GPM-2026-000001 of March 2026 in full.",
		"Reason: Service not delivered. rig down", "$3.60 is credited back to the buyer's prepaid balance.", roundingNote} {
		if !slices.Contains(d.Notes, want) {
			t.Errorf("the credit note's notes %q lack %q", d.Notes, want)
		}
	}

	old, err := InvoiceDocument(w.mustInvoice(inv.ID))
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != documents.StatusVoid || old.Number != "GPM-2026-000001" ||
		!slices.Contains(old.Notes, "This invoice was voided on 2026-04-06: service not delivered. Credit note GPM-2026-000001-CN01 cancels it.") {
		t.Errorf("the voided invoice's document: %s %q notes %q", old.Status, old.Number, old.Notes)
	}
	regen, err := InvoiceDocument(w.mustInvoice(voided.RegeneratedID))
	if err != nil {
		t.Fatal(err)
	}
	credit := regen.Lines[1]
	if regen.Status != documents.StatusDraft || credit.Kind != documents.LineAdjustment || credit.Amount != -3_60 ||
		!strings.Contains(credit.Description, "GPM-2026-000001-CN01") || regen.Totals.Total != 0 ||
		!slices.Contains(regen.Notes, "This invoice replaces invoice GPM-2026-000001 of the same period, which was voided.") {
		t.Errorf("the regenerated draft's document: %s lines %+v total %d notes %q", regen.Status, regen.Lines, regen.Totals.Total, regen.Notes)
	}
}

// A statement's document: the provider sells, the platform buys; the lines at the provider's
// asks; what the previous statement carried over is a line of its own, so that the total is
// the statement's net and the amount due to the provider its payout; a net under the minimum
// says it is carried over.
func TestStatementDocumentIsTheStatementWithItsCarryOver(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 5) // $3.60 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	mar := w.statementOf(fjordAccount, march)
	d, err := StatementDocument(mar)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != documents.KindStatement || d.Seller.LegalName != "Fjord GPU Co-op" || d.Buyer.LegalName != "gpumarket Ltd" ||
		len(d.Lines) != 1 || d.Lines[0].Tokens == nil || d.Lines[0].Tokens.InputPrice != askIn || d.Lines[0].Tokens.OutputPrice != askOut ||
		d.Lines[0].Amount != 3_60 || d.Lines[0].Exact.Cmp(mar.Lines[0].Earned) != 0 || d.Totals.Total != 3_60 || d.Totals.AmountDue != 0 ||
		!slices.Contains(d.Notes, "The net of $3.60 is below the minimum payout of $10.00: it is carried over to the provider's next statement.") {
		t.Fatalf("March statement document: seller %q buyer %q lines %+v totals %+v notes %q", d.Seller.LegalName, d.Buyer.LegalName,
			d.Lines, d.Totals, d.Notes)
	}
	if mar.Total != mar.Net {
		t.Errorf("the statement's total_cents %s, want its net %s", mar.Total, mar.Net)
	}
	w.approveStatement(mar.ID)
	w.uses(acme, fjord, time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC), 10) // $7.20 earned
	w.at(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC))
	w.close(april)
	apr := w.statementOf(fjordAccount, april)
	d, err = StatementDocument(apr)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Lines) != 2 || d.Lines[1].Kind != documents.LineAdjustment || d.Lines[1].Amount != 3_60 ||
		d.Lines[1].Description != "Carried over from the provider's previous statement" ||
		d.Totals.Subtotal != 10_80 || d.Totals.Total != 10_80 || d.Totals.AmountDue != 10_80 ||
		!slices.Contains(d.Notes, "The net of $10.80 is paid out to the provider.") {
		t.Errorf("April statement document: lines %+v totals %+v notes %q", d.Lines, d.Totals, d.Notes)
	}
}

// The mapping of a line and of a party, rule by rule.
func TestDocumentLinesAndParties(t *testing.T) {
	in, out := money.MicroUSD(150_000), money.MicroUSD(300_000)
	charge := pico(123_456_789)
	for _, c := range []struct {
		name string
		line InvoiceLine
		want documents.Line
	}{
		{"usage at its prices", InvoiceLine{Kind: LineUsage, Description: "Standard tier · m", InputTokens: 10, OutputTokens: 5,
			InputPrice: &in, OutputPrice: &out, Charge: charge, Amount: 1},
			documents.Line{Kind: documents.LineUsage, Description: "Standard tier · m", Amount: 1,
				Tokens: &documents.Tokens{Input: 10, Output: 5, InputPrice: in, OutputPrice: out}}},
		{"usage metered before tickets carried prices", InvoiceLine{Kind: LineUsage, Description: "old", InputTokens: 3, OutputTokens: 4,
			Charge: charge, Amount: 1},
			documents.Line{Kind: documents.LineUsage, Description: "old", Amount: 1,
				Tokens: &documents.Tokens{Input: 3, Output: 4, Unpriced: true}}},
		{"a credit by a credit note", InvoiceLine{Kind: LineCredit, Description: "Credit note X: service not delivered",
			Charge: charge.Neg(), Amount: -1},
			documents.Line{Kind: documents.LineAdjustment, Description: "Credit note X: service not delivered", Amount: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := invoiceLine(c.line)
			if got.Kind != c.want.Kind || got.Description != c.want.Description || got.Amount != c.want.Amount ||
				(got.Tokens == nil) != (c.want.Tokens == nil) || got.Tokens != nil && *got.Tokens != *c.want.Tokens ||
				got.Exact == nil || got.Exact.Cmp(c.line.Charge) != 0 {
				t.Errorf("got %+v (tokens %+v), want %+v (tokens %+v)", got, got.Tokens, c.want, c.want.Tokens)
			}
		})
	}
	late := invoiceLine(InvoiceLine{Kind: LineLateUsage, UsagePeriod: march, Description: "late", InputPrice: &in, OutputPrice: &out})
	if late.Kind != documents.LineLateUsage || late.ForPeriod == nil || *late.ForPeriod != documents.Month(2026, time.March) {
		t.Errorf("late usage: %+v", late)
	}
	p := documentParty(Party{LegalName: "L", Address: "1\n\n2\n3\n4\n5\n6\n7", Country: "PL", CountryName: "Poland"}, "PO-9")
	if !equalParty(p, documents.Party{LegalName: "L", Address: []string{"1", "2", "3", "4", "5", "6, 7"}, Country: "Poland", PONumber: "PO-9"}) {
		t.Errorf("party %+v: seven address lines, want six, the last two joined", p)
	}
}

// Text that goes on documents is refused as it is entered when their font cannot print it: a
// legal name in Chinese, a void's note with a tab.
func TestTextForDocumentsIsRefusedWhenItCannotBePrinted(t *testing.T) {
	err := BillingDetailsInput{LegalName: "北京数据有限公司", Address: "1 Road", Country: "CN"}.Validate()
	var e *services.Error
	if !errors.As(err, &e) || e.Code != services.CodeInvalid || !strings.Contains(e.Fields["legal_name"], "Documents cannot print") {
		t.Errorf("a legal name the font lacks: %v", err)
	}
	in := VoidInput{ID: "x", By: "00000000-0000-4000-8000-000000000000", Reason: VoidOther, Note: "see\tticket"}
	if err := in.validate(InvoiceVoidReasons); !errors.As(err, &e) || e.Fields["note"] == "" {
		t.Errorf("a note with a tab: %v", err)
	}
	in = VoidInput{ID: "x", By: "00000000-0000-4000-8000-000000000000", Reason: VoidOther, Note: "see\nticket 12"}
	if err := in.validate(InvoiceVoidReasons); err != nil {
		t.Errorf("a note over two lines: %v", err)
	}
}

// A close recorded as running whose period's lock nobody holds was left by a process that
// stopped: it reads as failed, with what to do. While a process holds the lock it reads as
// running, and a second close is refused.
func TestAnInterruptedCloseReadsAsFailed(t *testing.T) {
	w := newWorld(t)
	w.uses(w.account("Acme Labs"), w.rig(w.account("Fjord GPU Co-op")), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	if _, err := w.pool.Exec(w.ctx(), `INSERT INTO invoice_closes (period, status, started_at, runs) VALUES ($1, 'running', $2, 1)`,
		march.Start(), w.clock()); err != nil {
		t.Fatal(err)
	}
	pr, err := w.svc.CloseProgressOf(w.ctx(), march)
	if err != nil || pr.Status != CloseFailed || pr.Problem != interruptedProblem {
		t.Fatalf("a running close nobody runs: %+v, %v", pr, err)
	}
	list, err := w.svc.Closes(w.ctx(), 10)
	if err != nil || len(list) != 1 || list[0].Status != CloseFailed {
		t.Fatalf("closes: %+v, %v", list, err)
	}

	conn, err := w.pool.Acquire(w.ctx())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(w.ctx(), `SELECT pg_advisory_lock($1, $2)`, lockClose, march.lockKey()); err != nil {
		t.Fatal(err)
	}
	if pr, err := w.svc.CloseProgressOf(w.ctx(), march); err != nil || pr.Status != CloseRunning || pr.Problem != "" {
		t.Errorf("a close another process runs: %+v, %v", pr, err)
	}
	if _, err := w.svc.Close(w.ctx(), CloseInput{Period: march, By: w.finance}); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("closing while another runs: %v, want a conflict", err)
	}
	if _, err := conn.Exec(w.ctx(), `SELECT pg_advisory_unlock($1, $2)`, lockClose, march.lockKey()); err != nil {
		t.Fatal(err)
	}
	if pr := w.close(march); pr.Status != CloseDone || pr.Runs != 2 {
		t.Errorf("closing again: %+v, want done on its second run", pr)
	}
}

func equalParty(a, b documents.Party) bool {
	return a.LegalName == b.LegalName && slices.Equal(a.Address, b.Address) && a.Country == b.Country && a.VATID == b.VATID &&
		a.PONumber == b.PONumber
}
