package services

import (
	"regexp"
	"testing"
	"time"
)

func TestTimeOrderedIDsSortByTime(t *testing.T) {
	shape := regexp.MustCompile(`^evt_[0-9a-f]{32}$`)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	prev := ""
	seen := map[string]bool{}
	for i := range 2000 {
		id := NewTimeOrderedID("evt_", at.Add(time.Duration(i/10)*time.Millisecond))
		if !shape.MatchString(id) {
			t.Fatalf("id %q is not evt_ and 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		// Ids of a later millisecond sort after every id of an earlier one.
		if i%10 == 0 && prev != "" && id[:16] <= prev[:16] {
			t.Fatalf("id %q of a later millisecond sorts before %q", id, prev)
		}
		prev = id
	}
	if got, want := NewTimeOrderedID("req_", at)[4:16], "01a22c538200"; got != want {
		t.Errorf("time part %s, want %s (%d ms in hex)", got, want, at.UnixMilli())
	}
}

func TestBatchOfRequest(t *testing.T) {
	prefix := BatchRequestPrefix("batch_01a2338504f5be63", 17, 2)
	if prefix != "req_01a2338504f5be63_17_2" {
		t.Fatalf("prefix %q", prefix)
	}
	for id, want := range map[string]string{
		prefix + "_0":                        "batch_01a2338504f5be63",
		prefix + "_3":                        "batch_01a2338504f5be63",
		NewTimeOrderedID("req_", time.Now()): "",
		"req_":                               "",
		"evt_01a2_1_1_0":                     "",
	} {
		got, ok := BatchOfRequest(id)
		if got != want || ok != (want != "") {
			t.Errorf("BatchOfRequest(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
}
