package invoicing

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// A request the meter flagged while billing it within its bounds, its rig claiming no more
// (excess 0/0: "canceled after HTTP 200"), puts no money at stake: no document is flagged for
// it and nothing is held. A request whose rig reported more than was billed (an excess above
// zero) flags its customer's invoice and its provider's statement, each saying how much, and
// its earnings are held out of the statement until finance resolves it: released, they are
// paid on the statement of the month of the release; clawed back, the provider's payable gives
// them up and the customer gets back what the request was charged.
func TestFlaggedEarningsAreHeldUntilResolved(t *testing.T) {
	w := newWorld(t)
	acme, globex := w.account("Acme Labs"), w.account("Globex")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.buy(acme, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), 100_00)
	w.buy(globex, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), 100_00)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 20) // $36.00 charged, $14.40 earned
	// The client went away after the rig's 200: flagged incomplete, billed within its bounds,
	// the rig reporting exactly what was billed. 10 million input tokens and 1,000 output:
	// $1.5003 charged, $0.60012 earned.
	canceled := w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC), in: 10_000_000,
		out: 1_000, status: requestlog.GatewayCanceled})
	var flag string
	var excess int64
	w.scan(`SELECT coalesce(flag, ''), coalesce(reported_output_tokens - output_tokens, -1) FROM usage_events WHERE request_id = $1`,
		[]any{canceled}, &flag, &excess)
	if flag != "incomplete" || excess != 0 {
		t.Fatalf("the canceled request: flag %q, excess %d; want incomplete with no excess", flag, excess)
	}
	// Two requests whose rig reported 1,000,000 output tokens while the gateway relayed 200,000
	// bytes in 50,000 chunks: clipped, billed 10,000,000 input and 250,008 output tokens (a
	// byte and a chunk a token, and the slack), $1.5750024 charged and $0.63000096 earned each.
	released := w.use(request{customer: globex, rig: fjord, at: time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC), in: 10_000_000,
		out: 1_000_000, relayed: 50_000})
	clawed := w.use(request{customer: globex, rig: fjord, at: time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), in: 10_000_000,
		out: 1_000_000, relayed: 50_000})
	var billedOut int64
	w.scan(`SELECT output_tokens FROM usage_events WHERE request_id = $1`, []any{released}, &billedOut)
	if billedOut != 250_008 {
		t.Fatalf("the clipped request billed %d output tokens, want 250,008", billedOut)
	}

	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	if inv := w.invoiceOf(acme, march); len(inv.Flags) != 0 {
		t.Errorf("Acme's invoice, whose only flagged request has no excess, is flagged %v: %v", inv.Flags, inv.FlagNotes)
	}
	inv := w.invoiceOf(globex, march)
	if !slices.Equal(inv.Flags, []Flag{FlagDiscrepancy}) || len(inv.FlagNotes) != 1 ||
		!strings.Contains(inv.FlagNotes[0], "2 requests") || !strings.Contains(inv.FlagNotes[0], "$3.15 charged") {
		t.Errorf("Globex's invoice: flags %v, notes %q; want the discrepancy of 2 requests, $3.15 charged", inv.Flags, inv.FlagNotes)
	}
	// Earned in March: $14.40 + $0.60012 + 2 x $0.63000096 = $16.26012192, in lines per asks:
	// one line, $16.26. Held: 2 x $0.63000096 = $1.26. Net and payout $15.00.
	mar := w.statementOf(fjordAccount, march)
	held := linesOf(mar, LineHeld)
	if mar.Earnings != 16_26 || mar.Held != -1_26 || mar.Net != 15_00 || mar.Payout != 15_00 || len(held) != 1 ||
		held[0].Amount != -1_26 || held[0].Requests != 2 || !slices.Equal(mar.Flags, []Flag{FlagDiscrepancy}) ||
		!strings.Contains(mar.FlagNotes[0], "$1.26 of earnings held") {
		t.Fatalf("March's statement: earnings %s, held %s, net %s, payout %s, held lines %+v, flags %v %q", mar.Earnings, mar.Held,
			mar.Net, mar.Payout, held, mar.Flags, mar.FlagNotes)
	}
	// The statement's document shows the held line, and its total foots.
	doc, err := StatementDocument(mar)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Totals.Total != 15_00 || !slices.ContainsFunc(doc.Lines, func(l documents.Line) bool {
		return l.Amount == -1_26 && strings.HasPrefix(l.Description, "Held:")
	}) {
		t.Errorf("the statement's document: total %d, lines %+v", doc.Totals.Total, doc.Lines)
	}
	w.approveStatement(mar.ID)

	// Finance resolves the flags in April: one released, one clawed back.
	w.at(time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC))
	payableBefore, creditBefore := w.balance(ledger.AccountProviderPayable, fjordAccount), w.balance(ledger.AccountCustomerCredit, globex)
	rel, err := w.svc.ResolveFlag(w.ctx(), ResolveInput{RequestID: released, By: w.finance, Resolution: ResolutionRelease,
		Note: "the rig's agent counted the stop sequence"})
	if err != nil || rel.Released != pico(630_000_960_000) {
		t.Fatalf("release: %+v, %v", rel, err)
	}
	cb, err := w.svc.ResolveFlag(w.ctx(), ResolveInput{RequestID: clawed, By: w.finance, Resolution: ResolutionClawBack})
	if err != nil || cb.ClawedBack != pico(630_000_960_000) || cb.Credited != pico(1_575_002_400_000) || cb.TransactionID == "" {
		t.Fatalf("claw back: %+v, %v", cb, err)
	}
	// The provider's payable gives up $0.63000096, Globex's credit gets back $1.5750024.
	if got := w.balance(ledger.AccountProviderPayable, fjordAccount); got != payableBefore.Add(pico(-630_000_960_000)) {
		t.Errorf("Fjord's payable after the claw back: %s, want %s less $0.63000096", got, payableBefore)
	}
	if got := w.balance(ledger.AccountCustomerCredit, globex); got != creditBefore.Add(pico(1_575_002_400_000)) {
		t.Errorf("Globex's credit after the claw back: %s, want %s and $1.5750024", got, creditBefore)
	}
	if _, err := w.svc.ResolveFlag(w.ctx(), ResolveInput{RequestID: released, By: w.finance, Resolution: ResolutionClawBack}); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("a second resolution: %v, want a conflict", err)
	}
	if _, err := w.svc.ResolveFlag(w.ctx(), ResolveInput{RequestID: canceled, By: w.finance, Resolution: ResolutionRelease}); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("resolving a request flagged without an excess: %v, want not found", err)
	}
	var audited int
	w.scan(`SELECT count(*) FROM audit_log WHERE action = 'resolve_flag' AND subject_id = ANY ($1) AND actor_id = $2`,
		[]any{[]string{released, clawed}, w.finance}, &audited)
	if audited != 2 {
		t.Errorf("%d resolutions in the audit log, want 2", audited)
	}
	list, err := w.svc.FlaggedRequests(w.ctx(), FlagFilter{Period: march})
	if err != nil || len(list) != 2 || list[0].RequestID != clawed || list[0].Resolution != ResolutionClawBack ||
		list[0].Earned != 63 || list[0].Charged != 1_58 || list[0].ExcessOutput != 749_992 || list[1].Resolution != ResolutionRelease {
		t.Errorf("the flagged requests of March: %+v, %v", list, err)
	}

	// Globex's March invoice, approved now, no longer carries the resolved flag.
	w.approve(w.invoiceOf(globex, march).ID)
	if inv := w.invoiceOf(globex, march); len(inv.Flags) != 0 {
		t.Errorf("Globex's invoice after the resolutions: flags %v %q", inv.Flags, inv.FlagNotes)
	}

	// April's statement pays the released earnings, and only them: $0.63, carried over (under
	// the $10 minimum).
	w.at(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC))
	w.close(april)
	apr := w.statementOf(fjordAccount, april)
	rl := linesOf(apr, LineReleased)
	if apr.Held != 63 || apr.Net != 63 || apr.CarriedOut != 63 || len(rl) != 1 || rl[0].Amount != 63 || rl[0].Requests != 1 ||
		len(linesOf(apr, LineHeld)) != 0 || len(apr.Flags) != 0 {
		t.Errorf("April's statement: held %s, net %s, carried %s, released lines %+v, flags %v", apr.Held, apr.Net, apr.CarriedOut,
			rl, apr.Flags)
	}
}

