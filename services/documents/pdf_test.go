package documents

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from what the code renders now")

func renderPDF(t testing.TB, d Document) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := PDF(&b, d); err != nil {
		t.Fatalf("PDF: %v", err)
	}
	return b.Bytes()
}

// TestPDFMatchesGolden renders the sample invoice and compares it byte for byte with the
// PDF kept in testdata. After a deliberate change of the layout, look at the new PDF and
// run `go test ./services/documents -run TestPDFMatchesGolden -update`.
func TestPDFMatchesGolden(t *testing.T) {
	for _, c := range []struct {
		file string
		doc  Document
	}{
		{"invoice.golden.pdf", sampleInvoice(t)},
		{"invoice-60-lines.golden.pdf", manyLines(t, 60)},
	} {
		got := renderPDF(t, c.doc)
		path := filepath.Join("testdata", c.file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write it)", err)
		}
		if !bytes.Equal(got, want) {
			out := filepath.Join(t.TempDir(), c.file)
			_ = os.WriteFile(out, got, 0o644)
			t.Errorf("%s: the render (%d bytes, kept at %s) differs from the golden file (%d bytes); "+
				"if the change is meant, look at it and rerun with -update", c.file, len(got), out, len(want))
		}
	}
}

// TestPDFRendersByteIdentical renders each kind of document several times: every render is
// the same bytes, and the PDF's dates are the document's own, not the clock's.
func TestPDFRendersByteIdentical(t *testing.T) {
	draft := sampleInvoice(t)
	draft.Status, draft.Number = StatusDraft, ""
	for name, d := range map[string]Document{"issued": sampleInvoice(t), "draft": draft, "60 lines": manyLines(t, 60)} {
		first := renderPDF(t, d)
		for range 4 {
			if again := renderPDF(t, d); !bytes.Equal(again, first) {
				t.Fatalf("%s: two renders of the same document differ (%d and %d bytes)", name, len(first), len(again))
			}
		}
		info := openPDF(t, first).Trailer().Key("Info")
		for _, key := range []string{"CreationDate", "ModDate"} {
			if got := info.Key(key).Text(); got != "D:20260402000000" {
				t.Errorf("%s: %s = %q, want the issue date D:20260402000000", name, key, got)
			}
		}
	}
	later := sampleInvoice(t)
	later.IssueDate = later.IssueDate.AddDate(0, 0, 1)
	if bytes.Equal(renderPDF(t, later), renderPDF(t, sampleInvoice(t))) {
		t.Error("a document issued a day later renders the same bytes: the PDF does not carry its date")
	}
}

// TestPDFPrintsEveryFigureOfTheSheet reads the PDF's text back: every figure of the sheet
// is printed as one piece, right where a reader looks for it, and the text the platform
// must render in full, "€", "CO₂e" and "Łódź", comes back as written.
func TestPDFPrintsEveryFigureOfTheSheet(t *testing.T) {
	usd := sampleInvoice(t)
	eur := sampleInvoice(t)
	eur.Currency = "EUR"
	for _, d := range []Document{usd, eur} {
		s, err := d.Sheet()
		if err != nil {
			t.Fatal(err)
		}
		texts := runTexts(pdfRuns(t, renderPDF(t, d)))
		want := []string{s.Title, s.Number, s.Seller.Name, s.Buyer.Name}
		want = append(want, s.Seller.Lines...)
		want = append(want, s.Buyer.Lines...)
		for _, f := range append(s.Facts, s.Summary...) {
			want = append(want, f.Label, f.Value)
		}
		for _, l := range s.Lines {
			for _, v := range []string{l.InputTokens, l.OutputTokens, l.InputPrice, l.OutputPrice, l.Amount} {
				if v != "" {
					want = append(want, v)
				}
			}
		}
		for _, r := range s.Totals {
			want = append(want, r.Label, r.Value)
		}
		want = append(want, s.Notes...)
		for _, w := range want {
			if !texts[w] {
				t.Errorf("%s: the PDF does not print %q", d.Currency, w)
			}
		}
		wantIn := map[string]string{"USD": "$4.30", "EUR": "€4.30"}[d.Currency]
		if !texts[wantIn] || !texts["Łódź Analytics sp. z o.o."] || !texts["90-006 Łódź"] || !texts["1.84 kg CO₂e (estimate)"] {
			t.Errorf("%s: the PDF lost text it must print whole: %q %q %q", d.Currency, wantIn, "Łódź", "CO₂e")
		}
	}
}

