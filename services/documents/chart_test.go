package documents

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpumarket/gpumarket/services"
)

// withCharts is the sample invoice with its summary's two charts: spend against the baseline
// per tier, and carbon per tier against the same tokens on enterprise GPUs.
func withCharts(t testing.TB) Document {
	d := sampleInvoice(t)
	d.Charts = []BarChart{
		{
			Title: "Spend against the baseline per tier", Unit: "USD",
			Labels: []string{"realtime", "standard", "batch"},
			Series: []BarSeries{
				{Name: "Spend", Values: []float64{2.17, 3.49, 4.34}},
				{Name: "Baseline", Values: []float64{2.17, 21.08, 73.12}},
			},
		},
		{
			Title: "Carbon per tier", Unit: "gCO2e",
			Labels: []string{"realtime", "standard", "batch"},
			Series: []BarSeries{
				{Name: "Your tokens", Values: []float64{125.5, 1220.75, 0.00184}},
				{Name: "On enterprise GPUs", Values: []float64{125.5, 393.4, 0.0006}},
			},
		},
	}
	return d
}

func TestChartValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 2.17: "2.17", 21.085: "21.09", 1250: "1250", 0.00184: "0.00184", 0.5: "0.5",
		0.1234: "0.123", -3.5: "-3.5", 1e-9: "0", 73.1: "73.1",
	} {
		if got := ChartValue(v); got != want {
			t.Errorf("ChartValue(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestPDFDrawsChartsUnderTheSummary: each chart is an image on the page, and its figures
// are printed beside it as a table a reader can copy.
func TestPDFDrawsChartsUnderTheSummary(t *testing.T) {
	d := withCharts(t)
	b := renderPDF(t, d)
	for range 8 {
		if again := renderPDF(t, d); !bytes.Equal(again, b) {
			t.Fatal("two renders of a document with charts differ")
		}
	}
	texts := runTexts(pdfRuns(t, b))
	want := []string{
		"Spend against the baseline per tier", "Spend (USD)", "Baseline (USD)",
		"Carbon per tier", "Your tokens (gCO2e)", "On enterprise GPUs (gCO2e)",
		"realtime", "standard", "batch",
		"2.17", "3.49", "4.34", "21.08", "73.12", "125.5", "1220.75", "0.00184", "393.4", "0.0006",
	}
	for _, w := range want {
		if !texts[w] {
			t.Errorf("the PDF does not print %q", w)
		}
	}
	// The pictures: two image XObjects the size the charts are drawn at, each drawn once.
	r := openPDF(t, b)
	images, drawn := map[string]bool{}, 0
	for n := 1; n <= r.NumPage(); n++ {
		page := r.Page(n)
		xo := page.Resources().Key("XObject")
		for _, k := range xo.Keys() {
			x := xo.Key(k)
			if x.Key("Subtype").Name() != "Image" {
				continue
			}
			images[k] = true
			if w := x.Key("Width").Int64(); (w != 720 && w != 719) || x.Key("Height").Int64() != 320 {
				t.Errorf("image %s is %dx%d, want 720x320 (719 for the second chart)", k, w, x.Key("Height").Int64())
			}
		}
		drawn += bytes.Count(readStream(t, page.V.Key("Contents")), []byte(" Do"))
	}
	if len(images) != 2 || drawn != 2 {
		t.Errorf("the PDF holds %d images drawn %d times, want one per chart (2)", len(images), drawn)
	}
	// Without charts, nothing of them is drawn: the document is the same as before
	// (TestPDFMatchesGolden holds it to its golden file).
	if bytes.Equal(b, renderPDF(t, sampleInvoice(t))) {
		t.Error("charts changed nothing in the PDF")
	}
	s, err := d.Sheet()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Charts) != 2 || s.Charts[1].Rows[2].Values[0] != "0.00184" || s.Charts[0].Columns[2] != "Baseline (USD)" {
		t.Errorf("sheet charts = %+v", s.Charts)
	}
}

func TestChartsAreValidated(t *testing.T) {
	for _, c := range []struct {
		name, field string
		change      func(*Document)
	}{
		{"a series short of a value", "charts[0].series[1]", func(d *Document) { d.Charts[0].Series[1].Values = d.Charts[0].Series[1].Values[:2] }},
		{"a chart without labels", "charts[1].labels", func(d *Document) { d.Charts[1].Labels = nil; d.Charts[1].Series = nil }},
		{"a control character in a label", "charts[0]", func(d *Document) { d.Charts[0].Labels[0] = "real\ntime" }},
		{"a chart without a title", "charts[1].title", func(d *Document) { d.Charts[1].Title = " " }},
		{"too many charts", "charts", func(d *Document) { d.Charts = append(d.Charts, d.Charts[0], d.Charts[0], d.Charts[0]) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := withCharts(t)
			c.change(&d)
			var e *services.Error
			if err := d.Validate(); !errors.As(err, &e) || e.Fields[c.field] == "" {
				t.Errorf("Validate() = %v (fields %v), want a problem with %s", err, e, c.field)
			}
		})
	}
}
