package invoicing

import (
	"strings"
	"testing"
	"time"
)

// Usage of March metered after March was closed lands on March's invoice while it is a draft
// (a re-close refreshes it, and approval computes it again before it is issued); after it is
// issued, it goes on April's invoice as a late-usage line naming March, and March's invoice
// never changes (docs/failure-cases.md, case 29).
func TestFieldCase29LateUsageBeforeAndAfterTheInvoiceIsIssued(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	day := func(m time.Month, d, h, min int) time.Time { return time.Date(2026, m, d, h, min, 0, 0, time.UTC) }

	w.use(request{customer: acme, rig: fjord, at: day(3, 10, 12, 0), in: 1_000_000, out: 1_000_000}) // $0.45
	w.at(day(4, 4, 0, 0))
	w.close(march)
	if got := w.invoiceOf(acme, march).Total; got != 45 {
		t.Fatalf("March's draft at the close: %s, want $0.45", got)
	}

	// Metered late, while March's invoice is a draft: a re-close takes it in.
	w.use(request{customer: acme, rig: fjord, at: day(3, 31, 22, 0), in: 1_000_000, out: 1_000_000, meteredAt: day(4, 4, 1, 0)}) // $0.70
	w.at(day(4, 4, 2, 0))
	w.close(march)
	if got := w.invoiceOf(acme, march).Total; got != 1_15 {
		t.Fatalf("March's draft re-closed after a late request: %s, want $1.15", got)
	}
	// Metered late again, before approval: approval computes the draft again.
	w.use(request{customer: acme, rig: fjord, at: day(3, 31, 23, 0), in: 1_000_000, out: 1_000_000, meteredAt: day(4, 5, 9, 0)}) // $0.70
	w.at(day(4, 5, 10, 0))
	draft := w.invoiceOf(acme, march)
	if draft.Total != 1_15 {
		t.Fatalf("the draft before approval: %s, want $1.15 (as last computed)", draft.Total)
	}
	issued := w.approve(draft.ID)[0]
	mar := w.invoiceOf(acme, march)
	if issued.Total != 1_85 || mar.Total != 1_85 || mar.Status != StatusIssued || len(mar.Lines) != 2 ||
		mar.Lines[0].Charge != pico(charge(1_000_000, 1_000_000)) || mar.Lines[1].Requests != 2 ||
		mar.Lines[1].Charge != pico(2*chargeNew(1_000_000, 1_000_000)) {
		t.Fatalf("March as issued: %s (%s), lines %+v; want $1.85: $0.45 at the old price, 2 requests at the new", mar.Total, issued.Number, mar.Lines)
	}

	// Metered late after March's invoice was issued: it goes on April's.
	w.use(request{customer: acme, rig: fjord, at: day(3, 31, 23, 30), in: 1_000_000, out: 2_000_000, meteredAt: day(4, 6, 8, 0)}) // $1.20
	w.use(request{customer: acme, rig: fjord, at: day(4, 10, 12, 0), in: 1_000_000, out: 1_000_000})                              // $0.70
	w.at(day(5, 4, 0, 0))
	w.close(april)
	w.close(april) // twice: the late line is carried once
	apr := w.invoiceOf(acme, april)
	if len(apr.Lines) != 2 || apr.Total != 1_90 {
		t.Fatalf("April: %s, lines %+v; want $1.90: $0.70 of April and $1.20 of March", apr.Total, apr.Lines)
	}
	late := apr.Lines[1]
	if late.Kind != LineLateUsage || late.UsagePeriod != march || late.Requests != 1 || late.OutputTokens != 2_000_000 ||
		late.Charge != pico(chargeNew(1_000_000, 2_000_000)) || late.Amount != 1_20 ||
		!strings.Contains(late.Description, "Usage of March 2026 metered after its invoice was issued") {
		t.Errorf("the late line: %+v", late)
	}
	if apr.Lines[0].Kind != LineUsage || apr.Lines[0].UsagePeriod != april || apr.Lines[0].Amount != 70 {
		t.Errorf("April's own line: %+v", apr.Lines[0])
	}
	again := w.invoiceOf(acme, march)
	if again.Total != 1_85 || len(again.Lines) != 2 || !again.ComputedAt.Equal(mar.ComputedAt) || again.Number != issued.Number {
		t.Errorf("March after late usage: %s %s, %d lines, computed %s; want it unchanged", again.Number, again.Total,
			len(again.Lines), again.ComputedAt)
	}

	// The provider is paid the late request on April's statement too, once.
	st := w.statementOf(fjordAccount, april)
	if st.Earnings != cents(payable(1_000_000, 1_000_000)) || st.LateEarnings != 0 {
		// March's statement is still a draft: the late request lands on it, not on April's.
		t.Errorf("April's statement: earnings %s, late %s; want %s and none while March's is a draft", st.Earnings,
			st.LateEarnings, cents(payable(1_000_000, 1_000_000)))
	}
	marSt := w.statementOf(fjordAccount, march)
	res, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{marSt.ID})
	if err != nil || res[0].Err != nil {
		t.Fatalf("approve March's statement: %v %v", err, res)
	}
	if marSt = w.statementOf(fjordAccount, march); marSt.Earnings != cents(3*payable(1_000_000, 1_000_000)+payable(1_000_000, 2_000_000)) {
		t.Errorf("March's statement as issued: %s, want every March request", marSt.Earnings)
	}
}
