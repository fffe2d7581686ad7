package invoicing

import (
	"errors"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Lines are rounded to the cent half up, away from zero, exactly: no amount passes through a
// float.
func TestCentsOf(t *testing.T) {
	for _, c := range []struct {
		pico string
		want Cents
	}{
		{"0", 0},
		{"4999999999", 0},       // $0.004999999999
		{"5000000000", 1},       // $0.005
		{"-5000000000", -1},     // -$0.005
		{"-4999999999", 0},      // -$0.004999999999
		{"14999999999", 1},      // $0.014999999999
		{"1234999999999", 1_23}, // $1.234999999999
		{"1235000000000", 1_24}, // $1.235
		{"92233720368547758070000000000", 9_223_372_036_854_775_807}, // the most cents there are
	} {
		var p money.BigPico
		if err := p.Scan(c.pico); err != nil {
			t.Fatal(err)
		}
		got, err := CentsOf(p)
		if err != nil || got != c.want {
			t.Errorf("CentsOf(%s) = %d, %v; want %d", p, got, err, c.want)
		}
	}
	var huge money.BigPico
	_ = huge.Scan("92233720368547758080000000000")
	if _, err := CentsOf(huge); !errors.Is(err, money.ErrOverflow) {
		t.Errorf("past the range of cents: %v, want ErrOverflow", err)
	}
	if got := Cents(-5).String(); got != "-$0.05" {
		t.Errorf("-5 cents is %q", got)
	}
	if got := Cents(123456).String(); got != "$1,234.56" {
		t.Errorf("123456 cents is %q", got)
	}
	if got := Cents(123456).BigPico().String(); got != "$1234.56" {
		t.Errorf("123456 cents in picodollars: %s", got)
	}
}

func TestInvoiceActions(t *testing.T) {
	for _, c := range []struct {
		status Status
		due    Cents
		want   []Action
	}{
		{StatusDraft, 0, []Action{ActionApprove}},
		{StatusIssued, 0, []Action{ActionVoid}},
		{StatusIssued, 1, []Action{ActionMarkPaid, ActionVoid}},
		{StatusPaid, 5, []Action{ActionVoid}},
		{StatusVoid, 5, []Action{}},
	} {
		if got := invoiceActions(c.status, c.due); !equalActions(got, c.want) {
			t.Errorf("%s with %s due: %v, want %v", c.status, c.due, got, c.want)
		}
	}
	for _, c := range []struct {
		status   Status
		payout   Cents
		later    bool
		underway bool
		want     []Action
	}{
		{StatusDraft, 0, false, false, []Action{ActionApprove}},
		{StatusIssued, 0, false, false, []Action{ActionVoid}},
		{StatusIssued, 10_00, false, false, []Action{ActionMarkPaid, ActionVoid}},
		{StatusIssued, 10_00, true, false, []Action{ActionMarkPaid}},
		{StatusIssued, 0, true, false, []Action{}},
		{StatusIssued, 10_00, false, true, []Action{}},
		{StatusPaid, 10_00, false, false, []Action{}},
	} {
		if got := statementActions(c.status, c.payout, c.later, c.underway); !equalActions(got, c.want) {
			t.Errorf("statement %s paying %s (later issued %v, payout under way %v): %v, want %v", c.status, c.payout, c.later,
				c.underway, got, c.want)
		}
	}
}

func TestBillingDetailsValidation(t *testing.T) {
	ok := BillingDetailsInput{LegalName: "Acme Labs Ltd", Address: "2 Quay Street\r\n\r\nGalway  ", Country: "ie",
		VATID: "ie 9876543-wa", PONumber: " PO 7 "}
	n := ok.Normalize()
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if n.Address != "2 Quay Street\nGalway" || n.Country != "IE" || n.VATID != "IE9876543WA" || n.PONumber != "PO 7" {
		t.Errorf("normalized: %+v", n)
	}
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		return string(b)
	}
	for _, c := range []struct {
		name  string
		edit  func(*BillingDetailsInput)
		field string
	}{
		{"no legal name", func(in *BillingDetailsInput) { in.LegalName = " " }, "legal_name"},
		{"a legal name too long", func(in *BillingDetailsInput) { in.LegalName = long(201) }, "legal_name"},
		{"a legal name on two lines", func(in *BillingDetailsInput) { in.LegalName = "Acme\nLabs" }, "legal_name"},
		{"no address", func(in *BillingDetailsInput) { in.Address = "\n \n" }, "address"},
		{"an address too long", func(in *BillingDetailsInput) { in.Address = long(501) }, "address"},
		{"no country", func(in *BillingDetailsInput) { in.Country = "" }, "country"},
		{"a country that is none", func(in *BillingDetailsInput) { in.Country = "XX" }, "country"},
		{"an Irish VAT ID of Germany", func(in *BillingDetailsInput) { in.VATID = "DE123456789" }, "vat_id"},
		{"a Greek VAT ID without EL", func(in *BillingDetailsInput) { in.Country, in.VATID = "GR", "GR123456789" }, "vat_id"},
		{"a UK VAT ID of 8 digits", func(in *BillingDetailsInput) { in.Country, in.VATID = "GB", "GB12345678" }, "vat_id"},
		{"a VAT ID with symbols", func(in *BillingDetailsInput) { in.VATID = "IE<script>" }, "vat_id"},
		{"a PO number too long", func(in *BillingDetailsInput) { in.PONumber = long(65) }, "po_number"},
	} {
		in := ok
		c.edit(&in)
		err := in.Normalize().Validate()
		var e *services.Error
		if !errors.As(err, &e) || e.Code != services.CodeInvalid || e.Fields[c.field] == "" {
			t.Errorf("%s: %v, want a problem with %s", c.name, err, c.field)
		}
	}
	for _, valid := range []BillingDetailsInput{
		{LegalName: "Ελληνική ΑΕ", Address: "Odos 1\nAthens", Country: "GR", VATID: "EL123456789"},
		{LegalName: "Widgets Ltd", Address: "1 High St\nLondon", Country: "GB", VATID: "GB123456789"},
		{LegalName: "Widgets Inc", Address: "1 Main St\nAustin TX", Country: "US", VATID: "12-3456789"},
		{LegalName: "Łódź Compute sp. z o.o.", Address: "ul. Piotrkowska 1\nŁódź", Country: "PL"},
	} {
		if err := valid.Normalize().Validate(); err != nil {
			t.Errorf("%+v: %v", valid, err)
		}
	}
}

func TestParsePeriod(t *testing.T) {
	p, err := ParsePeriod("2026-03")
	if err != nil || p != march || p.String() != "2026-03" || p.Label() != "March 2026" || p.Next() != april || april.Prev() != march {
		t.Fatalf("2026-03: %v, %v", p, err)
	}
	for _, bad := range []string{"", "2026-3", "2026-13", "March", "1999-12", "2026-03-01"} {
		if _, err := ParsePeriod(bad); services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("%q: %v, want invalid", bad, err)
		}
	}
}
