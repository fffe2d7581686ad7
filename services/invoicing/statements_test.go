package invoicing

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
)

// uses meters n requests of 10 million input and 1 million output tokens, an hour apart from
// start: each costs $1.80 at the old price ($2.50 at the new) and earns its provider $0.72.
func (w *world) uses(customer string, r rig, start time.Time, n int) {
	w.t.Helper()
	for i := range n {
		w.use(request{customer: customer, rig: r, at: start.Add(time.Duration(i) * time.Hour), in: 10_000_000, out: 1_000_000})
	}
}

func (w *world) approveStatement(id string) Approved {
	w.t.Helper()
	res, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{id})
	if err != nil {
		w.t.Fatal(err)
	}
	if res[0].Err != nil {
		w.t.Fatalf("approve statement %s: %v", id, res[0].Err)
	}
	return res[0]
}

// A statement under the minimum payout ($10) pays nothing and carries its net to the
// provider's next statement, which pays out once the carry and its own earnings reach the
// minimum. Statements are approved in the order of their periods: each carries on from the
// one before.
func TestAStatementUnderTheMinimumCarriesOver(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 5) // $3.60 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	mar := w.statementOf(fjordAccount, march)
	if mar.Earnings != 3_60 || mar.Net != 3_60 || mar.Payout != 0 || mar.CarriedOut != 3_60 || mar.MinimumPayout != 10_00 ||
		len(mar.Lines) != 1 || mar.Lines[0].Requests != 5 || mar.Lines[0].AskInput != askIn || mar.Lines[0].AskOutput != askOut ||
		!strings.Contains(mar.Lines[0].Description, "4x NVIDIA GeForce RTX 4090 in eu-west") {
		t.Fatalf("March: %+v", mar)
	}
	w.uses(acme, fjord, time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC), 10) // $7.20 earned
	w.at(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC))
	w.close(april)
	apr := w.statementOf(fjordAccount, april)
	if apr.Earnings != 7_20 || apr.CarriedIn != 3_60 || apr.CarriedFromStatementID != mar.ID || apr.Net != 10_80 ||
		apr.Payout != 10_80 || apr.CarriedOut != 0 {
		t.Fatalf("April: earnings %s carried in %s from %s, net %s, payout %s, carried out %s", apr.Earnings, apr.CarriedIn,
			apr.CarriedFromStatementID, apr.Net, apr.Payout, apr.CarriedOut)
	}
	res, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{apr.ID})
	if err != nil || services.ErrorCode(res[0].Err) != services.CodeConflict {
		t.Fatalf("approving April before March: %+v, %v; want a conflict", res, err)
	}
	w.approveStatement(mar.ID)
	if got := w.statementOf(fjordAccount, march); !equalActions(got.Actions, []Action{ActionVoid}) || got.Number != "GPS-2026-000001" {
		t.Errorf("March issued with nothing to pay out: %s, actions %v", got.Number, got.Actions)
	}
	w.approveStatement(apr.ID)
	apr = w.statementOf(fjordAccount, april)
	if !equalActions(apr.Actions, []Action{ActionMarkPaid, ActionVoid}) || apr.Payee.LegalName != "Fjord GPU Co-op" ||
		apr.Payer.LegalName != "gpumarket Ltd" {
		t.Errorf("April issued: actions %v, payee %+v, payer %+v", apr.Actions, apr.Payee, apr.Payer)
	}
	// March carried into April: it can no longer be voided.
	if got := w.statementOf(fjordAccount, march); len(got.Actions) != 0 {
		t.Errorf("March once April is issued allows %v", got.Actions)
	}
	if _, err := w.svc.VoidStatement(w.ctx(), VoidInput{ID: mar.ID, By: w.finance, Reason: VoidWrongDetails}); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("voiding March under April: %v, want a conflict", err)
	}
	if err := w.svc.MarkStatementPaid(w.ctx(), w.finance, apr.ID, "tr_1"); err != nil {
		t.Fatal(err)
	}
	if got := w.statementOf(fjordAccount, april); got.Status != StatusPaid || got.PaymentReference != "tr_1" || len(got.Actions) != 0 {
		t.Errorf("April paid: %s %q %v", got.Status, got.PaymentReference, got.Actions)
	}
}

