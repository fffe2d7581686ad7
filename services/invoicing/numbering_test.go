package invoicing

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
)

func TestNumberFormat(t *testing.T) {
	for _, c := range []struct {
		layout string
		first  int64
		year   int
		seq    int64
		want   string
		bad    bool
	}{
		{DefaultInvoiceNumberFormat, 1, 2026, 1, "GPM-2026-000001", false},
		{DefaultInvoiceNumberFormat, 1, 2026, 1_234_567, "GPM-2026-1234567", false},
		{"INV/{year}/{seq:04}", 418, 2027, 418, "INV/2027/0418", false},
		{"{year}-{seq}", 1, 2026, 12, "2026-12", false},
		{"A {seq:012} B {year}", 1, 2026, 5, "A 000000000005 B 2026", false},
		{"GPM-{seq:06}", 1, 0, 0, "", true},           // no year: numbers would repeat every year
		{"GPM-{year}", 1, 0, 0, "", true},             // no sequence
		{"GPM-{year}-{seq}-{seq}", 1, 0, 0, "", true}, // twice
		{"GPM-{year}-{seq:13}", 1, 0, 0, "", true},    // padding past 12
		{"GPM-{year}-{n}", 1, 0, 0, "", true},
		{"GPM<{year}>{seq}", 1, 0, 0, "", true},
		{DefaultInvoiceNumberFormat, 0, 0, 0, "", true},
	} {
		f, err := ParseNumberFormat(c.layout, c.first)
		if c.bad {
			if err == nil {
				t.Errorf("%q from %d: accepted", c.layout, c.first)
			}
			continue
		}
		if err != nil || f.Number(c.year, c.seq) != c.want || f.First() != c.first {
			t.Errorf("%q: %q, %v; want %q", c.layout, f.Number(c.year, c.seq), err, c.want)
		}
	}
}

// Two finance users approving the same thirty drafts at once, in opposite orders: each draft
// is issued once, by one of them, and the numbers are 1 to 30 with none skipped or repeated;
// no draft ever held a number.
func TestNumbersAreGaplessUnderTwoApproversAtOnce(t *testing.T) {
	w := newWorld(t)
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	const n = 30
	for i := range n {
		acc := w.account(fmt.Sprintf("Customer %02d", i))
		w.use(request{customer: acc, rig: fjord, at: time.Date(2026, 3, 1+i%28, 10, 0, 0, 0, time.UTC), in: 100_000, out: 10_000})
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	page, err := w.svc.Invoices(w.ctx(), InvoiceFilter{Period: march, Status: StatusDraft})
	if err != nil || len(page.Invoices) != n {
		t.Fatalf("%d drafts, %v", len(page.Invoices), err)
	}
	var ids []string
	for _, inv := range page.Invoices {
		if inv.Number != "" || inv.DisplayNumber != DraftNumber {
			t.Errorf("a draft shows %q / %q", inv.Number, inv.DisplayNumber)
		}
		ids = append(ids, inv.ID)
	}
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)

	var wg sync.WaitGroup
	results := make([][]Approved, 2)
	for i, by := range []string{w.finance, w.finance2} {
		order := [][]string{ids, reversed}[i]
		wg.Go(func() {
			res, err := w.svc.ApproveInvoices(w.ctx(), by, order)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	issued := map[string]string{} // invoice id: number
	for _, res := range results {
		for _, r := range res {
			switch {
			case r.Err == nil:
				if prev, twice := issued[r.ID]; twice {
					t.Errorf("%s issued twice: %s and %s", r.ID, prev, r.Number)
				}
				issued[r.ID] = r.Number
			case services.ErrorCode(r.Err) != services.CodeConflict:
				t.Errorf("approve %s: %v", r.ID, r.Err)
			}
		}
	}
	if len(issued) != n {
		t.Fatalf("%d of %d drafts issued", len(issued), n)
	}
	var numbers []string
	for _, number := range issued {
		numbers = append(numbers, number)
	}
	slices.Sort(numbers)
	for i, number := range numbers {
		if want := fmt.Sprintf("GPM-2026-%06d", i+1); number != want {
			t.Fatalf("numbers %v: the %d-th is %s, want %s", numbers, i+1, number, want)
		}
	}
	var stored, approvals int
	w.scan(`SELECT count(DISTINCT number) FROM invoices WHERE period = $1 AND status = 'issued'`, []any{march.Start()}, &stored)
	w.scan(`SELECT count(*) FROM audit_log WHERE action = 'approve'`, nil, &approvals)
	if stored != n || approvals != n {
		t.Errorf("%d numbered invoices and %d approvals in the audit log, want %d each", stored, approvals, n)
	}
}

// The first number continues a previous system's sequence in the series' first year; each
// later year starts again at 1. Statements are numbered apart.
func TestTheFirstNumberAndTheYear(t *testing.T) {
	invoices, _ := ParseNumberFormat("INV/{year}/{seq:04}", 418)
	w := newWorld(t, func(c *Config) { c.InvoiceNumbers = invoices })
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	acme, globex := w.account("Acme Labs"), w.account("Globex")
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC), in: 100, out: 100})
	w.use(request{customer: globex, rig: fjord, at: time.Date(2026, 3, 3, 11, 0, 0, 0, time.UTC), in: 100, out: 100})
	w.at(time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC))
	w.close(march)
	a := w.approve(w.invoiceOf(acme, march).ID)[0]
	w.at(time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC))
	b := w.approve(w.invoiceOf(globex, march).ID)[0]
	res, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{w.statementOf(fjordAccount, march).ID})
	if err != nil || res[0].Err != nil {
		t.Fatalf("approve the statement: %v %+v", err, res)
	}
	if a.Number != "INV/2026/0418" || b.Number != "INV/2027/0001" || res[0].Number != "GPS-2027-000001" {
		t.Errorf("numbers %s, %s and statement %s; want INV/2026/0418, INV/2027/0001, GPS-2027-000001", a.Number, b.Number, res[0].Number)
	}
	entries, _ := w.audit.List(w.ctx(), audit.Filter{Action: audit.ActionApprove})
	if len(entries.Entries) != 3 {
		t.Errorf("%d approvals recorded, want 3", len(entries.Entries))
	}
}
