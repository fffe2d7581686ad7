// Package charts draws the platform's charts on the server, as SVG for the pages and as PNG
// for the PDFs, so that a report reads without JavaScript and a printed document carries
// the same picture. It draws with github.com/go-analyze/charts in the font that library
// embeds (Roboto), so nothing is fetched from the network.
//
// Two promises hold for every chart: the same Chart always draws to the same bytes (no clock,
// no randomness, no map order), and an SVG can be written straight into a page: the text in
// it, labels and series names included, is escaped by the drawing library and the finished
// SVG is checked against a short list of elements and attributes before it is returned (see
// docs/reports-pages.md, "Charts").
//
// Charts are pictures of figures that are shown exactly beside them (a table of the same
// numbers); their values are float64 for the eye and never feed a total.
package charts

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"

	gocharts "github.com/go-analyze/charts"

	"github.com/gpumarket/gpumarket/services"
)

// Chart is what a chart shows: a value per label in each series.
type Chart struct {
	Title  string
	Unit   string   // what the values are in, printed on the value axis: "USD", "kWh", "gCO2e"
	Labels []string // the categories or days, in order
	Series []Series
}

// Series is one named row of values, one per label.
type Series struct {
	Name   string
	Values []float64
}

// Kind is how a chart is drawn.
type Kind string

const (
	// Line draws each series as a line across the labels: a figure per day.
	Line Kind = "line"
	// Bars draws the series side by side in each label: spend against the baseline per tier.
	Bars Kind = "bars"
)

// Format is the image format a chart is drawn in.
type Format string

const (
	SVG Format = "svg" // for pages, written inline
	PNG Format = "png" // for PDFs
)

// Size of every chart, in pixels (SVG user units). A PNG is drawn at this size too; the PDF
// scales it to the page's width.
const (
	Width  = 720
	Height = 320
)

// Limits keep one chart's drawing small and readable.
const (
	MaxLabels = 1200
	MaxSeries = 8
)

// Validate refuses a chart that cannot be drawn honestly: no labels or no series, a series
// whose values do not match the labels, or a value that is not a finite number.
func (c Chart) Validate() error {
	fe := services.FieldErrors{}
	if len(c.Labels) == 0 || len(c.Labels) > MaxLabels {
		fe.Add("labels", fmt.Sprintf("a chart needs between 1 and %d labels", MaxLabels))
	}
	if len(c.Series) == 0 || len(c.Series) > MaxSeries {
		fe.Add("series", fmt.Sprintf("a chart needs between 1 and %d series", MaxSeries))
	}
	for i, s := range c.Series {
		if len(s.Values) != len(c.Labels) {
			fe.Add(fmt.Sprintf("series[%d]", i), fmt.Sprintf("%d values for %d labels", len(s.Values), len(c.Labels)))
		}
		for _, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				fe.Add(fmt.Sprintf("series[%d]", i), "values are finite numbers")
				break
			}
		}
	}
	return fe.Err()
}

// Draw draws the chart as kind in format f, Width x Height.
func Draw(c Chart, kind Kind, f Format) ([]byte, error) { return DrawAt(c, kind, f, Width, Height) }

