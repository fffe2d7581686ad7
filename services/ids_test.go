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
		// Ids of a later millisecond sort after every id of an earlier one, and those of one
		// millisecond in the order they were made.
		if i%10 == 0 && prev != "" && id[:16] <= prev[:16] {
			t.Fatalf("id %q of a later millisecond sorts before %q", id, prev)
		}
		if id <= prev {
			t.Fatalf("id %q sorts before %q, made before it", id, prev)
		}
		prev = id
	}
	if got, want := NewTimeOrderedID("req_", at)[4:16], "01a22c538200"; got != want {
		t.Errorf("time part %s, want %s (%d ms in hex)", got, want, at.UnixMilli())
	}
}

func TestIDsOfOneMillisecondKeepTheirOrder(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	prev := NewTimeOrderedID("file-", at)
	for range 100_000 {
		id := NewTimeOrderedID("file-", at)
		if id <= prev || id[5:17] != prev[5:17] {
			t.Fatalf("%q made after %q in the same millisecond", id, prev)
		}
		prev = id
	}
}

func TestAddToTailCarries(t *testing.T) {
	for _, c := range []struct {
		tail [10]byte
		add  uint64
		want [10]byte
	}{
		{[10]byte{9: 0xff}, 1, [10]byte{8: 1}},
		{[10]byte{6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff}, 1, [10]byte{5: 1}},
		{[10]byte{9: 1}, 1 << 32, [10]byte{5: 1, 9: 1}},
		{[10]byte{6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff}, 1<<32 + 1, [10]byte{5: 2}},
		{[10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 2, [10]byte{9: 1}},
	} {
		got := c.tail
		addToTail(&got, c.add)
		if got != c.want {
			t.Errorf("% x + %d = % x, want % x", c.tail, c.add, got, c.want)
		}
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
