package invoicing

import (
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// The review queues select by a part of the account's or provider's name, in any case and
// taking its characters literally, and statements by their total (their net).
func TestTheQueuesSelectByNameAndTotal(t *testing.T) {
	w := newWorld(t)
	acme, odd := w.account("Acme Labs"), w.account("100%_Odd Name")
	fjordAccount, northwindAccount := w.account("Fjord GPU Co-op"), w.account("Northwind Compute")
	fjord, northwind := w.rig(fjordAccount), w.rig(northwindAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 2)     // $3.60, Fjord earns $1.44
	w.uses(odd, northwind, time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), 20) // $36.00, Northwind earns $14.40
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)

	for _, c := range []struct {
		name string
		f    InvoiceFilter
		want []string
	}{
		{"a part of the name, in another case", InvoiceFilter{AccountName: "acme"}, []string{acme}},
		{"a percent sign taken literally", InvoiceFilter{AccountName: "100%_"}, []string{odd}},
		{"an underscore taken literally", InvoiceFilter{AccountName: "Acme_Labs"}, nil},
		{"with the least total", InvoiceFilter{AccountName: "a", MinTotal: ptr(Cents(10_00))}, []string{odd}},
	} {
		page, err := w.svc.Invoices(w.ctx(), c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, s := range page.Invoices {
			got = append(got, s.AccountID)
		}
		if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		f    StatementFilter
		want []string
	}{
		{"by name", StatementFilter{ProviderName: "NORTH"}, []string{northwindAccount}},
		{"the least net", StatementFilter{MinTotal: ptr(Cents(10_00))}, []string{northwindAccount}},
		{"the most net", StatementFilter{MaxTotal: ptr(Cents(1_44))}, []string{fjordAccount}},
	} {
		page, err := w.svc.Statements(w.ctx(), c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, s := range page.Statements {
			got = append(got, s.ProviderAccountID)
		}
		if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := w.svc.Statements(w.ctx(), StatementFilter{MinTotal: ptr(Cents(5)), MaxTotal: ptr(Cents(4))}); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("a most below the least: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// The audit log names the documents it lists through InvoicesByID and StatementsByID: each
// document asked for once is there with its number, party and period; an id of no document, one
// that is not an id, and one asked twice change nothing.
func TestDocumentsAreReadByTheirIDs(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	w.uses(acme, w.rig(fjordAccount), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 2)
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)

	invoices, err := w.svc.Invoices(w.ctx(), InvoiceFilter{})
	if err != nil || len(invoices.Invoices) != 1 {
		t.Fatalf("invoices %v, %v", invoices, err)
	}
	statements, err := w.svc.Statements(w.ctx(), StatementFilter{})
	if err != nil || len(statements.Statements) != 1 {
		t.Fatalf("statements %v, %v", statements, err)
	}
	inv, st := invoices.Invoices[0], statements.Statements[0]
	const unknown = "00000000-0000-4000-8000-000000000000"
	gotInvoices, err := w.svc.InvoicesByID(w.ctx(), []string{inv.ID, unknown, "not-an-id", inv.ID, st.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotInvoices) != 1 || gotInvoices[inv.ID].AccountName != "Acme Labs" || gotInvoices[inv.ID].Period != inv.Period ||
		gotInvoices[inv.ID].DisplayNumber != inv.DisplayNumber {
		t.Errorf("invoices by id: %+v, want only %s of Acme Labs", gotInvoices, inv.ID)
	}
	gotStatements, err := w.svc.StatementsByID(w.ctx(), []string{st.ID, unknown, inv.ID, ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotStatements) != 1 || gotStatements[st.ID].ProviderName != "Fjord GPU Co-op" || gotStatements[st.ID].Net != st.Net {
		t.Errorf("statements by id: %+v, want only %s of Fjord GPU Co-op", gotStatements, st.ID)
	}
	if none, err := w.svc.InvoicesByID(w.ctx(), nil); err != nil || len(none) != 0 {
		t.Errorf("no ids: %v, %v", none, err)
	}
}

// The queues page by period first (pagePeriods) and read only the periods a page reaches into:
// every page size and offset gives the rows of the whole list, sorted, in their place, with
// More set while rows follow, across the periods' boundaries.
func TestTheQueuesPageAcrossPeriods(t *testing.T) {
	w := newWorld(t)
	names := []string{"Delta", "Alpha", "Echo", "Charlie", "Bravo"}
	fjordAccount := w.account("Fjord GPU Co-op")
	northwindAccount := w.account("Northwind Compute")
	fjord, northwind := w.rig(fjordAccount), w.rig(northwindAccount)
	var customers []string
	for _, n := range names {
		customers = append(customers, w.account(n))
	}
	for i, c := range customers {
		w.uses(c, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1+i)
		if i%2 == 0 {
			w.uses(c, northwind, time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC), 1+i)
		}
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	w.at(time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC))
	w.close(april)

	all, err := w.svc.Invoices(w.ctx(), InvoiceFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, v := range all.Invoices {
		want = append(want, v.Period.String()+" "+v.AccountName)
	}
	if len(want) != 8 || all.More || want[0] != "2026-04 Bravo" || want[3] != "2026-03 Alpha" || want[7] != "2026-03 Echo" {
		t.Fatalf("the whole queue: %v (more %v), want April's three then March's five, each by name", want, all.More)
	}
	for limit := 1; limit <= 9; limit++ {
		for offset := 0; offset <= 9; offset++ {
			page, err := w.svc.Invoices(w.ctx(), InvoiceFilter{Limit: limit, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range page.Invoices {
				got = append(got, v.Period.String()+" "+v.AccountName)
			}
			wantPage := want[min(offset, len(want)):min(offset+limit, len(want))]
			if !slices.Equal(got, wantPage) || page.More != (offset+limit < len(want)) {
				t.Errorf("limit %d offset %d: %v (more %v), want %v (more %v)", limit, offset, got, page.More, wantPage, offset+limit < len(want))
			}
		}
	}
	// The periods read: April alone holds the first two rows and the one after them; the page
	// of rows 3 to 4 reaches into March, and the page after April's rows lies in March alone.
	for _, c := range []struct {
		offset, limit, pageOffset int
		periods                   []time.Time
	}{
		{0, 2, 0, []time.Time{april.Start()}},
		{1, 3, 1, []time.Time{april.Start(), march.Start()}},
		{3, 1, 0, []time.Time{march.Start()}},
		{7, 5, 4, []time.Time{march.Start()}},
	} {
		narrowed, offset, ok, err := w.svc.pagePeriods(w.ctx(), "invoices i", "i", where{}, c.offset, c.limit)
		if err != nil || !ok {
			t.Fatalf("offset %d limit %d: %v, %v", c.offset, c.limit, ok, err)
		}
		got, _ := narrowed.args[len(narrowed.args)-1].([]time.Time)
		if !slices.EqualFunc(got, c.periods, time.Time.Equal) || offset != c.pageOffset {
			t.Errorf("offset %d limit %d: reads %v from offset %d, want %v from %d", c.offset, c.limit, got, offset, c.periods, c.pageOffset)
		}
	}
	if _, _, ok, err := w.svc.pagePeriods(w.ctx(), "invoices i", "i", where{}, 8, 1); ok || err != nil {
		t.Errorf("a page past the end reads periods: %v, %v", ok, err)
	}
	// Northwind earned in April, Fjord in March only.
	for _, c := range []struct {
		offset int
		want   string
		more   bool
	}{{0, "2026-04 Northwind Compute", true}, {1, "2026-03 Fjord GPU Co-op", false}} {
		page, err := w.svc.Statements(w.ctx(), StatementFilter{Limit: 1, Offset: c.offset})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Statements) != 1 || page.Statements[0].Period.String()+" "+page.Statements[0].ProviderName != c.want || page.More != c.more {
			t.Errorf("the statements at offset %d: %+v, want %s (more %v)", c.offset, page, c.want, c.more)
		}
	}
	if none, err := w.svc.Statements(w.ctx(), StatementFilter{Offset: 10}); err != nil || len(none.Statements) != 0 || none.More || none.Statements == nil {
		t.Errorf("past the end: %+v, %v", none, err)
	}
}