// TestPDFEmbedsAGlyphForEveryCharacterItPrints checks the fonts inside the PDF: for every
// character printed, the font it is printed in maps it to a glyph of the embedded font file,
// and that glyph has outlines. A font without "€", "₂" or "Ł" would print an empty box there
// while the text still read back right; this is what catches it.
func TestPDFEmbedsAGlyphForEveryCharacterItPrints(t *testing.T) {
	eur := sampleInvoice(t)
	eur.Currency = "EUR"
	b := renderPDF(t, eur)
	r := openPDF(t, b)
	checked := map[rune]bool{}
	for n := 1; n <= r.NumPage(); n++ {
		page := r.Page(n)
		type embedded struct {
			cidToGID []byte
			font     *sfnt.Font
		}
		fonts := map[string]embedded{}
		res := page.Resources().Key("Font")
		for _, key := range res.Keys() {
			f := res.Key(key)
			cid := f.Key("DescendantFonts").Index(0)
			file := readStream(t, cid.Key("FontDescriptor").Key("FontFile2"))
			sf, err := sfnt.Parse(file)
			if err != nil {
				t.Fatalf("font %s: the embedded font file does not parse: %v", f.Key("BaseFont").Name(), err)
			}
			fonts[f.Key("BaseFont").Name()] = embedded{cidToGID: readStream(t, cid.Key("CIDToGIDMap")), font: sf}
		}
		var buf sfnt.Buffer
		for _, run := range pdfRuns(t, b) {
			if run.Page != n {
				continue
			}
			e, ok := fonts[run.Font]
			if !ok {
				t.Fatalf("page %d prints %q in font %q, which the page does not embed", n, run.Text, run.Font)
			}
			for _, c := range run.Text {
				if c == ' ' {
					continue
				}
				i := 2 * int(c)
				if i+1 >= len(e.cidToGID) {
					t.Fatalf("%q (%U) is past the font's CID map", c, c)
				}
				gid := sfnt.GlyphIndex(uint16(e.cidToGID[i])<<8 | uint16(e.cidToGID[i+1]))
				if gid == 0 {
					t.Errorf("%q (%U) in %q maps to no glyph of %s", c, c, run.Text, run.Font)
					continue
				}
				segs, err := e.font.LoadGlyph(&buf, gid, fixed.I(100), nil)
				if err != nil || len(segs) == 0 {
					t.Errorf("%q (%U) in %q: glyph %d of %s has no outline (%v)", c, c, run.Text, gid, run.Font, err)
				}
				checked[c] = true
			}
		}
	}
	for _, c := range "€₂Łóź" {
		if !checked[c] {
			t.Errorf("the document never printed %q: the check above proved nothing about it", c)
		}
	}
}

// TestPDFOverflowsOntoAnotherPage renders 60 lines: they take two pages, each page says
// which of how many it is, the table's head is repeated, and no line is lost or printed
// twice.
func TestPDFOverflowsOntoAnotherPage(t *testing.T) {
	d := manyLines(t, 60)
	b := renderPDF(t, d)
	if n := openPDF(t, b).NumPage(); n != 2 {
		t.Fatalf("60 lines take %d pages, want 2", n)
	}
	runs := pdfRuns(t, b)
	descriptions := map[string]int{}
	heads := map[int]bool{}
	pages := map[string]bool{}
	for _, r := range runs {
		if strings.HasPrefix(r.Text, "standard · ") {
			descriptions[r.Text]++
		}
		if r.Text == "Description" {
			heads[r.Page] = true
		}
		if strings.HasPrefix(r.Text, "Page ") {
			pages[r.Text] = true
		}
	}
	for _, l := range d.Lines {
		if descriptions[l.Description] != 1 {
			t.Errorf("line %q printed %d times, want once", l.Description, descriptions[l.Description])
		}
	}
	if !heads[1] || !heads[2] {
		t.Errorf("the table's head is on pages %v, want on both", heads)
	}
	if !pages["Page 1 of 2"] || !pages["Page 2 of 2"] {
		t.Errorf("page numbers printed: %v, want Page 1 of 2 and Page 2 of 2", pages)
	}
	// The totals come after the last line, on the second page.
	var lastLinePage, totalPage int
	for _, r := range runs {
		if r.Text == d.Lines[59].Description {
			lastLinePage = r.Page
		}
		if r.Text == "Amount due" {
			totalPage = r.Page
		}
	}
	if lastLinePage != 2 || totalPage != 2 {
		t.Errorf("the last line is on page %d and the amount due on page %d, want both on 2", lastLinePage, totalPage)
	}
}

// TestPDFMarksDraftsAndVoids stamps a draft and a void document so they cannot pass for a
// final one, and leaves an issued one unmarked.
func TestPDFMarksDraftsAndVoids(t *testing.T) {
	for _, c := range []struct {
		status     Status
		number     string
		wantNumber string
		marked     bool
	}{
		{StatusDraft, "", "DRAFT", true},
		{StatusIssued, "GPM-2026-000042", "GPM-2026-000042", false},
		{StatusVoid, "GPM-2026-000042", "GPM-2026-000042", true},
	} {
		d := sampleInvoice(t)
		d.Status, d.Number = c.status, c.number
		runs := pdfRuns(t, renderPDF(t, d))
		stamps := 0
		number := false
		for _, r := range runs {
			if r.Font == "utf8goB" && (r.Text == "DRAFT" || r.Text == "VOID") && r.Page == 1 {
				stamps++
			}
			if r.Text == c.wantNumber {
				number = true
			}
		}
		if !number {
			t.Errorf("%s: the PDF does not print the number %q", c.status, c.wantNumber)
		}
		if want := map[bool]int{true: 1, false: 0}[c.marked]; c.status != StatusDraft && stamps != want {
			t.Errorf("%s: %d stamps, want %d", c.status, stamps, want)
		}
		if c.status == StatusDraft && stamps < 2 { // the stamp and the number in the title
			t.Errorf("draft: DRAFT printed %d times in bold on page 1, want the stamp and the title's number", stamps)
		}
	}
}

func TestPDFRefusesADocumentThatDoesNotAddUp(t *testing.T) {
	d := sampleInvoice(t)
	d.Totals.Subtotal++
	var b bytes.Buffer
	if err := PDF(&b, d); err == nil || !strings.Contains(err.Error(), "totals.subtotal") {
		t.Fatalf("PDF of a document whose lines do not add up: err = %v, want the subtotal refused", err)
	}
	if b.Len() != 0 {
		t.Errorf("a refused document still wrote %d bytes", b.Len())
	}
}