// DrawAt draws the chart as kind in format f at a size of its own, between half and twice
// Width x Height.
func DrawAt(c Chart, kind Kind, f Format, width, height int) (out []byte, err error) {
	defer services.Wrap(&err, "charts.Draw(%s, %s, %q)", kind, f, c.Title)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if f != SVG && f != PNG {
		return nil, fmt.Errorf("unknown format %q", f)
	}
	if width < Width/2 || width > 2*Width || height < Height/2 || height > 2*Height {
		return nil, fmt.Errorf("a chart of %dx%d is out of bounds", width, height)
	}
	p := gocharts.NewPainter(gocharts.PainterOptions{
		OutputFormat: string(f),
		Width:        width,
		Height:       height,
		Theme:        gocharts.GetTheme(gocharts.ThemeLight),
	})
	values, names := c.values(), c.names()
	title := gocharts.TitleOption{Text: c.Title}
	legend := gocharts.LegendOption{SeriesNames: names, Offset: gocharts.OffsetRight}
	switch kind {
	case Line:
		opt := gocharts.NewLineChartOptionWithData(values)
		opt.Title, opt.Legend = title, legend
		opt.XAxis.Labels = c.Labels
		opt.YAxis[0].Title = c.Unit
		opt.ValueFormatter = axisValue
		err = p.LineChart(opt)
	case Bars:
		opt := gocharts.NewBarChartOptionWithData(values)
		opt.Title, opt.Legend = title, legend
		opt.CategoryAxis.Labels = c.Labels
		opt.ValueAxis[0].Title = c.Unit
		opt.ValueFormatter = axisValue
		err = p.BarChart(opt)
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return nil, err
	}
	out, err = p.Bytes()
	if err != nil {
		return nil, err
	}
	if f == SVG {
		if out, err = presentationAttributes(out); err != nil {
			return nil, err
		}
		if err := CheckSVG(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// styleAttr is an inline style the drawing library writes on an SVG element.
var styleAttr = regexp.MustCompile(`style="([^"]*)"`)

// presentationProperties are the style properties a chart uses, each of which SVG also takes
// as an attribute of its own.
var presentationProperties = map[string]bool{"fill": true, "stroke": true, "stroke-width": true, "font-size": true, "font-family": true}

// presentationAttributes rewrites the library's inline styles as presentation attributes
// (style="fill:red;stroke:none" becomes fill="red" stroke="none"): the pages' Content
// Security Policy allows no inline style, which would leave every line unstroked and every
// bar black, while attributes are markup, not style, and stay.
func presentationAttributes(svg []byte) ([]byte, error) {
	var bad error
	out := styleAttr.ReplaceAllFunc(svg, func(m []byte) []byte {
		var b bytes.Buffer
		for i, decl := range strings.Split(string(styleAttr.FindSubmatch(m)[1]), ";") {
			name, value, ok := strings.Cut(decl, ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if !ok || !presentationProperties[name] || strings.ContainsAny(value, `"<>&`) {
				bad = fmt.Errorf("%w: style %q", ErrUnsafeSVG, decl)
				return m
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(name + `="` + value + `"`)
		}
		return b.Bytes()
	})
	return out, bad
}

func (c Chart) values() [][]float64 {
	v := make([][]float64, len(c.Series))
	for i, s := range c.Series {
		v[i] = s.Values
	}
	return v
}

func (c Chart) names() []string {
	n := make([]string, len(c.Series))
	for i, s := range c.Series {
		n[i] = s.Name
	}
	return n
}

// axisValue prints an axis tick: short, but exact enough to tell 0.0012 from 0.0015.
func axisValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1000:
		return gocharts.FormatValueHumanizeShort(v, 1, false)
	case a >= 10:
		return trimZeros(fmt.Sprintf("%.1f", v))
	case a >= 0.01:
		return trimZeros(fmt.Sprintf("%.3f", v))
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// svgElements and svgAttributes are everything a chart's SVG may hold. Anything else, a
// script, a foreignObject, an event handler, a link, means text escaped its place, and the
// chart is refused rather than written into a page.
var (
	svgElements   = map[string]bool{"svg": true, "path": true, "text": true, "circle": true, "g": true}
	svgAttributes = map[string]bool{
		"xmlns": true, "xlink": true, "viewBox": true, "d": true, "x": true, "y": true,
		"cx": true, "cy": true, "r": true, "transform": true, "stroke-dasharray": true,
		"fill": true, "stroke": true, "stroke-width": true, "font-size": true, "font-family": true,
	}
)

// ErrUnsafeSVG is returned for an SVG that holds more than a chart draws.
var ErrUnsafeSVG = errors.New("the chart's SVG holds an element or attribute a chart never draws")

// CheckSVG returns nil when svg is one well-formed svg element made only of what a chart
// draws (paths, circles, text), so that it is safe to write inline into an HTML page.
func CheckSVG(svg []byte) error {
	d := xml.NewDecoder(bytes.NewReader(svg))
	d.Strict = true
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnsafeSVG, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if !svgElements[t.Name.Local] || (depth == 0) != (t.Name.Local == "svg") {
				return fmt.Errorf("%w: <%s>", ErrUnsafeSVG, t.Name.Local)
			}
			for _, a := range t.Attr {
				if !svgAttributes[a.Name.Local] {
					return fmt.Errorf("%w: %s=", ErrUnsafeSVG, a.Name.Local)
				}
				if strings.Contains(strings.ToLower(a.Value), "url(") {
					return fmt.Errorf("%w: a url in %s", ErrUnsafeSVG, a.Name.Local)
				}
			}
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return fmt.Errorf("%w: text outside the svg element", ErrUnsafeSVG)
			}
		case xml.ProcInst, xml.Directive:
			return fmt.Errorf("%w: a processing instruction or directive", ErrUnsafeSVG)
		}
	}
	if roots != 1 {
		return fmt.Errorf("%w: %d root elements", ErrUnsafeSVG, roots)
	}
	return nil
}
