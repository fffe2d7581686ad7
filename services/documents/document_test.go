package documents

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestValidateRefusesWhatADocumentCannotShow breaks the sample invoice one rule at a time:
// each is refused on its field, and the sample itself passes.
func TestValidateRefusesWhatADocumentCannotShow(t *testing.T) {
	if err := sampleInvoice(t).Validate(); err != nil {
		t.Fatalf("the sample invoice is refused: %v", err)
	}
	jan, apr := Month(2026, time.January), Month(2026, time.April)
	for _, c := range []struct {
		name  string
		field string
		edit  func(d *Document)
	}{
		{"a draft that holds a number", "number", func(d *Document) { d.Status = StatusDraft }},
		{"an issued document without its number", "number", func(d *Document) { d.Number = " " }},
		{"an unknown status", "status", func(d *Document) { d.Status = "sent" }},
		{"an unknown kind", "kind", func(d *Document) { d.Kind = "receipt" }},
		{"no issue date", "issue_date", func(d *Document) { d.IssueDate = time.Time{} }},
		{"a period that ends before it starts", "period", func(d *Document) { d.Period.End = d.Period.Start.Add(-time.Hour) }},
		{"a currency the documents do not know", "currency", func(d *Document) { d.Currency = "JPY" }},
		{"a buyer without a legal name", "buyer.legal_name", func(d *Document) { d.Buyer.LegalName = "" }},
		{"a seller's name with a line break", "seller.legal_name", func(d *Document) { d.Seller.LegalName = "gpumarket\nLtd" }},
		{"a name the font cannot print", "buyer.legal_name", func(d *Document) { d.Buyer.LegalName = "北京数据有限公司" }},
		{"too many address lines", "buyer.address", func(d *Document) { d.Buyer.Address = make([]string, MaxAddressRows+1) }},
		{"a usage line without tokens", "lines[0]", func(d *Document) { d.Lines[0].Tokens = nil }},
		{"negative tokens", "lines[1]", func(d *Document) { d.Lines[1].Tokens.Input = -1 }},
		{"late usage naming no period", "lines[3]", func(d *Document) { d.Lines[3].ForPeriod = nil }},
		{"late usage of a later period", "lines[3]", func(d *Document) { d.Lines[3].ForPeriod = &apr }},
		{"a usage line naming another period", "lines[0]", func(d *Document) { d.Lines[0].ForPeriod = &jan }},
		{"an adjustment with tokens", "lines[4]", func(d *Document) { d.Lines[4].Tokens = &Tokens{Input: 1} }},
		{"a line without a description", "lines[2]", func(d *Document) { d.Lines[2].Description = "" }},
		{"an unknown line kind", "lines[2]", func(d *Document) { d.Lines[2].Kind = "tip" }},
		{"credits without the balance they move", "lines[5]", func(d *Document) { d.Totals.Balance = nil }},
		{"a subtotal the lines do not add up to", "totals.subtotal", func(d *Document) { d.Totals.Subtotal -= 1 }},
		{"credits counted in the subtotal", "totals.subtotal", func(d *Document) { d.Totals.Subtotal += d.Lines[5].Amount }},
		{"a negative amount due", "totals.amount_due", func(d *Document) { d.Totals.AmountDue = -1 }},
		{"an invoice with a negative total", "totals.total", func(d *Document) { d.Totals.Total = -1 }},
		{"lines whose sum overflows", "lines", func(d *Document) {
			d.Lines[0].Amount, d.Lines[1].Amount = math.MaxInt64, math.MaxInt64
		}},
		{"an empty note", "notes[1]", func(d *Document) { d.Notes[1] = "" }},
		{"a summary figure without a value", "summary[2].value", func(d *Document) { d.Summary[2].Value = "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := sampleInvoice(t)
			c.edit(&d)
			err := d.Validate()
			var e *services.Error
			if !errors.As(err, &e) || e.Code != services.CodeInvalid {
				t.Fatalf("err = %v, want an invalid error", err)
			}
			if _, ok := e.Fields[c.field]; !ok {
				t.Errorf("refused on %v, want on %s", e.Fields, c.field)
			}
		})
	}
}

