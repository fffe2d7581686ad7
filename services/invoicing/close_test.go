package invoicing

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// charge is what tokens cost at the standard tier's old price ($0.15 in, $0.30 out per million).
func charge(in, out int64) int64 { return in*150_000 + out*300_000 }

// chargeNew is the same at the new price ($0.20 in, $0.50 out).
func chargeNew(in, out int64) int64 { return in*200_000 + out*500_000 }

// payable is what tokens earn at the tests' asks.
func payable(in, out int64) int64 { return in*askIn + out*askOut }

func cents(p int64) Cents {
	c, err := CentsOf(pico(p))
	if err != nil {
		panic(err)
	}
	return c
}

// Usage on the last millisecond of March and on the first of April is each on its own
// period's invoice (docs/failure-cases.md, case 28).
func TestFieldCase28UsageAtAMonthsEdgeIsInItsOwnPeriod(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	last := time.Date(2026, 3, 31, 23, 59, 59, 999_000_000, time.UTC)
	first := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	w.use(request{customer: acme, rig: fjord, at: last, in: 1_000_000, out: 2_000_000, meteredAt: first.Add(time.Second)})
	w.use(request{customer: acme, rig: fjord, at: first, in: 3_000_000, out: 4_000_000, meteredAt: first.Add(2 * time.Second)})

	w.at(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	w.close(april)
	mar, apr := w.invoiceOf(acme, march), w.invoiceOf(acme, april)
	for _, c := range []struct {
		inv           Invoice
		requests      int64
		in, out, want int64
	}{
		{mar, 1, 1_000_000, 2_000_000, chargeNew(1_000_000, 2_000_000)},
		{apr, 1, 3_000_000, 4_000_000, chargeNew(3_000_000, 4_000_000)},
	} {
		if len(c.inv.Lines) != 1 {
			t.Fatalf("%s: %d lines, want 1: %+v", c.inv.Period, len(c.inv.Lines), c.inv.Lines)
		}
		l := c.inv.Lines[0]
		if l.Requests != c.requests || l.InputTokens != c.in || l.OutputTokens != c.out || l.Charge != pico(c.want) ||
			l.UsagePeriod != c.inv.Period || c.inv.Total != cents(c.want) {
			t.Errorf("%s: line %+v, total %s; want %d requests of %d+%d tokens charged %s, total %s", c.inv.Period, l,
				c.inv.Total, c.requests, c.in, c.out, pico(c.want), cents(c.want))
		}
	}
	// $1.20 and $2.60: the two invoices together are the two requests, each once.
	if mar.Total != 1_20 || apr.Total != 2_60 {
		t.Errorf("March %s, April %s; want $1.20 and $2.60", mar.Total, apr.Total)
	}
}

// Closing a period twice makes one invoice per account and one statement per provider, not
// two; the second close refreshes the drafts and leaves an issued invoice as it was
// (docs/failure-cases.md, case 28).
func TestFieldCase28ClosingTwiceMakesOneDocumentEach(t *testing.T) {
	w := newWorld(t)
	acme, globex := w.account("Acme Labs"), w.account("Globex")
	fjord, northwind := w.rig(w.account("Fjord GPU Co-op")), w.rig(w.account("Northwind Compute"))
	day := time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC)
	w.use(request{customer: acme, rig: fjord, at: day, in: 1_000_000, out: 1_000_000})
	w.use(request{customer: globex, rig: northwind, at: day, in: 2_000_000, out: 1_000_000})
	w.use(request{customer: globex, rig: fjord, at: day.Add(time.Hour), in: 1_000_000, out: 0})

	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	first := w.close(march)
	if first.Invoices != 2 || first.Statements != 2 || first.Status != CloseDone || first.CustomersTotal != 2 ||
		first.CustomersDone != 2 || first.ProvidersTotal != 2 || first.ProvidersDone != 2 {
		t.Fatalf("first close: %+v", first)
	}
	before := w.invoiceOf(acme, march)
	w.approve(before.ID)

	w.at(time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC))
	second := w.close(march)
	if second.Invoices != 1 || second.Statements != 2 || second.LeftIssued != 1 || second.Runs != 2 {
		t.Errorf("second close: %+v; want 1 invoice refreshed, 2 statements, the issued one left", second)
	}
	var invoices, statements int
	w.scan(`SELECT (SELECT count(*) FROM invoices WHERE period = $1), (SELECT count(*) FROM statements WHERE period = $1)`,
		[]any{march.Start()}, &invoices, &statements)
	if invoices != 2 || statements != 2 {
		t.Errorf("%d invoices and %d statements for March after two closes, want 2 and 2", invoices, statements)
	}
	after := w.invoiceOf(acme, march)
	if after.ID != before.ID || after.Status != StatusIssued || after.Total != 45 || !after.ComputedAt.Equal(before.ComputedAt) {
		t.Errorf("the issued invoice after a re-close: %s %s %s computed %s; want it as it was issued ($0.45)",
			after.Number, after.Status, after.Total, after.ComputedAt)
	}
	globexInv := w.invoiceOf(globex, march)
	if globexInv.Status != StatusDraft || !globexInv.ComputedAt.Equal(w.clock()) || globexInv.Total != 60 {
		t.Errorf("Globex's draft: %s computed %s, total %s; want refreshed now, $0.60", globexInv.Status, globexInv.ComputedAt, globexInv.Total)
	}
	// A request without output tokens is on the line, counted and not charged.
	if l := globexInv.Lines[0]; l.Requests != 2 || l.InputTokens != 3_000_000 || l.UnchargedRequests != 1 ||
		l.UnchargedInputTokens != 1_000_000 || l.ChargedInputTokens() != 2_000_000 || l.Charge != pico(charge(2_000_000, 1_000_000)) {
		t.Errorf("Globex's line: %+v", l)
	}

	// Two closes at once: the second is refused while the first holds the period.
	conn, err := w.pool.Acquire(w.ctx())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(w.ctx(), `SELECT pg_advisory_lock($1, $2)`, lockClose, march.lockKey()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Close(w.ctx(), CloseInput{Period: march, By: w.finance}); services.ErrorCode(err) != services.CodeConflict {
		t.Errorf("a close while another runs: %v, want a conflict", err)
	}
}

// A period that has not ended cannot be closed.
func TestAPeriodIsClosedOnlyOnceItEnded(t *testing.T) {
	w := newWorld(t)
	w.at(time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC))
	if _, err := w.svc.Close(w.ctx(), CloseInput{Period: march, By: w.finance}); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("closing March before it ended: %v, want invalid", err)
	}
}
