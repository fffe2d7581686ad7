package ticket

import (
	"math"
	"testing"
)

// The most a request may be billed for, which admission holds and the meter bills within.
func TestBillableOf(t *testing.T) {
	for _, c := range []struct {
		name            string
		maxIn, maxOut   int64
		relayed         bool
		bytes, chunks   int64
		wantIn, wantOut int64
	}{
		{"in flight: the ticket's bounds", 712, 131_072, false, 0, 0, 712, 131_072},
		{"answered: the bound on what was relayed", 712, 131_072, true, 60_000, 600, 712, 60_608},
		{"answered: never past the ticket's output bound", 712, 16, true, 60_000, 600, 712, 16},
		{"answered with nothing relayed: the slack", 712, 131_072, true, 0, 0, 712, OutputSlack},
		{"an embedding: no output", 2_560, 0, true, 4_000, 0, 2_560, 0},
		{"relayed counts that would overflow", 1, math.MaxInt64, true, math.MaxInt64, math.MaxInt64, 1, math.MaxInt64},
		{"negative bounds are none", -5, -5, false, 0, 0, 0, 0},
	} {
		got := BillableOf(c.maxIn, c.maxOut, c.relayed, c.bytes, c.chunks)
		if got != (Billable{Input: c.wantIn, Output: c.wantOut}) {
			t.Errorf("%s: BillableOf = %+v; want %d/%d", c.name, got, c.wantIn, c.wantOut)
		}
	}
}