// TestDocumentsOfEveryKindPass: a credit note and a provider statement with a clawback are
// shown; a negative total is allowed on them, unlike on an invoice.
func TestDocumentsOfEveryKindPass(t *testing.T) {
	cn := sampleInvoice(t)
	cn.Kind, cn.Number, cn.Totals.Balance = KindCreditNote, "GPM-2026-000042-CN01", nil
	cn.Lines = cn.Lines[:5]
	cn.Notes = []string{"Credits invoice GPM-2026-000042 in full: billing error."}
	st := sampleInvoice(t)
	st.Kind, st.Number, st.Totals.Balance, st.Summary = KindStatement, "GPM-2026-000043", nil, nil
	st.Lines = []Line{st.Lines[1], {Kind: LineAdjustment, Description: "Clawback: refund of 2026-02-20", Amount: -900}}
	st.Totals.Subtotal = st.Lines[0].Amount - 900
	st.Totals.Total, st.Totals.AmountDue = st.Totals.Subtotal, 0
	for _, d := range []Document{cn, st} {
		s, err := d.Sheet()
		if err != nil {
			t.Fatalf("%s: %v", d.Kind, err)
		}
		last := s.Totals[len(s.Totals)-1]
		want := map[Kind]string{KindCreditNote: "Amount due to the buyer", KindStatement: "Amount due to the provider"}[d.Kind]
		if last.Label != want || !last.Strong {
			t.Errorf("%s: last total %+v, want %q in bold", d.Kind, last, want)
		}
	}
	s, _ := st.Sheet()
	if s.Title != "Provider statement" || s.Seller.Label != "Provider (seller)" || s.Columns[3] != "Input ask\nper 1M" {
		t.Errorf("statement laid out as %q, seller %q, price column %q", s.Title, s.Seller.Label, s.Columns[3])
	}
	if s.Totals[0].Value != "-$5.50" {
		t.Errorf("statement subtotal %q, want -$5.50 ($3.50 earned, $9.00 clawed back)", s.Totals[0].Value)
	}
}

// TestSheetLaysOutTheSampleInvoice checks the text the PDF and the page print.
func TestSheetLaysOutTheSampleInvoice(t *testing.T) {
	s, err := sampleInvoice(t).Sheet()
	if err != nil {
		t.Fatal(err)
	}
	wantFacts := []Figure{{"Number", "GPM-2026-000042"}, {"Status", "Issued"}, {"Issue date", "2026-04-02"},
		{"Period", "March 2026"}, {"Due date", "2026-04-16"}, {"Currency", "USD"}}
	if !slices.Equal(s.Facts, wantFacts) {
		t.Errorf("facts %v, want %v", s.Facts, wantFacts)
	}
	if s.Marker != "" || s.Number != "GPM-2026-000042" {
		t.Errorf("an issued invoice: marker %q, number %q", s.Marker, s.Number)
	}
	wantBuyer := []string{"ul. Piotrkowska 104", "90-006 Łódź", "Poland", "VAT ID PL7251234567", "PO number PO-2026-117"}
	if s.Buyer.Name != "Łódź Analytics sp. z o.o." || !slices.Equal(s.Buyer.Lines, wantBuyer) {
		t.Errorf("buyer %q %q", s.Buyer.Name, s.Buyer.Lines)
	}
	if len(s.Lines) != 5 {
		t.Fatalf("%d lines in the table, want 5: the credits go with the balance", len(s.Lines))
	}
	if l := s.Lines[0]; l != (SheetLine{Description: "realtime · meta-llama/Meta-Llama-3-70B-Instruct",
		InputTokens: "1,204,331", OutputTokens: "402,118", InputPrice: "$0.90", OutputPrice: "$0.90", Amount: "$1.45"}) {
		t.Errorf("first line %+v", l)
	}
	if l := s.Lines[3]; l.Detail != "Late usage of February 2026" {
		t.Errorf("late usage detail %q", l.Detail)
	}
	if l := s.Lines[4]; l.Amount != "-$5.00" || l.InputTokens != "" || l.InputPrice != "" {
		t.Errorf("adjustment %+v", l)
	}
	wantTotals := []TotalRow{
		{"Subtotal", "$4.30", false}, {"Total", "$4.30", true}, {"Opening balance", "$12.50", false},
		{"Credits bought on 2026-03-04", "$50.00", false}, {"Closing balance", "$58.20", false}, {"Amount due", "$0.00", true},
	}
	if !slices.Equal(s.Totals, wantTotals) {
		t.Errorf("totals %v, want %v", s.Totals, wantTotals)
	}
	if s.Footer != "Invoice GPM-2026-000042 · gpumarket Ltd" {
		t.Errorf("footer %q", s.Footer)
	}

	d := sampleInvoice(t)
	d.Status, d.Number, d.DueDate = StatusDraft, "", time.Time{}
	s, _ = d.Sheet()
	if s.Number != "DRAFT" || s.Marker != "DRAFT" || s.Facts[2].Label != "Drawn up" || len(s.Facts) != 5 {
		t.Errorf("a draft without a due date: number %q, marker %q, facts %v", s.Number, s.Marker, s.Facts)
	}
}

