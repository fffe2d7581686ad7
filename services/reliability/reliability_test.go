package reliability

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestStandingByUptime: the thresholds, compared exactly, and the warm-up.
func TestStandingByUptime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c      Counts
		uptime float64 // -1: none
		want   Standing
	}{
		{Counts{Successes: 97, Errors: 3, RateLimited: 5}, 97, Preferred},
		{Counts{Successes: 95, Errors: 5}, 95, Preferred},
		{Counts{Successes: 1899, Errors: 101}, 94.95, Degraded},
		{Counts{Successes: 80, Errors: 20}, 80, Degraded},
		{Counts{Successes: 799, Errors: 201}, 79.9, Fallback},
		{Counts{Errors: 99, RateLimited: 1000, Refused: 50, Canceled: 50}, -1, Preferred}, // 99 requests: warming up
		{Counts{Errors: 100}, 0, Fallback},
		{Counts{}, -1, Preferred},
	}
	for _, tc := range cases {
		u, ok := tc.c.Uptime()
		if (tc.uptime < 0) == ok || (ok && u != tc.uptime) {
			t.Errorf("%+v: uptime %v, %v; want %v", tc.c, u, ok, tc.uptime)
		}
		if got := tc.c.Standing(); got != tc.want {
			t.Errorf("%+v: standing %s, want %s", tc.c, got, tc.want)
		}
	}
}

// TestWindowsAgreeWithinAPeriod: processes refreshing at different moments of the same period compute over the
// same window, which ends a few seconds before a multiple of 30 s and spans a day and a half hour.
func TestWindowsAgreeWithinAPeriod(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 5, 16, 0, 35, 0, time.UTC)
	w := WindowAt(at)
	if want := time.Date(2026, 12, 5, 16, 0, 30, 0, time.UTC); !w.To.Equal(want) || !w.DayFrom.Equal(want.Add(-Day)) ||
		!w.RecentFrom.Equal(want.Add(-Recent)) {
		t.Fatalf("WindowAt(%s) = %+v", at, w)
	}
	if other := WindowAt(at.Add(29 * time.Second)); other != w {
		t.Fatalf("29 s later: %+v, want %+v", other, w)
	}
	if next := WindowAt(at.Add(30 * time.Second)); !next.To.Equal(w.To.Add(RefreshEvery)) {
		t.Fatalf("30 s later: %+v, want the next window", next)
	}
}

// countingSource counts the reads and keeps the last exclusions.
type countingSource struct {
	reads    int
	excluded []string
	counts   map[string]Counts
}

func (s *countingSource) Reliability(_ context.Context, _ Window, excluded []string) (map[string]Counts, error) {
	s.reads++
	s.excluded = excluded
	return s.counts, nil
}

// TestBoardReadsOncePerWindow: a board reads the record once per window, leaving out the accounts it is told,
// and publishes each figure only past the warm-up, with what it rests on.
func TestBoardReadsOncePerWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 16, 0, 35, 0, time.UTC)
	p := &Percentiles{P50: 120, P90: 300, P99: 800}
	src := &countingSource{counts: map[string]Counts{
		"warm": {Successes: 97, Errors: 3, RateLimited: 5, TTFTSamples: 100, TTFTMs: p, TPSSamples: 99, TPS: p},
	}}
	b := NewBoard(Config{Source: src, Now: func() time.Time { return now },
		Excluded: func(context.Context) ([]string, error) { return []string{"probes"}, nil }})
	if r := b.Record("warm"); r.Requests != 0 || r.UptimePercent != nil {
		t.Fatalf("before a refresh: %+v, want nothing", r)
	}
	for range 2 {
		if err := b.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if src.reads != 1 || !slices.Equal(src.excluded, []string{"probes"}) {
		t.Fatalf("reads = %d, excluded %v; want 1 read without the probes", src.reads, src.excluded)
	}
	r := b.Record("warm")
	if r.Requests != 100 || r.UptimePercent == nil || *r.UptimePercent != 97 || r.RateLimited != 5 ||
		r.TTFTRequests != 100 || r.TTFTMs == nil || *r.TTFTMs != *p || r.TPSRequests != 99 || r.OutputTokensPerSec != nil {
		t.Fatalf("record = %+v; want 97%% over 100, first tokens over 100, no throughput on 99", r)
	}
	if !r.To.Equal(WindowAt(now).To) {
		t.Fatalf("record's window ends %s, want %s", r.To, WindowAt(now).To)
	}
	now = now.Add(RefreshEvery)
	if err := b.Refresh(context.Background()); err != nil || src.reads != 2 {
		t.Fatalf("next window: %v, reads %d; want a second read", err, src.reads)
	}
	var none *Board
	if none.Standing("warm") != Preferred || none.Record("warm").Requests != 0 {
		t.Fatal("a nil board holds a record")
	}
}
