package progress

import (
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		r        Reading
		percent  int
		left     string
		rate     string
		leftTime time.Duration
	}{
		// 10 of 40 done, 10 of them in the last 5 minutes: 2 a minute, 30 left, 15 minutes.
		{"a quarter at a known pace", Reading{Done: 10, Total: 40, Recent: 10, Span: 5 * time.Minute, Running: true},
			25, "about 15 min left", "2.0 lines a minute", 15 * time.Minute},
		{"too few items ended", Reading{Done: 2, Total: 40, Recent: 2, Span: 5 * time.Minute, Running: true},
			5, "estimating…", "", 0},
		{"too short a span", Reading{Done: 30, Total: 40, Recent: 30, Span: 10 * time.Second, Running: true},
			75, "estimating…", "", 0},
		{"nothing ended lately", Reading{Done: 20, Total: 40, Recent: 0, Span: 5 * time.Minute, Running: true},
			50, "estimating…", "", 0},
		{"fast", Reading{Done: 39, Total: 40, Recent: 30, Span: time.Minute, Running: true},
			97, "less than a minute left", "30.0 lines a minute", 2 * time.Second},
		{"slow", Reading{Done: 3, Total: 1003, Recent: 3, Span: time.Minute, Running: true},
			0, "about 5.6 h left", "3.0 lines a minute", 1000 * time.Minute / 3},
		{"ended", Reading{Done: 40, Total: 40, Recent: 40, Span: 5 * time.Minute},
			100, "done", "", 0},
		{"nothing to do", Reading{Running: true}, 0, "estimating…", "", 0},
	}
	for _, c := range cases {
		e := Of(c.r)
		if e.Percent != c.percent || e.LeftText() != c.left || e.RateText("lines") != c.rate || e.Left.Round(time.Second) != c.leftTime.Round(time.Second) {
			t.Errorf("%s: %d%%, %q, %q, %s; want %d%%, %q, %q, %s", c.name, e.Percent, e.LeftText(), e.RateText("lines"), e.Left,
				c.percent, c.left, c.rate, c.leftTime)
		}
	}
}

func TestRecentSpan(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		started time.Time
		want    time.Duration
	}{{now.Add(-time.Hour), Window}, {now.Add(-time.Minute), time.Minute}, {now.Add(time.Minute), 0}} {
		if got := RecentSpan(c.started, now); got != c.want {
			t.Errorf("RecentSpan(%s) = %s, want %s", c.started, got, c.want)
		}
	}
}
