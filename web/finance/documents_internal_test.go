package finance

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
)

// pageInvoice is an invoice of a customer in Łódź with every kind of line and a summary.
func pageInvoice() documents.Document {
	feb := documents.Month(2026, time.February)
	exact := money.BigPicoOf(3_495_000_000_001)
	return documents.Document{
		Kind: documents.KindInvoice, Number: "GPM-2026-000042", Status: documents.StatusIssued,
		IssueDate: time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC),
		Period:    documents.Month(2026, time.March),
		DueDate:   time.Date(2026, 4, 16, 0, 0, 0, 0, time.UTC),
		Currency:  "EUR",
		Seller:    documents.Party{LegalName: "gpumarket Ltd", Address: []string{"1 Compute Way", "London EC1A 1AA"}, Country: "United Kingdom", VATID: "GB123456789"},
		Buyer: documents.Party{LegalName: "Łódź Analytics sp. z o.o.", Address: []string{"ul. Piotrkowska 104", "90-006 Łódź"},
			Country: "Poland", VATID: "PL7251234567", PONumber: "PO-2026-117"},
		Lines: []documents.Line{
			{Kind: documents.LineUsage, Description: "standard · meta-llama/Meta-Llama-3-8B-Instruct",
				Tokens: &documents.Tokens{Input: 18_342_907, Output: 5_120_433, InputPrice: 149_000, OutputPrice: 149_000},
				Amount: 350, Exact: &exact},
			{Kind: documents.LineLateUsage, Description: "batch · mistralai/Mistral-7B-Instruct-v0.3", ForPeriod: &feb,
				Tokens: &documents.Tokens{Input: 1_204_331, Output: 0, InputPrice: 50_000, OutputPrice: 75_000}, Amount: 6},
			{Kind: documents.LineAdjustment, Description: "Goodwill credit", Amount: -100},
			{Kind: documents.LineCredits, Description: "Credits bought on 2026-03-04", Amount: 12_000_000},
		},
		Totals: documents.Totals{Subtotal: 256, Total: 256, AmountDue: 0,
			Balance: &documents.Balance{Opening: 1250, Closing: 12_000_994}},
		Notes:   []string{"Each line is rounded once to the cent, half a cent up."},
		Summary: []documents.Figure{{Label: "Carbon", Value: "1.84 kg CO₂e (estimate)"}},
	}
}

func renderDocumentPage(t *testing.T, d documents.Document, links documentLinks) (*goquery.Document, documents.Sheet) {
	t.Helper()
	s, err := d.Sheet()
	if err != nil {
		t.Fatalf("Sheet: %v", err)
	}
	page, err := documentPage(s, links)
	if err != nil {
		t.Fatalf("documentPage: %v", err)
	}
	var b bytes.Buffer
	if err := templates.Document(page).Render(context.Background(), &b); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	return doc, s
}

func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

