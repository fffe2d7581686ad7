package charts

import (
	"bytes"
	"errors"
	"image/png"
	"strings"
	"testing"
)

func perDay() Chart {
	return Chart{
		Title:  "Spend against the baseline per day",
		Unit:   "USD",
		Labels: []string{"2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"},
		Series: []Series{
			{Name: "Spend", Values: []float64{1.25, 0.5, 2.75, 0}},
			{Name: "Baseline (realtime)", Values: []float64{4.5, 1.75, 9.25, 0}},
		},
	}
}

func perTier() Chart {
	return Chart{
		Title:  "Carbon per tier",
		Unit:   "gCO2e",
		Labels: []string{"realtime", "standard", "batch"},
		Series: []Series{
			{Name: "Your tokens", Values: []float64{120, 48.4, 30}},
			{Name: "On enterprise GPUs", Values: []float64{120, 15.6, 12}},
		},
	}
}

func TestDrawSVGShowsLabelsAndSeries(t *testing.T) {
	for _, c := range []struct {
		kind  Kind
		chart Chart
	}{{Line, perDay()}, {Bars, perTier()}} {
		t.Run(string(c.kind), func(t *testing.T) {
			svg, err := Draw(c.chart, c.kind, SVG)
			if err != nil {
				t.Fatal(err)
			}
			s := string(svg)
			if !strings.HasPrefix(s, "<svg ") || !strings.HasSuffix(s, "</svg>") {
				t.Fatalf("not one svg element: %.80q … %.40q", s, s[max(0, len(s)-40):])
			}
			want := []string{c.chart.Title, c.chart.Unit}
			for _, se := range c.chart.Series {
				want = append(want, se.Name)
			}
			// Bars label every category; a line over days may skip some, never the first.
			want = append(want, c.chart.Labels[0])
			if c.kind == Bars {
				want = append(want, c.chart.Labels...)
			}
			for _, w := range want {
				if !strings.Contains(s, ">"+w+"<") {
					t.Errorf("SVG has no text %q", w)
				}
			}
			// The pages allow no inline style (CSP): colours are attributes.
			if strings.Contains(s, "style=") || !strings.Contains(s, ` stroke="rgb(`) {
				t.Errorf("the SVG styles its elements inline rather than with attributes")
			}
			if n := strings.Count(s, "<path"); n < len(c.chart.Series) {
				t.Errorf("%d paths for %d series", n, len(c.chart.Series))
			}
		})
	}
}

func TestDrawPNGDecodes(t *testing.T) {
	for _, kind := range []Kind{Line, Bars} {
		b, err := Draw(perTier(), kind, PNG)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: PNG does not decode: %v", kind, err)
		}
		if r := img.Bounds(); r.Dx() != Width || r.Dy() != Height {
			t.Errorf("%s: PNG is %dx%d, want %dx%d", kind, r.Dx(), r.Dy(), Width, Height)
		}
		// A drawn chart is not a blank canvas: the bars and lines colour some pixels.
		first, differ := img.At(0, 0), 0
		for y := 0; y < Height; y += 4 {
			for x := 0; x < Width; x += 4 {
				if img.At(x, y) != first {
					differ++
				}
			}
		}
		if differ < 200 {
			t.Errorf("%s: only %d sampled pixels differ from the background", kind, differ)
		}
	}
}

func TestDrawIsDeterministic(t *testing.T) {
	for _, kind := range []Kind{Line, Bars} {
		for _, f := range []Format{SVG, PNG} {
			a, err := Draw(perDay(), kind, f)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Draw(perDay(), kind, f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s %s: the same chart drew to different bytes", kind, f)
			}
			other := perDay()
			other.Series[0].Values[2] = 3.5
			c, err := Draw(other, kind, f)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(a, c) {
				t.Errorf("%s %s: a different value drew the same bytes", kind, f)
			}
		}
	}
}

// A label or series name is text from the data (a model's name, a tier): it must reach the
// page as text, never as markup.
func TestDrawSVGEscapesText(t *testing.T) {
	c := perTier()
	c.Labels[1] = `<b>x</b>`
	c.Series[0].Name = `"><script>alert(1)</script>`
	c.Title = `a & b <img src=x onerror=alert(1)>`
	svg, err := Draw(c, Bars, SVG)
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, bad := range []string{"<script", "<img", "<b>"} {
		if strings.Contains(s, bad) {
			t.Errorf("SVG carries markup %q from the data", bad)
		}
	}
	for _, shown := range []string{
		"&lt;b&gt;x&lt;/b&gt;",
		`&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;`,
		"a &amp; b &lt;img src=x onerror=alert(1)&gt;",
	} {
		if !strings.Contains(s, ">"+shown+"<") && !strings.Contains(s, ">"+strings.ReplaceAll(shown, "&#34;", `"`)+"<") {
			t.Errorf("SVG does not show %q as text", shown)
		}
	}
	if err := CheckSVG(svg); err != nil {
		t.Errorf("escaped SVG refused: %v", err)
	}
}

func TestCheckSVGRefusesMarkup(t *testing.T) {
	for _, svg := range []string{
		`<svg viewBox="0 0 1 1"><script>alert(1)</script></svg>`,
		`<svg viewBox="0 0 1 1"><path d="M0 0" onclick="x"/></svg>`,
		`<svg viewBox="0 0 1 1"><foreignObject/></svg>`,
		`<svg viewBox="0 0 1 1"><path d="M0 0" style="fill:url(javascript:x)"/></svg>`,
		`<svg viewBox="0 0 1 1"></svg><script>alert(1)</script>`,
		`<?xml version="1.0"?><svg viewBox="0 0 1 1"></svg>`,
		`<svg viewBox="0 0 1 1"><text>unclosed</svg>`,
		`<p>not a chart</p>`,
	} {
		if err := CheckSVG([]byte(svg)); !errors.Is(err, ErrUnsafeSVG) {
			t.Errorf("CheckSVG(%q) = %v, want ErrUnsafeSVG", svg, err)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := perDay()
	bad.Series[1].Values = bad.Series[1].Values[:2]
	if _, err := Draw(bad, Line, SVG); err == nil || !strings.Contains(err.Error(), "2 values for 4 labels") {
		t.Errorf("mismatched series: %v", err)
	}
	if _, err := Draw(Chart{Title: "empty"}, Bars, PNG); err == nil {
		t.Error("a chart with no labels drew")
	}
	if _, err := Draw(perDay(), "pie", SVG); err == nil {
		t.Error("an unknown kind drew")
	}
}
