package catalog

import "testing"

// An offering's label names its hardware, model and region; regions are written by name from
// the one table of regions, and a code no region has is written as given.
func TestLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		gpu    string
		count  int
		model  string
		region string
		want   string
	}{
		{"rtx-4090", 4, "llama-3.1-8b", "no", "4× RTX 4090 · llama-3.1-8b · Norway"},
		{"h100-sxm", 1, "qwen2.5-72b", "de", "1× H100 SXM5 80GB · qwen2.5-72b · Germany"},
		{"rtx-3090", 2, "m", "eu", "2× RTX 3090 · m · European Union (EU-27)"},
		{"made-up", 8, "m", "mars", "8× made-up · m · mars"},
	} {
		if got := Label(c.gpu, c.count, c.model, c.region); got != c.want {
			t.Errorf("Label(%s, %d, %s, %s) = %q, want %q", c.gpu, c.count, c.model, c.region, got, c.want)
		}
	}
	if got := RegionName("us"); got != "United States" {
		t.Errorf("RegionName(us) = %q", got)
	}
}