// TestDocumentPageShowsTheFiguresOfThePDF renders the page of an invoice and reads every
// figure back: each is the one the PDF prints, from the same sheet, cell for cell.
func TestDocumentPageShowsTheFiguresOfThePDF(t *testing.T) {
	page, s := renderDocumentPage(t, pageInvoice(), documentLinks{Back: "/invoices", PDF: "/invoices/1.pdf", CSV: "/invoices/1.csv"})

	if got := text(page.Find(`[data-testid=document-title]`)); got != "Invoice" {
		t.Errorf("title %q, want Invoice", got)
	}
	if got := text(page.Find(`[data-testid=document-number]`)); got != "GPM-2026-000042" {
		t.Errorf("number %q", got)
	}
	rows := page.Find(`[data-testid=document-line]`)
	if rows.Length() != 3 {
		t.Fatalf("%d lines in the table, want 3 (the credits bought go with the balance)", rows.Length())
	}
	want := [][]string{
		{"standard · meta-llama/Meta-Llama-3-8B-Instruct", "18,342,907", "5,120,433", "€0.149", "€0.149", "€3.50"},
		{"batch · mistralai/Mistral-7B-Instruct-v0.3", "1,204,331", "0", "€0.05", "€0.075", "€0.06"},
		{"Goodwill credit", "", "", "", "", "-€1.00"},
	}
	rows.Each(func(i int, row *goquery.Selection) {
		l := s.Lines[i]
		got := []string{
			text(row.Find(`[data-testid=line-description]`)), text(row.Find(`[data-testid=line-input-tokens]`)),
			text(row.Find(`[data-testid=line-output-tokens]`)), text(row.Find(`[data-testid=line-input-price]`)),
			text(row.Find(`[data-testid=line-output-price]`)), text(row.Find(`[data-testid=line-amount]`)),
		}
		sheet := []string{l.Description, l.InputTokens, l.OutputTokens, l.InputPrice, l.OutputPrice, l.Amount}
		if !slices.Equal(got, sheet) || !slices.Equal(got, want[i]) {
			t.Errorf("line %d shows %q; the PDF's sheet has %q, want %q", i, got, sheet, want[i])
		}
	})
	if got := text(rows.Eq(1).Find(`[data-testid=line-detail]`)); got != "Late usage of February 2026" {
		t.Errorf("late usage detail %q", got)
	}

	var totals [][2]string
	page.Find(`[data-testid=document-total]`).Each(func(_ int, r *goquery.Selection) {
		totals = append(totals, [2]string{text(r.Find("th")), text(r.Find("td"))})
	})
	wantTotals := [][2]string{{"Subtotal", "€2.56"}, {"Total", "€2.56"}, {"Opening balance", "€12.50"},
		{"Credits bought on 2026-03-04", "€120,000.00"}, {"Closing balance", "€120,009.94"}, {"Amount due", "€0.00"}}
	if !slices.Equal(totals, wantTotals) {
		t.Errorf("totals %q, want %q", totals, wantTotals)
	}
	for i, r := range s.Totals {
		if i < len(totals) && (totals[i][0] != r.Label || totals[i][1] != r.Value) {
			t.Errorf("total %d on the page %q, in the PDF's sheet %q %q", i, totals[i], r.Label, r.Value)
		}
	}

	var facts []string
	page.Find(`[data-testid=document-facts] div`).Each(func(_ int, f *goquery.Selection) {
		facts = append(facts, text(f.Find("dt"))+": "+text(f.Find("dd")))
	})
	wantFacts := []string{"Number: GPM-2026-000042", "Status: Issued", "Issue date: 2026-04-02", "Period: March 2026",
		"Due date: 2026-04-16", "Currency: EUR"}
	if !slices.Equal(facts, wantFacts) {
		t.Errorf("facts %q, want %q", facts, wantFacts)
	}
	buyer := text(page.Find(`[data-testid=document-buyer]`))
	for _, w := range []string{"Łódź Analytics sp. z o.o.", "90-006 Łódź", "VAT ID PL7251234567", "PO number PO-2026-117"} {
		if !strings.Contains(buyer, w) {
			t.Errorf("buyer block %q lacks %q", buyer, w)
		}
	}
	if got := text(page.Find(`[data-testid=document-seller]`)); !strings.Contains(got, "VAT ID GB123456789") {
		t.Errorf("seller block %q lacks the seller's VAT ID", got)
	}
	if got := text(page.Find(`[data-testid=document-summary] dd`)); got != "1.84 kg CO₂e (estimate)" {
		t.Errorf("summary %q", got)
	}
	if got := text(page.Find(`[data-testid=document-notes] p`)); got != s.Notes[0] {
		t.Errorf("notes %q", got)
	}
	if page.Find(`[data-testid=document-marker]`).Length() != 0 {
		t.Error("an issued invoice is stamped")
	}
	for id, href := range map[string]string{"document-back": "/invoices", "document-pdf": "/invoices/1.pdf", "document-csv": "/invoices/1.csv"} {
		if got, _ := page.Find(`[data-testid=` + id + `]`).Attr("href"); got != href {
			t.Errorf("%s links to %q, want %q", id, got, href)
		}
	}
}

