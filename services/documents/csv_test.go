package documents

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

func linesCSV(t *testing.T, d Document) [][]string {
	t.Helper()
	var b bytes.Buffer
	if err := LinesCSV(&b, d); err != nil {
		t.Fatalf("LinesCSV: %v", err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v", err)
	}
	return rows
}

// TestLinesCSVCarriesExactFigures writes the sample invoice's lines: one row per line, in
// order, credits included, with the tokens, prices and amounts exact and the exact amount
// before rounding beside the rounded one.
func TestLinesCSVCarriesExactFigures(t *testing.T) {
	rows := linesCSV(t, sampleInvoice(t))
	if !slices.Equal(rows[0], linesHeader) {
		t.Fatalf("header %q", rows[0])
	}
	want := [][]string{
		{"GPM-2026-000042", "1", "usage", "realtime · meta-llama/Meta-Llama-3-70B-Instruct", "", "1204331", "402118", "0.90", "0.90", "1.45", "1.445804100000", "USD", "0", ""},
		{"GPM-2026-000042", "2", "usage", "standard · meta-llama/Meta-Llama-3-8B-Instruct", "", "18342907", "5120433", "0.149", "0.149", "3.50", "3.496037660000", "USD", "0", ""},
		{"GPM-2026-000042", "3", "usage", "batch · mistralai/Mistral-7B-Instruct-v0.3", "", "72004125", "9811002", "0.05", "0.075", "4.34", "4.336031400000", "USD", "0", ""},
		{"GPM-2026-000042", "4", "late_usage", "standard · meta-llama/Meta-Llama-3-8B-Instruct", "2026-02", "48200", "12050", "0.15", "0.15", "0.01", "0.009037500000", "USD", "0", ""},
		{"GPM-2026-000042", "5", "adjustment", "Goodwill credit for the degraded service of 2026-03-12", "", "", "", "", "", "-5.00", "", "USD", "", ""},
		{"GPM-2026-000042", "6", "credits", "Credits bought on 2026-03-04", "", "", "", "", "", "50.00", "", "USD", "", ""},
	}
	if len(rows)-1 != len(want) {
		t.Fatalf("%d rows after the header, want %d", len(rows)-1, len(want))
	}
	for i, w := range want {
		if !slices.Equal(rows[i+1], w) {
			t.Errorf("row %d\n got %q\nwant %q", i+1, rows[i+1], w)
		}
	}
}

// TestLinesCSVDefusesFormulas gives lines descriptions that a spreadsheet would run: each
// gets a leading quote, while the figures, negative ones too, stay numbers.
func TestLinesCSVDefusesFormulas(t *testing.T) {
	d := sampleInvoice(t)
	d.Status, d.Number = StatusDraft, ""
	d.Lines[0].Description = `=HYPERLINK("http://evil.example","refund")`
	d.Lines[1].Description = "+1+cmd|' /C calc'!A0"
	d.Lines[2].Description = "@SUM(A1:A9)"
	d.Lines[4].Description = "-2+3"
	rows := linesCSV(t, d)
	for i, want := range map[int]string{
		1: `'=HYPERLINK("http://evil.example","refund")`, 2: "'+1+cmd|' /C calc'!A0", 3: "'@SUM(A1:A9)", 5: "'-2+3",
	} {
		if rows[i][3] != want {
			t.Errorf("row %d description %q, want %q", i, rows[i][3], want)
		}
	}
	if rows[5][9] != "-5.00" {
		t.Errorf("the adjustment's amount is written %q, want the number -5.00", rows[5][9])
	}
	if rows[1][0] != "DRAFT" {
		t.Errorf("a draft's lines carry the number %q, want DRAFT", rows[1][0])
	}
}

func TestLinesCSVRefusesADocumentThatDoesNotAddUp(t *testing.T) {
	d := sampleInvoice(t)
	d.Lines[0].Amount++
	var b bytes.Buffer
	err := LinesCSV(&b, d)
	if err == nil || !strings.Contains(err.Error(), "totals.subtotal") {
		t.Fatalf("err = %v, want the subtotal refused", err)
	}
	if b.Len() != 0 {
		t.Errorf("a refused document still wrote %q", b.String())
	}
}

// A usage line's cached input tokens, a part of its input tokens, and their price go in the
// last two columns and under the line on the sheet; more cached tokens than input is refused.
func TestCachedInputTokensAreShownApart(t *testing.T) {
	d := sampleInvoice(t)
	d.Lines[1].Tokens.CachedInput, d.Lines[1].Tokens.CachedInputPrice = 12_000_000, 37_250
	rows := linesCSV(t, d)
	if got := rows[2][len(rows[2])-2:]; !slices.Equal(got, []string{"12000000", "0.03725"}) {
		t.Errorf("cached columns %q, want 12000000 at 0.03725", got)
	}
	sheet, err := d.Sheet()
	if err != nil {
		t.Fatal(err)
	}
	if detail := sheet.Lines[1].Detail; detail != "Of the input, 12,000,000 tokens cached, at $0.03725 per million" {
		t.Errorf("detail %q", detail)
	}
	d.Lines[1].Tokens.CachedInput = d.Lines[1].Tokens.Input + 1
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "cached input tokens are a part of the input tokens") {
		t.Errorf("more cached than input tokens: %v", err)
	}
}