// A credit note for a service not delivered takes each provider's share back from its
// payable; the provider's next statement shows it as a clawback that nets against its
// earnings and its carry, down to a negative net that is carried into the statement after.
func TestAClawbackAfterACreditNoteNetsAgainstTheNextStatements(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount, northwindAccount := w.account("Fjord GPU Co-op"), w.account("Northwind Compute")
	fjord, northwind := w.rig(fjordAccount), w.rig(northwindAccount)
	w.buy(acme, time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), 50_00)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 15)    // $27.00; Fjord earns $10.80
	w.uses(acme, northwind, time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), 5) // $9.00; Northwind earns $3.60
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)
	w.approve(inv.ID)
	fMar, nMar := w.statementOf(fjordAccount, march), w.statementOf(northwindAccount, march)
	w.approveStatement(fMar.ID)
	w.approveStatement(nMar.ID)
	if err := w.svc.MarkStatementPaid(w.ctx(), w.finance, fMar.ID, "tr_fjord_march"); err != nil {
		t.Fatal(err)
	}
	if fMar.Payout != 10_80 || nMar.Payout != 0 || nMar.CarriedOut != 3_60 || inv.Total != 36_00 {
		t.Fatalf("March: Fjord pays out %s, Northwind carries %s, Acme's invoice %s", fMar.Payout, nMar.CarriedOut, inv.Total)
	}

	w.at(time.Date(2026, 4, 6, 9, 0, 0, 0, time.UTC))
	voided, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: inv.ID, By: w.finance, Reason: VoidNotDelivered})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.balance(ledger.AccountProviderPayable, fjordAccount).String(); got != "$0.00" {
		t.Errorf("Fjord's payable after the clawback: %s, want $0.00 ($10.80 earned, $10.80 taken back)", got)
	}
	if got := w.balance(ledger.AccountPlatformRevenue, "").String(); got != "$0.00" {
		t.Errorf("revenue after the credit: %s, want $0.00 (the $21.60 margin given up)", got)
	}
	w.uses(acme, fjord, time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC), 10) // Fjord earns $7.20
	w.at(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC))
	w.close(april)
	f := w.statementOf(fjordAccount, april)
	var claw StatementLine
	for _, l := range f.Lines {
		if l.Kind == LineClawback {
			claw = l
		}
	}
	if f.Earnings != 7_20 || f.Clawbacks != -10_80 || f.CarriedIn != 0 || f.Net != -3_60 || f.Payout != 0 || f.CarriedOut != -3_60 ||
		claw.Amount != -10_80 || claw.CreditNoteID != voided.CreditNoteID || !strings.Contains(claw.Description, voided.CreditNoteNumber) {
		t.Fatalf("Fjord's April: earnings %s, clawbacks %s, carried in %s, net %s, payout %s, carried out %s; clawback %+v",
			f.Earnings, f.Clawbacks, f.CarriedIn, f.Net, f.Payout, f.CarriedOut, claw)
	}
	if !containsFlag(flagStrings(f.Flags), FlagNegativeBalance) {
		t.Errorf("Fjord's April nets below zero and is not flagged: %v", f.Flags)
	}
	if f.Payable.Opening.String() != "$10.80" || f.Payable.CreditNotes.String() != "$-10.80" || f.Payable.Usage.String() != "$7.20" ||
		f.Payable.Closing.String() != "$7.20" {
		t.Errorf("Fjord's payable over April: %+v", f.Payable)
	}
	n := w.statementOf(northwindAccount, april)
	if n.Earnings != 0 || n.Clawbacks != -3_60 || n.CarriedIn != 3_60 || n.Net != 0 || n.Payout != 0 || len(n.Lines) != 1 {
		t.Errorf("Northwind's April, its carry netted by the clawback: %+v", n)
	}

	w.approveStatement(f.ID)
	w.uses(acme, fjord, time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC), 20) // Fjord earns $14.40
	w.at(time.Date(2026, 6, 4, 0, 0, 0, 0, time.UTC))
	w.close(MonthPeriod(2026, time.May))
	may := w.statementOf(fjordAccount, MonthPeriod(2026, time.May))
	if may.Earnings != 14_40 || may.CarriedIn != -3_60 || may.Net != 10_80 || may.Payout != 10_80 {
		t.Errorf("Fjord's May: earnings %s, carried in %s, net %s, payout %s; want the clawback's rest taken from it",
			may.Earnings, may.CarriedIn, may.Net, may.Payout)
	}
}

func flagStrings(flags []Flag) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = string(f)
	}
	return out
}
