package home

import "testing"

// A count's noun agrees with it, and a capped count ("500+") takes the plural.
func TestTaskLabelsAgreeWithTheirCounts(t *testing.T) {
	for _, c := range []struct {
		n    int
		more bool
		want string
	}{{0, false, "flagged requests to resolve"}, {1, false, "flagged request to resolve"},
		{2, false, "flagged requests to resolve"}, {1, true, "flagged requests to resolve"}} {
		got := task("open-flags", "flagged request to resolve", "flagged requests to resolve", "/finance/flags", c.n, c.more)
		if got.Label != c.want {
			t.Errorf("%d (more %v): %q, want %q", c.n, c.more, got.Label, c.want)
		}
	}
}
