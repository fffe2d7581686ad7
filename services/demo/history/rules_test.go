package history

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
)

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestTheHistoryStartsSixtyDaysBackOrOnTheFirstOfThePreviousMonth(t *testing.T) {
	for _, c := range []struct{ today, want string }{
		{"2026-03-17", "2026-01-16"}, // 60 days back is before February
		{"2026-03-31", "2026-01-30"},
		{"2026-01-31", "2025-12-01"}, // 60 days back would miss 1 December
		{"2026-08-31", "2026-07-01"},
		{"2026-05-01", "2026-03-02"},
	} {
		today := day(c.today)
		got := firstDay(today)
		if !got.Equal(day(c.want)) {
			t.Errorf("from %s the history starts %s; want %s", c.today, got.Format(time.DateOnly), c.want)
		}
		if book := demo.PriceBookStart(today); book.After(got) {
			t.Errorf("from %s the price book starts %s, after the history's first day %s", c.today, book.Format(time.DateOnly), c.want)
		}
	}
}

func TestAWorkloadIsBusierOnWeekdays(t *testing.T) {
	w := Workload{Weekday: 30, Weekend: 6}
	for d := day("2026-02-01"); d.Before(day("2026-03-01")); d = d.AddDate(0, 0, 1) {
		n := w.requestsOn(d, 0.5)
		low, high := 6.0*(1-swellShare)*(1-jitterShare), 6.0*(1+swellShare)*(1+jitterShare)
		if !weekend(d) {
			low, high = 30*(1-swellShare)*(1-jitterShare), 30*(1+swellShare)*(1+jitterShare)
		}
		if float64(n) < low-0.5 || float64(n) > high+0.5 {
			t.Errorf("%s (%s): %d requests, outside [%.0f, %.0f]", d.Format(time.DateOnly), d.Weekday(), n, low, high)
		}
	}
	if at := (Workload{From: 22, To: 26}).startIn(day("2026-02-02"), 0.999, 0.999); at.Hour() >= lastStartHour {
		t.Errorf("a request starts at %s, after the last start hour", at.Format(time.TimeOnly))
	}
}

func TestAdmissionStopsACustomerWhoseCreditIsSpent(t *testing.T) {
	at := func(h int) time.Time { return day("2026-02-02").Add(time.Duration(h) * time.Hour) }
	cents := func(c int64) money.Pico { return money.Pico(c) * money.PicoPerCent }
	reqs := []request{{start: at(1), charge: cents(40)}, {start: at(2), charge: cents(40)}, {start: at(3), charge: cents(40)},
		{start: at(5), charge: cents(40)}, {start: at(7), charge: cents(40)}}
	for _, c := range []struct {
		name    string
		opening money.Pico
		moves   []creditMove
		served  []int // the hours of the requests served
	}{
		{"no credit, no purchase", 0, nil, nil},
		{"credit for two and a bit: the third overdraws", cents(90), nil, []int{1, 2, 3}},
		{"a purchase at 4: served from then on", 0, []creditMove{{at(4), cents(100)}}, []int{5, 7}},
		{"a refund at 4 takes back what was left", cents(100), []creditMove{{at(4), -cents(100)}}, []int{1, 2, 3}},
		{"a purchase at the very start of a request counts for it", 0, []creditMove{{at(5), cents(10)}}, []int{5}},
	} {
		var got []int
		for _, r := range admit(money.BigPicoOf(c.opening), c.moves, reqs) {
			got = append(got, r.start.Hour())
		}
		if len(got) != len(c.served) {
			t.Errorf("%s: served %v; want %v", c.name, got, c.served)
			continue
		}
		for i := range got {
			if got[i] != c.served[i] {
				t.Errorf("%s: served %v; want %v", c.name, got, c.served)
				break
			}
		}
	}
}

func TestFailuresComeOnTheirDaysOnceEach(t *testing.T) {
	chat := &Workload{Key: "chat", Stream: true}
	evals := &Workload{Key: "evals"}
	two, one := []offering{{}, {}}, []offering{{}}
	specs := func() []spec {
		return []spec{{w: evals, cands: two}, {w: chat, cands: one}, {w: evals, cands: two}, {w: chat, cands: one}}
	}
	both := day("1970-01-01").AddDate(0, 0, failoverEvery*cancelEvery) // a day of both
	s := specs()
	markFailures(s, both)
	if !s[0].failover || s[2].failover || s[1].failover || !s[1].cancel || s[3].cancel || s[0].cancel {
		t.Errorf("on a day of both: %+v", s)
	}
	s = specs()
	markFailures(s, both.AddDate(0, 0, 1))
	for _, x := range s {
		if x.failover || x.cancel {
			t.Errorf("on an ordinary day: %+v", s)
		}
	}
}
