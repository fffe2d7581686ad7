package periods

import (
	"testing"
	"time"
)

func TestPeriodsResetAtMidnightUTCWeeksOnMonday(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		p          Period
		now        string
		start, end string
	}{
		{Day, "2026-03-14T23:59:59Z", "2026-03-14T00:00:00Z", "2026-03-15T00:00:00Z"},
		{Day, "2026-03-15T00:00:00Z", "2026-03-15T00:00:00Z", "2026-03-16T00:00:00Z"},
		// 00:30 in UTC+2 is still the day before in UTC.
		{Day, "2026-03-15T00:30:00+02:00", "2026-03-14T00:00:00Z", "2026-03-15T00:00:00Z"},
		// 14 March 2026 is a Saturday; its week began on Monday 9 March.
		{Week, "2026-03-14T12:00:00Z", "2026-03-09T00:00:00Z", "2026-03-16T00:00:00Z"},
		{Week, "2026-03-15T23:59:59Z", "2026-03-09T00:00:00Z", "2026-03-16T00:00:00Z"}, // Sunday
		{Week, "2026-03-16T00:00:00Z", "2026-03-16T00:00:00Z", "2026-03-23T00:00:00Z"}, // Monday
		{Week, "2026-01-01T08:00:00Z", "2025-12-29T00:00:00Z", "2026-01-05T00:00:00Z"}, // across a year
		{Month, "2026-02-28T23:59:59Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{Month, "2026-12-31T10:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	} {
		now := at(c.now)
		if got := c.p.Start(now); !got.Equal(at(c.start)) || got.Location() != time.UTC {
			t.Errorf("%s of %s starts %s, want %s", c.p, c.now, got, c.start)
		}
		if got := c.p.End(now); !got.Equal(at(c.end)) {
			t.Errorf("%s of %s ends %s, want %s", c.p, c.now, got, c.end)
		}
	}
	if p, err := Parse(""); err != nil || p != Month {
		t.Errorf(`Parse("") = %q, %v; want month, the period of limits set before periods`, p, err)
	}
	if _, err := Parse("year"); err == nil {
		t.Error("Parse(year) took a period there is none of")
	}
}
