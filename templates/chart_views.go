package templates

// ChartView is a chart as a page shows it: its picture and the table of its numbers.
type ChartView struct {
	ID    string // unique in the page: the figure's anchor is "chart-" + ID
	Title string
	// SVG is the picture, drawn by services/charts, which refuses any SVG holding more than
	// paths, circles and text (charts.CheckSVG): it is written into the page as it is. ""
	// leaves the picture out; the table stays.
	SVG string
	// NarrowSVG is the same picture drawn at half the width, which a phone shows in its place so
	// that the labels keep their size rather than shrink with the picture (docs/pages.md). ""
	// leaves SVG to every screen.
	NarrowSVG string
	// Columns head the table: the labels' column, then one per series.
	Columns []string
	Rows    []ChartRow
	// MethodURL links the chart to the method behind its figures ("/methodology#carbon");
	// CSVURL to its figures as CSV. "" leaves a link out.
	MethodURL, CSVURL string
}

// ChartRow is one row of a chart's table: a label and a value per series.
type ChartRow struct {
	Label  string
	Values []string
}

// columnName is the name of the table's column i, "" past the last.
func (c ChartView) columnName(i int) string {
	if i < len(c.Columns) {
		return c.Columns[i]
	}
	return ""
}