// TestDocumentPageOfADraft stamps the draft, shows DRAFT for its number, and leaves out the
// summary and the links it was not given.
func TestDocumentPageOfADraft(t *testing.T) {
	d := pageInvoice()
	d.Status, d.Number, d.Summary = documents.StatusDraft, "", nil
	page, _ := renderDocumentPage(t, d, documentLinks{PDF: "/invoices/1.pdf"})
	if got := text(page.Find(`[data-testid=document-marker]`)); got != "DRAFT" {
		t.Errorf("marker %q, want DRAFT", got)
	}
	if got := text(page.Find(`[data-testid=document-number]`)); got != "DRAFT" {
		t.Errorf("number %q, want DRAFT", got)
	}
	if page.Find(`[data-testid=document-summary]`).Length() != 0 {
		t.Error("a document without a summary shows a summary block")
	}
	if page.Find(`[data-testid=document-back]`).Length() != 0 || page.Find(`[data-testid=document-csv]`).Length() != 0 {
		t.Error("links that were not given are shown")
	}
}

// TestDocumentPageUsesNoExternalAsset checks that the page loads only the platform's own
// stylesheet and icon, and that the stylesheet, served from the binary, is there, lays the
// page out for A4 print and pulls in nothing from elsewhere.
func TestDocumentPageUsesNoExternalAsset(t *testing.T) {
	page, _ := renderDocumentPage(t, pageInvoice(), documentLinks{})
	page.Find("link, script, img").Each(func(_ int, s *goquery.Selection) {
		for _, attr := range []string{"href", "src"} {
			if v, ok := s.Attr(attr); ok && !strings.HasPrefix(v, "/static/") {
				t.Errorf("%s loads %q from outside the platform's static files", goquery.NodeName(s), v)
			}
		}
	})
	if href, _ := page.Find(`link[rel=stylesheet]`).Attr("href"); href != "/static/document.css" {
		t.Fatalf("stylesheet %q, want /static/document.css", href)
	}
	// Package web embeds the whole of web/static and serves it at /static/.
	css, err := os.ReadFile("../static/document.css")
	if err != nil {
		t.Fatalf("the stylesheet is not among the static files: %v", err)
	}
	for _, w := range []string{"@media print", "size: A4"} {
		if !bytes.Contains(css, []byte(w)) {
			t.Errorf("document.css lacks %q", w)
		}
	}
	for _, bad := range []string{"url(", "@import", "http:", "https:"} {
		if bytes.Contains(css, []byte(bad)) {
			t.Errorf("document.css refers to %q", bad)
		}
	}
}

// TestDocumentPageDrawsTheSummaryCharts: a document's chart is on its page as an inline SVG
// and as the table of the numbers the PDF prints beside its picture.
func TestDocumentPageDrawsTheSummaryCharts(t *testing.T) {
	d := pageInvoice()
	d.Charts = []documents.BarChart{{
		Title: "Carbon per tier", Unit: "gCO2e", Labels: []string{"standard", "batch <b>"},
		Series: []documents.BarSeries{
			{Name: "Your tokens", Values: []float64{1220.75, 0.00184}},
			{Name: "On enterprise GPUs", Values: []float64{393.4, 0.0006}},
		},
	}}
	page, s := renderDocumentPage(t, d, documentLinks{})
	fig := page.Find(`[data-testid="chart-summary-1"]`)
	if fig.Length() != 1 {
		t.Fatal("the page has no chart")
	}
	if fig.Find("svg path").Length() < 2 || fig.Find("svg b").Length() != 0 {
		t.Errorf("the chart's picture is not an SVG of paths (or carries markup from a label)")
	}
	var got [][]string
	fig.Find(`[data-testid="chart-row"]`).Each(func(_ int, r *goquery.Selection) {
		var row []string
		r.Children().Each(func(_ int, c *goquery.Selection) { row = append(row, text(c)) })
		got = append(got, row)
	})
	want := [][]string{{"standard", "1220.75", "393.4"}, {"batch <b>", "0.00184", "0.0006"}}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("chart table = %q, want %q", got, want)
	}
	var head []string
	fig.Find("thead th").Each(func(_ int, c *goquery.Selection) { head = append(head, text(c)) })
	if !slices.Equal(head, s.Charts[0].Columns) || head[2] != "On enterprise GPUs (gCO2e)" {
		t.Errorf("chart head = %q, want the sheet's %q", head, s.Charts[0].Columns)
	}
}
