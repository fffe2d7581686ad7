package riglimits

import "testing"

func TestArrivalsCountTheLastWindow(t *testing.T) {
	t.Parallel()
	type step struct {
		sec  int64
		add  int
		want uint64 // the count within the window after the step
	}
	for name, steps := range map[string][]step{
		"one second":                {{100, 5, 5}},
		"within the window":         {{100, 5, 5}, {105, 3, 8}, {109, 1, 9}},
		"the first second leaves":   {{100, 5, 5}, {105, 3, 8}, {110, 0, 3}},
		"all leave after a silence": {{100, 5, 5}, {105, 3, 8}, {125, 0, 0}, {126, 2, 2}},
		"exactly a window later":    {{100, 4, 4}, {110, 1, 1}},
		"a clock that goes back":    {{100, 4, 4}, {95, 2, 6}, {101, 1, 7}},
	} {
		a := &arrivals{head: steps[0].sec}
		for i, s := range steps {
			for range s.add {
				a.add(s.sec)
			}
			if s.add == 0 {
				a.advance(s.sec)
			}
			if a.sum != s.want {
				t.Errorf("%s, step %d (second %d): %d in the window, want %d", name, i, s.sec, a.sum, s.want)
			}
		}
	}
}

func TestSumAtDoesNotMoveTheWindow(t *testing.T) {
	t.Parallel()
	a := &arrivals{head: 10}
	a.add(10)
	a.add(15)
	for sec, want := range map[int64]uint64{19: 2, 20: 1, 24: 1, 25: 0} {
		if got := a.sumAt(sec); got != want {
			t.Errorf("sumAt(%d) = %d, want %d", sec, got, want)
		}
	}
	if a.head != 15 || a.sum != 2 {
		t.Errorf("the window moved: head %d, sum %d", a.head, a.sum)
	}
}
