package documents

import (
	"bytes"
	"fmt"

	"codeberg.org/go-pdf/fpdf"

	"github.com/gpumarket/gpumarket/services/charts"
)

// chartImages draws each of the sheet's charts as grouped bars in PNG, once for both
// drawings of the PDF. Each is a pixel narrower than the one before: fpdf writes a PDF's
// images in the order of their widths, and images of one width in map order, which would
// make two renders of the same document differ (docs/reports-pages.md, "Charts in
// documents").
func chartImages(s Sheet) ([][]byte, error) {
	images := make([][]byte, 0, len(s.Charts))
	for i, c := range s.Charts {
		png, err := charts.DrawAt(c.Chart, charts.Bars, charts.PNG, chartImageWidth(i), charts.Height)
		if err != nil {
			return nil, err
		}
		images = append(images, png)
	}
	return images, nil
}

// chartImageWidth is the width in pixels of the document's i-th chart image.
func chartImageWidth(i int) int { return charts.Width - i }

// chartImageHeight is a chart's height on the page, in millimetres, at the content's width.
const chartImageHeight = contentWidth * charts.Height / charts.Width

// chartBlocks prints each chart under the summary: its picture across the content's width,
// then the same figures as a table. A chart's picture, its title and the table's head are
// kept together on one page; a long table flows onto the next.
func chartBlocks(p *fpdf.Fpdf, s Sheet, images [][]byte) {
	for i, c := range s.Charts {
		head := 5 + chartImageHeight + 2 + 2*lineHeight
		if p.GetY()+head > pageHeight-marginBottom {
			p.AddPage()
		}
		setFont(p, "B", bodySize)
		p.CellFormat(contentWidth, 5, fit(p, c.Title, contentWidth), "", 1, "L", false, 0, "")
		name := fmt.Sprintf("chart-%d", i+1)
		opts := fpdf.ImageOptions{ImageType: "PNG"}
		p.RegisterImageOptionsReader(name, opts, bytes.NewReader(images[i]))
		p.ImageOptions(name, marginLeft, p.GetY(), contentWidth, chartImageHeight, false, opts, 0, "")
		p.SetY(p.GetY() + chartImageHeight + 2)
		chartTable(p, c)
		p.Ln(4)
	}
}

// chartTable prints a chart's figures: the categories down the left, a column per series.
func chartTable(p *fpdf.Fpdf, c SheetChart) {
	const labelWidth = 54.0
	w := (contentWidth - labelWidth) / float64(len(c.Columns)-1)
	widths := func(col int) float64 {
		if col == 0 {
			return labelWidth
		}
		return w
	}
	setFont(p, "B", 7)
	grey(p)
	for col, h := range c.Columns {
		align := "R"
		if col == 0 {
			align = "L"
		}
		p.CellFormat(widths(col), lineHeight, fit(p, h, widths(col)), "", 0, align, false, 0, "")
	}
	p.Ln(lineHeight)
	black(p)
	setFont(p, "", 7.5)
	for _, r := range c.Rows {
		p.CellFormat(labelWidth, lineHeight, fit(p, r.Label, labelWidth), "", 0, "L", false, 0, "")
		for col, v := range r.Values {
			p.CellFormat(widths(col+1), lineHeight, v, "", 0, "R", false, 0, "")
		}
		p.Ln(lineHeight)
	}
}