func TestFiguresAreWrittenExactly(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{amountText("USD", 0), "$0.00"},
		{amountText("USD", 5), "$0.05"},
		{amountText("USD", -500), "-$5.00"},
		{amountText("EUR", 123456789), "€1,234,567.89"},
		{amountText("GBP", 100000), "£1,000.00"},
		{amountText("USD", math.MinInt64), "-$92,233,720,368,547,758.08"},
		{Cents(-1).Decimal(), "-0.01"},
		{Cents(123456).Decimal(), "1234.56"},
		{priceText("USD", money.MicroUSD(149000)), "$0.149"},
		{priceText("EUR", money.MicroUSD(125)), "€0.000125"},
		{priceText("USD", money.MicroUSD(2_000_000_000)), "$2,000.00"},
		{countText(0), "0"},
		{countText(999), "999"},
		{countText(1000), "1,000"},
		{countText(10_000_000_000), "10,000,000,000"},
		{Month(2026, time.December).String(), "December 2026"},
		{Period{Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC)}.String(), "2026-03-01 – 2026-03-15"},
		{periodKey(Month(2026, time.February)), "2026-02"},
		{periodKey(Period{Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC)}), "2026-03-01/2026-03-15"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseMonth(t *testing.T) {
	p, err := ParseMonth("2026-02")
	if err != nil || !p.Start.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) || !p.End.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseMonth(2026-02) = %v, %v", p, err)
	}
	for _, bad := range []string{"", "2026-13", "2026-2-1", "March"} {
		if _, err := ParseMonth(bad); services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("ParseMonth(%q): err = %v, want invalid", bad, err)
		}
	}
}

func TestPrintableNamesWhatTheFontLacks(t *testing.T) {
	for _, ok := range []string{"Łódź Analytics sp. z o.o.", "€ CO₂e", "Ελληνικά", "Москва", "Müller & Söhne GmbH"} {
		if err := Printable(ok); err != nil {
			t.Errorf("Printable(%q) = %v, want nil", ok, err)
		}
	}
	err := Printable("東京 株式会社")
	if err == nil || err.Error() != `the document's font cannot print '東', '京', '株', '式', '会'` {
		t.Errorf("Printable of Japanese: %v", err)
	}
}

// TestTokensWithoutRecordedPricesPrintNone: usage metered before its prices were recorded
// prints a dash for each price, which the font can print, and leaves the CSV's price cells
// empty; such tokens with a price are refused.
func TestTokensWithoutRecordedPricesPrintNone(t *testing.T) {
	d := sampleInvoice(t)
	d.Lines[0].Tokens.InputPrice, d.Lines[0].Tokens.OutputPrice, d.Lines[0].Tokens.Unpriced = 0, 0, true
	s, err := d.Sheet()
	if err != nil {
		t.Fatal(err)
	}
	if l := s.Lines[0]; l.InputPrice != "—" || l.OutputPrice != "—" || l.InputTokens != "1,204,331" {
		t.Errorf("line laid out as %+v", l)
	}
	if err := Printable(s.Lines[0].InputPrice); err != nil {
		t.Errorf("the dash: %v", err)
	}
	rows := linesCSV(t, d)
	if rows[1][7] != "" || rows[1][8] != "" || rows[1][5] != "1204331" {
		t.Errorf("CSV row %q, want empty prices beside the tokens", rows[1])
	}
	d.Lines[0].Tokens.InputPrice = 1
	var e *services.Error
	if err := d.Validate(); !errors.As(err, &e) || e.Fields["lines[0]"] == "" {
		t.Errorf("unpriced tokens with a price: %v", err)
	}
}
