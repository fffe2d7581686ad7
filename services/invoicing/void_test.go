package invoicing

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
)

// Approve, void, credit note, regenerate: a voided invoice keeps its number; its credit note is
// numbered after it; the regenerated draft replaces it with the same PO number. A credit for a
// service not delivered puts the invoice's total back on the prepaid credit and takes each
// provider's share back from its payable, the platform's revenue the rest; a credit for wrong
// details moves no money; the same usage is never credited twice.
func TestApproveVoidCreditNoteRegenerate(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount, northwindAccount := w.account("Fjord GPU Co-op"), w.account("Northwind Compute")
	fjord, northwind := w.rig(fjordAccount), w.rig(northwindAccount)
	if _, err := w.svc.SetBillingDetails(w.ctx(), acme, "", BillingDetailsInput{LegalName: "Acme Labs Ltd",
		Address: "2 Quay Street\nGalway", Country: "ie", VATID: "IE 9876543 WA", PONumber: "PO-1"}); err != nil {
		t.Fatal(err)
	}
	w.buy(acme, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), 500)
	// Both at the same tier, model and price: one line of $1.05.
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), in: 1_000_000, out: 1_000_000})     // $0.45
	w.use(request{customer: acme, rig: northwind, at: time.Date(2026, 3, 11, 12, 0, 0, 0, time.UTC), in: 2_000_000, out: 1_000_000}) // $0.60
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	first := w.approve(w.invoiceOf(acme, march).ID)[0]
	inv := w.invoiceOf(acme, march)
	if first.Number != "GPM-2026-000001" || inv.Total != 1_05 || inv.AmountDue != 0 || inv.PONumber != "PO-1" ||
		inv.Buyer.LegalName != "Acme Labs Ltd" || inv.Buyer.VATID != "IE9876543WA" || inv.Seller.VATID != "IE1234567FA" {
		t.Fatalf("issued: %s %s due %s PO %q buyer %+v seller %+v", first.Number, inv.Total, inv.AmountDue, inv.PONumber, inv.Buyer, inv.Seller)
	}
	if want := []Action{ActionVoid}; !equalActions(inv.Actions, want) {
		t.Errorf("an issued invoice with nothing due allows %v, want %v", inv.Actions, want)
	}
	// The customer's PO changes afterwards: the regenerated invoice keeps the voided one's.
	if _, err := w.svc.SetBillingDetails(w.ctx(), acme, "", BillingDetailsInput{LegalName: "Acme Labs Ltd",
		Address: "2 Quay Street\nGalway", Country: "IE", PONumber: "PO-2"}); err != nil {
		t.Fatal(err)
	}
	balances := func() [4]string {
		return [4]string{w.balance(ledger.AccountCustomerCredit, acme).String(), w.balance(ledger.AccountProviderPayable, fjordAccount).String(),
			w.balance(ledger.AccountProviderPayable, northwindAccount).String(), w.balance(ledger.AccountPlatformRevenue, "").String()}
	}
	// $5 bought, $1.05 used; Fjord is owed $0.18, Northwind $0.24; the platform kept $0.63.
	if got, want := balances(), [4]string{"$3.95", "$0.18", "$0.24", "$0.63"}; got != want {
		t.Fatalf("balances before the void: %v, want %v", got, want)
	}

	w.at(time.Date(2026, 4, 6, 9, 0, 0, 0, time.UTC))
	if _, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: inv.ID, By: w.finance, Reason: VoidOther}); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("a void for another reason without a note: %v, want invalid", err)
	}
	voided, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: inv.ID, By: w.finance, Reason: VoidNotDelivered, Note: "rig down"})
	if err != nil {
		t.Fatal(err)
	}
	if voided.CreditNoteNumber != "GPM-2026-000001-CN01" || voided.Credited != pico(1_05*10_000_000_000) {
		t.Fatalf("void: %+v", voided)
	}
	if got, want := balances(), [4]string{"$5.00", "$0.00", "$0.00", "$0.00"}; got != want {
		t.Errorf("balances after the credit: %v, want %v (credit back, shares clawed back, the margin given up)", got, want)
	}
	cn, err := w.svc.CreditNote(w.ctx(), voided.CreditNoteID)
	if err != nil {
		t.Fatal(err)
	}
	if cn.InvoiceNumber != "GPM-2026-000001" || cn.Amount != 1_05 || cn.Reason != VoidNotDelivered || cn.PONumber != "PO-1" ||
		cn.Buyer.LegalName != "Acme Labs Ltd" || len(cn.Lines) != 1 || len(cn.Clawbacks) != 2 ||
		cn.RegeneratedInvoiceID != voided.RegeneratedID || cn.LedgerTransactionID == "" {
		t.Errorf("credit note: %+v", cn)
	}
	old := w.mustInvoice(inv.ID)
	if old.Status != StatusVoid || old.Number != "GPM-2026-000001" || old.VoidReason != VoidNotDelivered ||
		old.ReplacedByInvoiceID != voided.RegeneratedID || len(old.CreditNotes) != 1 || len(old.Actions) != 0 {
		t.Errorf("the voided invoice: %s %s reason %s replaced by %s, %d credit notes, actions %v", old.Number, old.Status,
			old.VoidReason, old.ReplacedByInvoiceID, len(old.CreditNotes), old.Actions)
	}
	regen := w.mustInvoice(voided.RegeneratedID)
	if regen.Status != StatusDraft || regen.DisplayNumber != DraftNumber || regen.ReplacesInvoiceID != inv.ID || regen.PONumber != "PO-1" ||
		len(regen.Lines) != 2 || regen.Lines[1].Kind != LineCredit || regen.Lines[1].Amount != -1_05 || regen.Total != 0 ||
		!strings.Contains(regen.Lines[1].Description, "GPM-2026-000001-CN01") {
		t.Fatalf("regenerated: %s %s replaces %s PO %q total %s lines %+v", regen.Status, regen.DisplayNumber,
			regen.ReplacesInvoiceID, regen.PONumber, regen.Total, regen.Lines)
	}

	second := w.approve(regen.ID)[0]
	if second.Number != "GPM-2026-000002" {
		t.Errorf("the regenerated invoice's number: %s", second.Number)
	}
	// Wrong details: no money moves, the PO number given replaces the old one on the next draft.
	po := "PO-3"
	again, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: regen.ID, By: w.finance2, Reason: VoidWrongDetails, PONumber: &po})
	if err != nil {
		t.Fatal(err)
	}
	if again.CreditNoteNumber != "GPM-2026-000002-CN01" || again.Credited.Sign() != 0 {
		t.Errorf("a void for wrong details: %+v", again)
	}
	if got, want := balances(), [4]string{"$5.00", "$0.00", "$0.00", "$0.00"}; got != want {
		t.Errorf("balances after a void for wrong details: %v, want %v", got, want)
	}
	third := w.mustInvoice(again.RegeneratedID)
	if third.PONumber != "PO-3" || third.Total != 0 || len(third.Lines) != 2 {
		t.Errorf("the third draft: PO %q total %s lines %d", third.PONumber, third.Total, len(third.Lines))
	}
	w.approve(third.ID)
	if _, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: third.ID, By: w.finance, Reason: VoidNotDelivered}); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("crediting March's usage a second time: %v, want a conflict", err)
	}
	// A draft is approved, not voided; a void one allows nothing.
	if _, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: inv.ID, By: w.finance, Reason: VoidWrongDetails}); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("voiding a void invoice: %v, want a conflict", err)
	}
	var credits int
	w.scan(`SELECT count(*) FROM ledger_transactions WHERE kind = 'credit_note'`, nil, &credits)
	if credits != 1 {
		t.Errorf("%d credit note transactions in the ledger, want 1", credits)
	}
	page, err := w.audit.List(w.ctx(), audit.Filter{Action: audit.ActionVoid})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Actor != "finance2@example.test" || page.Entries[1].Actor != "finance@example.test" {
		t.Errorf("voids in the audit log: %+v, %v", page.Entries, err)
	}
}

func (w *world) mustInvoice(id string) Invoice {
	w.t.Helper()
	inv, err := w.svc.Invoice(w.ctx(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return inv
}

func equalActions(a, b []Action) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