// A request billed above what its response told the customer (the rig's report within the
// bounds, so the meter flags nothing) is a discrepancy the gateway's reconciliation finds:
// money is at stake, and it is held and flagged like a report above the bill.
func TestABillAboveTheResponseIsHeld(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.buy(acme, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), 100_00)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 14) // $10.08 earned
	// The response said 100,000 output tokens; the rig reported, and the meter billed,
	// 1,000,000: $1.80 charged, $0.72 earned.
	over := w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 20, 0, 0, 0, 0, time.UTC), in: 10_000_000,
		out: 1_000_000, seenOut: 100_000, priceID: w.price})
	if _, err := w.requests.Reconcile(w.ctx()); err != nil {
		t.Fatal(err)
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)
	if !slices.Equal(inv.Flags, []Flag{FlagDiscrepancy}) || !strings.Contains(inv.FlagNotes[0], "1 request") ||
		!strings.Contains(inv.FlagNotes[0], "$1.80 charged") {
		t.Errorf("Acme's invoice: flags %v %q", inv.Flags, inv.FlagNotes)
	}
	mar := w.statementOf(fjordAccount, march)
	if mar.Earnings != 10_80 || mar.Held != -72 || mar.Net != 10_08 || mar.Payout != 10_08 {
		t.Errorf("March's statement: earnings %s, held %s, net %s, payout %s", mar.Earnings, mar.Held, mar.Net, mar.Payout)
	}
	list, err := w.svc.FlaggedRequests(w.ctx(), FlagFilter{Unresolved: true})
	if err != nil || len(list) != 1 || list[0].RequestID != over || list[0].ExcessOutput != 900_000 || list[0].ExcessInput != 0 {
		t.Fatalf("the flagged requests: %+v, %v", list, err)
	}
	if _, err := w.svc.ResolveFlag(w.ctx(), ResolveInput{RequestID: over, By: w.finance, Resolution: ResolutionRelease}); err != nil {
		t.Fatal(err)
	}
	if list, err := w.svc.FlaggedRequests(w.ctx(), FlagFilter{Unresolved: true}); err != nil || len(list) != 0 {
		t.Errorf("unresolved after the release: %+v, %v", list, err)
	}
}

func linesOf(st Statement, kind LineKind) []StatementLine {
	var out []StatementLine
	for _, l := range st.Lines {
		if l.Kind == kind {
			out = append(out, l)
		}
	}
	return out
}

func TestRequestDollars(t *testing.T) {
	for v, want := range map[int64]string{
		0:                 "$0.00",
		385_200_000:       "$0.0003852",
		51_087_792:        "$0.0000510878",
		1_575_002_400_000: "$1.575",
		9_999_999_999:     "$0.01",
		5_000_000_000:     "$0.005",
		4_999_999_999:     "$0.005",
		4_999_990_000:     "$0.00499999",
		123_456_789_012:   "$0.123457",
	} {
		if got := RequestDollars(pico(v)); got != want {
			t.Errorf("RequestDollars(%d pico) = %q, want %q", v, got, want)
		}
	}
}
