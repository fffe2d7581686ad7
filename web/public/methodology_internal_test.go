package public

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/templates"
)

// methodologyAnchors are the sections other pages link figures to.
var methodologyAnchors = []string{"version", "savings", "baseline", "energy", "load", "gpus", "carbon", "market-based",
	"scope3", "sci", "pue", "grid", "carbon-baseline", "embodied", "corrections"}

func renderMethodology(t *testing.T) *goquery.Document {
	t.Helper()
	m, err := methodology()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := templates.Methodology(m).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestMethodologyShowsTheMethodsConstants: every constant the reports use is on the page as
// the method holds it, and the corrections to the paper come out of its own runs: 3.1x at
// 700 W becomes 6.2x at 350 W, and 3.8x at the same request rate; $0.111 is the 2x row at 4
// requests/s, $0.149 the 4x at 8.
func TestMethodologyShowsTheMethodsConstants(t *testing.T) {
	doc := renderMethodology(t)
	for _, id := range methodologyAnchors {
		if doc.Find("#"+id).Length() != 1 {
			t.Errorf("no section #%s", id)
		}
	}
	if v := text(doc.Find(`[data-testid="method-version"]`)); v != carbon.MethodVersion {
		t.Errorf("method version = %q, want %q", v, carbon.MethodVersion)
	}
	for _, g := range hardware.GPUs {
		row := doc.Find("#gpu-" + g.SKU)
		if text(row.Find("td").Eq(2)) != strconv.Itoa(g.BoardPowerW) || text(row.Find("td").Eq(3)) != g.Source {
			t.Errorf("%s row = %q", g.SKU, text(row))
		}
	}
	if text(doc.Find("#gpu-h100-pcie td").Eq(2)) != "350" {
		t.Error("the H100 PCIe is not shown at 350 W")
	}
	for _, r := range hardware.Regions {
		row := doc.Find("#grid-" + r.Code)
		if text(row.Find("td").Eq(1)) != strconv.Itoa(r.GCO2ePerKWh) || text(row.Find("td").Eq(2)) != strconv.Itoa(r.Year) || text(row.Find("td").Eq(3)) != r.Source {
			t.Errorf("%s row = %q", r.Code, text(row))
		}
	}
	for id, want := range map[string]string{"pue-home": "1", "pue-datacentre": "1.3", "pue-min": "1", "pue-max": "3",
		"advantage-paper": "3.1x", "advantage-rated": "6.2x", "advantage-equal": "3.8x"} {
		if got := text(doc.Find(`[data-testid="` + id + `"]`)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	embodied := text(doc.Find(`[data-testid="method-embodied"]`))
	for _, want := range []string{"60 kgCO2e", "318 kgCO2e", "4-year life", "upper bound"} {
		if !bytes.Contains([]byte(embodied), []byte(want)) {
			t.Errorf("the embodied assumptions %q do not say %q", embodied, want)
		}
	}
	price := text(doc.Find("#correction-4090-price"))
	for _, want := range []string{"$0.111–0.149", "$0.111 is the 2x RTX 4090 at 4 requests/s (1250.59 tokens/s)",
		"$0.149 is the 4x RTX 4090 at 8 requests/s (1858.57 tokens/s)", "$0.25 per GPU-hour"} {
		if !bytes.Contains([]byte(price), []byte(want)) {
			t.Errorf("price correction %q does not say %q", price, want)
		}
	}
	power := text(doc.Find("#correction-h100-power"))
	for _, want := range []string{"350 W, not 700 W", "48.4 gCO2e per million tokens on the consumer rig against 7.8, not 15.6"} {
		if !bytes.Contains([]byte(power), []byte(want)) {
			t.Errorf("power correction %q does not say %q", power, want)
		}
	}
	if n := doc.Find(`[data-testid="method-references"] tbody tr`).Length(); n != 13 {
		t.Errorf("%d reference runs, want the benchmark's 13 models", n)
	}
	// The reference and the baseline's basis, with their sources.
	base := text(doc.Find("#carbon-baseline"))
	for _, want := range []string{"8 requests per second", "input and output tokens", "same grid and at the same PUE",
		"its own baseline"} {
		if !bytes.Contains([]byte(base), []byte(want)) {
			t.Errorf("the carbon baseline %q does not say %q", base, want)
		}
	}
	load := text(doc.Find("#load"))
	for _, want := range []string{"ML.ENERGY", "0.46 J per output token at batch 8", "0.07 J at batch 512"} {
		if !bytes.Contains([]byte(load), []byte(want)) {
			t.Errorf("the load section %q does not say %q", load, want)
		}
	}
	if !bytes.Contains([]byte(text(doc.Find("#energy"))), []byte("energy_source=simulated")) {
		t.Error("the energy section does not name the simulated source")
	}
	// DeepSeek-R1-Distill-Qwen-14B on 2x RTX 4090 at 8 requests/s: 900 W / 1,500.34 tokens/s
	// against 350 W / 2,240.95.
	found := false
	doc.Find(`[data-testid="method-comparison"]`).Each(func(_ int, row *goquery.Selection) {
		if text(row.Find("td").Eq(0)) == "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B" && text(row.Find("td").Eq(1)) == "2x rtx-4090" {
			found = true
			if got := text(row.Find("td").Eq(2)) + " " + text(row.Find("td").Eq(3)) + " " + text(row.Find("td").Eq(4)); got != "0.5999 0.1562 0.260" {
				t.Errorf("2x RTX 4090 row = %q, want 0.5999 0.1562 0.260", got)
			}
		}
	})
	if n := doc.Find(`[data-testid="method-comparison"]`).Length(); !found || n != 11 {
		t.Errorf("%d comparisons (2x RTX 4090 for the 14B found: %v), want the benchmark's 11 consumer configurations", n, found)
	}
}

// text is a selection's text with its whitespace collapsed, as a reader sees it.
func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }
