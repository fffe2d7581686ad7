package home

import (
	"testing"
	"time"
)

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

// The home writes moments in the reader's zone, with the zone: the same instant in UTC and in
// Oslo's winter time.
func TestMinuteTextIsInTheReadersZone(t *testing.T) {
	at := time.Date(2026, 12, 4, 14, 5, 0, 0, time.UTC)
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		loc  *time.Location
		want string
	}{{time.UTC, "14:05 UTC on 4 Dec 2026"}, {oslo, "15:05 CET on 4 Dec 2026"}} {
		if got := minuteText(c.loc, at); got != c.want {
			t.Errorf("%s: %q, want %q", c.loc, got, c.want)
		}
	}
}
