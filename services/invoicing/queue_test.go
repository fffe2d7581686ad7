package invoicing

import (
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
