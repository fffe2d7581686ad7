package documents

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/charts"
)

// MaxCharts is how many charts one document may carry.
const MaxCharts = 4

// SheetChart is a chart of the summary as it is printed: the picture's figures, and the
// same figures as a table of text, which is what a reader (and a screen reader) can copy.
type SheetChart struct {
	Title string
	// Columns head the table: the categories' column (""), then each series with the unit,
	// "Spend (USD)".
	Columns []string
	Rows    []SheetChartRow
	// Chart is the picture: the PDF draws it as bars under the summary.
	Chart charts.Chart
}

// SheetChartRow is one category of a chart's table: its label and a value per series.
type SheetChartRow struct {
	Label  string
	Values []string
}

// sheetChart lays a chart out as its table.
func sheetChart(c BarChart) SheetChart {
	sc := SheetChart{Title: c.Title, Columns: []string{""}, Chart: chartOf(c)}
	for _, s := range c.Series {
		col := s.Name
		if c.Unit != "" {
			col += " (" + c.Unit + ")"
		}
		sc.Columns = append(sc.Columns, col)
	}
	for i, l := range c.Labels {
		row := SheetChartRow{Label: l}
		for _, s := range c.Series {
			row.Values = append(row.Values, ChartValue(s.Values[i]))
		}
		sc.Rows = append(sc.Rows, row)
	}
	return sc
}

func chartOf(c BarChart) charts.Chart {
	out := charts.Chart{Title: c.Title, Unit: c.Unit, Labels: c.Labels}
	for _, s := range c.Series {
		out.Series = append(out.Series, charts.Series{Name: s.Name, Values: s.Values})
	}
	return out
}

// ChartValue writes a chart's value for its table: at least three significant digits and
// at most six decimals, trailing zeros dropped ("41.2", "0.00184", "1250"). The exact
// figure, when there is one, is the summary's.
func ChartValue(v float64) string {
	if v == 0 {
		return "0"
	}
	decimals := 2
	if a := math.Abs(v); a < 1 {
		decimals = min(6, 2-int(math.Floor(math.Log10(a))))
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// checkCharts refuses charts that cannot be drawn or printed: too many, a series whose
// values do not match the labels, text the font cannot print.
func checkCharts(fe services.FieldErrors, cs []BarChart) {
	if len(cs) > MaxCharts {
		fe.Add("charts", fmt.Sprintf("at most %d charts", MaxCharts))
	}
	for i, c := range cs {
		field := fmt.Sprintf("charts[%d]", i)
		var invalid *services.Error
		if err := chartOf(c).Validate(); errors.As(err, &invalid) {
			for f, p := range invalid.Fields {
				fe.Add(field+"."+f, p)
			}
		}
		texts := append([]string{c.Title, c.Unit}, c.Labels...)
		for _, s := range c.Series {
			texts = append(texts, s.Name)
		}
		for _, t := range texts {
			if p := textProblem(t); p != "" {
				fe.Add(field, p)
				break
			}
		}
		if strings.TrimSpace(c.Title) == "" {
			fe.Add(field+".title", "must not be empty")
		}
	}
}
