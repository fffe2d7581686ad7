package core

import (
	"testing"
	"time"
)

// A moment is written in its reader's zone with the zone's abbreviation: UTC, and Oslo's
// winter and summer time.
func TestMomentIn(t *testing.T) {
	t.Parallel()
	oslo, err := LoadZone("Europe/Oslo")
	if err != nil {
		t.Fatal(err)
	}
	winter := time.Date(2026, 1, 15, 12, 30, 0, 0, time.UTC)
	summer := time.Date(2026, 7, 15, 12, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		loc  *time.Location
		at   time.Time
		want string
	}{
		{time.UTC, winter, "2026-01-15 12:30 UTC"},
		{oslo, winter, "2026-01-15 13:30 CET"},
		{oslo, summer, "2026-07-15 14:30 CEST"},
	} {
		if got := MomentIn(c.loc, c.at, ToMinute); got != c.want {
			t.Errorf("MomentIn(%s, %s) = %q, want %q", c.loc, c.at, got, c.want)
		}
	}
	if _, err := LoadZone("Mars/Olympus_Mons"); err == nil {
		t.Error("an unknown zone loaded")
	}
}
