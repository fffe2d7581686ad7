package invoicing

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/progress"
)

// A close's marks keep the window and the one report before it, and its pace is told from the
// earliest mark within the window to now.
func TestCloseMarksAndPace(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 0, 10, 0, 0, time.UTC)
	now := start
	r := &closeRun{s: &Service{now: func() time.Time { return now }},
		progress: CloseProgress{Status: CloseRunning, CustomersTotal: 100, ProvidersTotal: 20}}
	// A report a minute, each 4 accounts further, for ten minutes.
	for i := range 11 {
		now = start.Add(time.Duration(i) * time.Minute)
		r.progress.CustomersDone = 4 * i
		r.mark()
	}
	// Kept: 12:04:00 (the one before the window), then 12:05 .. 12:10.
	if n := len(r.progress.Marks); n != 7 || !r.progress.Marks[0].At.Equal(start.Add(4*time.Minute)) {
		t.Fatalf("%d marks from %v, want 7 from the fourth minute", n, r.progress.Marks[0].At)
	}
	// At the last report: from 12:05 (done 20) to 12:10, 20 accounts in 5 minutes; the 80 left
	// take 20 minutes.
	read := r.progress.Reading(now)
	if read.Done != 40 || read.Total != 120 || read.Recent != 20 || read.Span != 5*time.Minute {
		t.Fatalf("reading %+v", read)
	}
	if e := progress.Of(read); e.LeftText() != "about 20 min left" || e.Percent != 33 {
		t.Errorf("estimate %q, %d%%", e.LeftText(), e.Percent)
	}
	// Thirty seconds on with no report, the window starts after 12:05: from 12:06 (done 24),
	// 16 accounts in 4.5 minutes.
	if read := r.progress.Reading(now.Add(30 * time.Second)); read.Recent != 16 || read.Span != 270*time.Second {
		t.Errorf("reading later %+v", read)
	}
	// A close that ended tells no pace.
	r.progress.Status = CloseDone
	if read := r.progress.Reading(now); read.Running || read.Recent != 0 {
		t.Errorf("a close done: %+v", read)
	}
}
