package documents

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"codeberg.org/go-pdf/fpdf"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"

	"github.com/gpumarket/gpumarket/services"
)

// The page: A4 portrait, in millimetres.
const (
	pageWidth    = 210.0
	pageHeight   = 297.0
	marginLeft   = 18.0
	marginRight  = 18.0
	marginTop    = 16.0
	marginBottom = 22.0 // room for the footer
	contentWidth = pageWidth - marginLeft - marginRight

	fontFamily = "Go" // the Go fonts, embedded: see docs/documents.md, "The font"
	bodySize   = 8.5  // points
	tableSize  = 8.0  // points, the lines table
	lineHeight = 4.4  // millimetres per line of body text
)

// columnWidths are the widths of the lines table's columns, summing to contentWidth: the
// description, input and output tokens (room for a billion and more), their prices, the
// amount.
var columnWidths = [6]float64{62, 23, 23, 18, 18, 30}

// PDF writes the document as a print-ready A4 PDF to w. The same document always gives the
// same bytes: the PDF's creation and modification dates are the date the document bears, and
// its catalogs are written in a fixed order (see docs/documents.md, "Byte-identical PDFs").
func PDF(w io.Writer, d Document) (err error) {
	defer services.Wrap(&err, "documents.PDF(%s %q)", d.Kind, d.Number)
	s, err := d.Sheet()
	if err != nil {
		return err
	}
	images, err := chartImages(s)
	if err != nil {
		return err
	}
	// The footer says "page 1 of N": a first drawing counts the pages, the second prints them.
	first, err := draw(s, images, 0)
	if err != nil {
		return err
	}
	doc, err := draw(s, images, first.PageCount())
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := doc.Output(&buf); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// draw lays the sheet out on pages; images are its charts as PNG; pages is the page count
// printed in the footers, 0 while it is not known yet.
func draw(s Sheet, images [][]byte, pages int) (*fpdf.Fpdf, error) {
	p := fpdf.New("P", "mm", "A4", "")
	p.SetCatalogSort(true)
	p.SetCreationDate(s.Date)
	p.SetModificationDate(s.Date)
	p.SetProducer("gpumarket", true)
	p.SetCreator("gpumarket", true)
	p.SetTitle(s.Title+" "+s.Number, true)
	p.SetAuthor(s.Seller.Name, true)
	p.SetLang("en")
	p.AddUTF8FontFromBytes(fontFamily, "", goregular.TTF)
	p.AddUTF8FontFromBytes(fontFamily, "B", gobold.TTF)
	p.SetMargins(marginLeft, marginTop, marginRight)
	p.SetAutoPageBreak(true, marginBottom)
	p.SetHeaderFunc(func() { header(p, s) })
	p.SetFooterFunc(func() { footer(p, s, pages) })

	p.AddPage()
	titleBlock(p, s)
	parties(p, s)
	facts(p, s)
	linesTable(p, s)
	totals(p, s)
	summary(p, s)
	chartBlocks(p, s, images)
	notes(p, s)
	if err := p.Error(); err != nil {
		return nil, fmt.Errorf("laying out the PDF: %w", err)
	}
	return p, nil
}

func setFont(p *fpdf.Fpdf, style string, size float64) { p.SetFont(fontFamily, style, size) }

func grey(p *fpdf.Fpdf)  { p.SetTextColor(95, 107, 118) }
func black(p *fpdf.Fpdf) { p.SetTextColor(27, 31, 35) }

// header stamps the marker across every page of a draft or a void document, under the
// content, and names the document at the top of every page after the first.
func header(p *fpdf.Fpdf, s Sheet) {
	if s.Marker != "" {
		setFont(p, "B", 96)
		p.SetTextColor(236, 238, 240)
		w := p.GetStringWidth(s.Marker)
		p.TransformBegin()
		p.TransformRotate(50, pageWidth/2, pageHeight/2)
		p.Text(pageWidth/2-w/2, pageHeight/2+12, s.Marker)
		p.TransformEnd()
	}
	p.SetXY(marginLeft, marginTop)
	if p.PageNo() > 1 {
		setFont(p, "", bodySize)
		grey(p)
		p.CellFormat(contentWidth, lineHeight, s.Title+" "+s.Number+", continued", "", 1, "L", false, 0, "")
		p.Ln(3)
	}
	black(p)
}

// footer names the document and its page at the bottom of every page.
func footer(p *fpdf.Fpdf, s Sheet, pages int) {
	y := pageHeight - marginBottom + 8
	p.SetDrawColor(221, 226, 230)
	p.SetLineWidth(0.2)
	p.Line(marginLeft, y-1.5, pageWidth-marginRight, y-1.5)
	setFont(p, "", 7.5)
	grey(p)
	p.SetXY(marginLeft, y)
	p.CellFormat(contentWidth*0.7, lineHeight, s.Footer, "", 0, "L", false, 0, "")
	page := "Page " + strconv.Itoa(p.PageNo())
	if pages > 0 {
		page += " of " + strconv.Itoa(pages)
	}
	p.CellFormat(contentWidth*0.3, lineHeight, page, "", 0, "R", false, 0, "")
	black(p)
}

func titleBlock(p *fpdf.Fpdf, s Sheet) {
	setFont(p, "B", 20)
	p.CellFormat(contentWidth*0.55, 10, s.Title, "", 0, "L", false, 0, "")
	setFont(p, "B", 12)
	p.CellFormat(contentWidth*0.45, 10, s.Number, "", 1, "R", false, 0, "")
	p.Ln(4)
}

// parties prints the seller on the left and the buyer on the right.
func parties(p *fpdf.Fpdf, s Sheet) {
	const gap = 10.0
	w := (contentWidth - gap) / 2
	top := p.GetY()
	left := partyBlockPDF(p, s.Seller, marginLeft, top, w)
	right := partyBlockPDF(p, s.Buyer, marginLeft+w+gap, top, w)
	p.SetXY(marginLeft, max(left, right)+5)
}

// partyBlockPDF prints a party at (x, y) in a column w wide and returns where it ends.
func partyBlockPDF(p *fpdf.Fpdf, b PartyBlock, x, y, w float64) float64 {
	p.SetXY(x, y)
	setFont(p, "B", 7.5)
	grey(p)
	p.CellFormat(w, lineHeight, b.Label, "", 2, "L", false, 0, "")
	black(p)
	setFont(p, "B", 10)
	p.SetX(x)
	p.MultiCell(w, 5, b.Name, "", "L", false)
	setFont(p, "", bodySize)
	for _, l := range b.Lines {
		p.SetX(x)
		p.MultiCell(w, lineHeight, l, "", "L", false)
	}
	return p.GetY()
}

// facts prints the number, status, dates, period and currency as a strip of labelled
// columns, each as wide as its text and the room left shared out evenly.
func facts(p *fpdf.Fpdf, s Sheet) {
	widths := make([]float64, len(s.Facts))
	used := 0.0
	for i, f := range s.Facts {
		setFont(p, "", 7)
		widths[i] = p.GetStringWidth(f.Label)
		setFont(p, "B", bodySize)
		widths[i] = max(widths[i], p.GetStringWidth(f.Value)) + 2*p.GetCellMargin() + 2
		used += widths[i]
	}
	for i := range widths {
		widths[i] += (contentWidth - used) / float64(len(widths))
	}
	y := p.GetY()
	p.SetDrawColor(221, 226, 230)
	p.SetLineWidth(0.2)
	p.Line(marginLeft, y, pageWidth-marginRight, y)
	p.SetXY(marginLeft, y+1.5)
	setFont(p, "", 7)
	grey(p)
	for i, f := range s.Facts {
		p.CellFormat(widths[i], lineHeight, f.Label, "", 0, "L", false, 0, "")
	}
	p.Ln(lineHeight)
	setFont(p, "B", bodySize)
	black(p)
	for i, f := range s.Facts {
		p.CellFormat(widths[i], lineHeight, fit(p, f.Value, widths[i]), "", 0, "L", false, 0, "")
	}
	p.Ln(lineHeight + 1.5)
	y = p.GetY()
	p.Line(marginLeft, y, pageWidth-marginRight, y)
	p.Ln(6)
}

// fit shortens text that would overflow a cell w wide, ending it with "…".
func fit(p *fpdf.Fpdf, text string, w float64) string {
	room := w - 2*p.GetCellMargin()
	if p.GetStringWidth(text) <= room {
		return text
	}
	r := []rune(text)
	for len(r) > 0 && p.GetStringWidth(string(r)+"…") > room {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// linesTable prints the lines, figures right-aligned. A line is never split across pages:
// one that does not fit starts a new page, which repeats the table's head.
func linesTable(p *fpdf.Fpdf, s Sheet) {
	tableHead(p, s)
	for i, l := range s.Lines {
		setFont(p, "", tableSize)
		desc := p.SplitText(l.Description, columnWidths[0])
		var detail []string
		if l.Detail != "" {
			setFont(p, "", 7.5)
			detail = p.SplitText(l.Detail, columnWidths[0])
		}
		h := float64(len(desc)+len(detail))*lineHeight + 1
		if p.GetY()+h > pageHeight-marginBottom {
			p.AddPage()
			tableHead(p, s)
		}
		top := p.GetY()
		if i%2 == 1 {
			p.SetFillColor(246, 248, 249)
			p.Rect(marginLeft, top, contentWidth, h, "F")
		}
		y := top + 0.5
		setFont(p, "", tableSize)
		for _, t := range desc {
			p.SetXY(marginLeft, y)
			p.CellFormat(columnWidths[0], lineHeight, t, "", 0, "L", false, 0, "")
			y += lineHeight
		}
		setFont(p, "", 7.5)
		grey(p)
		for _, t := range detail {
			p.SetXY(marginLeft, y)
			p.CellFormat(columnWidths[0], lineHeight, t, "", 0, "L", false, 0, "")
			y += lineHeight
		}
		black(p)
		setFont(p, "", tableSize)
		x := marginLeft + columnWidths[0]
		for c, v := range []string{l.InputTokens, l.OutputTokens, l.InputPrice, l.OutputPrice, l.Amount} {
			p.SetXY(x, top+0.5)
			p.CellFormat(columnWidths[c+1], lineHeight, v, "", 0, "R", false, 0, "")
			x += columnWidths[c+1]
		}
		p.SetXY(marginLeft, top+h)
	}
	y := p.GetY()
	p.SetDrawColor(190, 198, 205)
	p.SetLineWidth(0.3)
	p.Line(marginLeft, y, pageWidth-marginRight, y)
	p.Ln(3)
}

// tableHead prints the lines table's head, each label wrapped to its column, on two lines.
func tableHead(p *fpdf.Fpdf, s Sheet) {
	const rows, h = 2, 3.6
	setFont(p, "B", 7)
	grey(p)
	p.SetFillColor(238, 241, 243)
	top := p.GetY()
	p.Rect(marginLeft, top, contentWidth, rows*h+1.6, "F")
	x := marginLeft
	for c, label := range s.Columns {
		align := "R"
		if c == 0 {
			align = "L"
		}
		parts := p.SplitText(label, columnWidths[c])
		for r, part := range parts[:min(len(parts), rows)] {
			// Labels sit on the bottom line, so one-line labels align with the second line of
			// two-line ones.
			p.SetXY(x, top+0.8+float64(rows-min(len(parts), rows)+r)*h)
			p.CellFormat(columnWidths[c], h, part, "", 0, align, false, 0, "")
		}
		x += columnWidths[c]
	}
	p.SetXY(marginLeft, top+rows*h+1.6)
	black(p)
}

// totals prints the totals right-aligned under the amounts, kept together on one page.
func totals(p *fpdf.Fpdf, s Sheet) {
	const labelWidth, valueWidth = 60.0, 34.0
	x := pageWidth - marginRight - labelWidth - valueWidth
	if p.GetY()+float64(len(s.Totals))*(lineHeight+1) > pageHeight-marginBottom {
		p.AddPage()
	}
	for _, t := range s.Totals {
		style := ""
		if t.Strong {
			style = "B"
			y := p.GetY()
			p.SetDrawColor(221, 226, 230)
			p.SetLineWidth(0.2)
			p.Line(x, y, pageWidth-marginRight, y)
		}
		setFont(p, style, bodySize+0.5)
		p.SetX(x)
		p.CellFormat(labelWidth, lineHeight+1, fit(p, t.Label, labelWidth), "", 0, "L", false, 0, "")
		p.CellFormat(valueWidth, lineHeight+1, t.Value, "", 1, "R", false, 0, "")
	}
	p.Ln(5)
}

// summary prints the summary's figures in a box, when the document has any.
func summary(p *fpdf.Fpdf, s Sheet) {
	if len(s.Summary) == 0 {
		return
	}
	h := 7 + float64(len(s.Summary))*lineHeight + 2
	if p.GetY()+h > pageHeight-marginBottom {
		p.AddPage()
	}
	top := p.GetY()
	p.SetDrawColor(221, 226, 230)
	p.SetFillColor(246, 248, 249)
	p.SetLineWidth(0.2)
	p.Rect(marginLeft, top, contentWidth, h, "FD")
	p.SetXY(marginLeft+3, top+2)
	setFont(p, "B", bodySize)
	p.CellFormat(contentWidth-6, 5, "Summary", "", 2, "L", false, 0, "")
	for _, f := range s.Summary {
		p.SetX(marginLeft + 3)
		setFont(p, "", bodySize)
		grey(p)
		p.CellFormat(70, lineHeight, f.Label, "", 0, "L", false, 0, "")
		black(p)
		setFont(p, "B", bodySize)
		p.CellFormat(contentWidth-76, lineHeight, f.Value, "", 1, "L", false, 0, "")
	}
	p.SetXY(marginLeft, top+h+5)
}

// notes prints the notes under their heading, kept together on one page when they fit on
// one.
func notes(p *fpdf.Fpdf, s Sheet) {
	if len(s.Notes) == 0 {
		return
	}
	const noteLine = 4.0
	setFont(p, "", 8)
	h := 5.0
	for _, n := range s.Notes {
		h += float64(len(p.SplitText(n, contentWidth)))*noteLine + 1
	}
	if room := pageHeight - marginBottom; p.GetY()+h > room && marginTop+h <= room {
		p.AddPage()
	}
	setFont(p, "B", bodySize)
	p.CellFormat(contentWidth, 5, "Notes", "", 1, "L", false, 0, "")
	setFont(p, "", 8)
	for _, n := range s.Notes {
		p.MultiCell(contentWidth, noteLine, n, "", "L", false)
		p.Ln(1)
	}
}
