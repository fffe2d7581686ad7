// Package progress turns how far a long piece of work is (a batch's lines, a month's close, a
// payout run) into what its page shows: the share done and how long the rest should take at the
// pace of the last few minutes (docs/progress.md). It has no state and imports nothing of ours;
// each owner of the work measures it (what is done of how much, and how many items ended in a
// recent window) and hands the figures here.
//
// An estimate is only ever made from items that ended: before enough of them ended over long
// enough, the remaining time is unknown and says so, never a guess.
package progress

import (
	"fmt"
	"math"
	"time"
)

// Window is how far back the pace is measured: long enough to smooth one slow item, short
// enough that a batch that sped up or slowed down is seen within minutes.
const Window = 5 * time.Minute

// The least evidence an estimate is made from: this many items ended over at least this long.
// Fewer, or a shorter span, and the estimate says it is estimating.
const (
	MinItems = 3
	MinSpan  = 20 * time.Second
)

// Reading is how far a piece of work is, as its owner measured it.
type Reading struct {
	Done  int64 // items that ended, whatever their outcome
	Total int64
	// Recent is how many items ended in the last Span; Span is the window the pace is measured
	// over: Window, or less when the work started less than Window ago.
	Recent int64
	Span   time.Duration
	// Running says the work is under way; false once it ended (finished, failed or stopped).
	Running bool
}

// RecentSpan is the span a pace is measured over at now for work that started at started:
// Window, or the time since the start when that is shorter (never negative).
func RecentSpan(started, now time.Time) time.Duration {
	return max(0, min(Window, now.Sub(started)))
}

// Estimate is a Reading as a page shows it.
type Estimate struct {
	Done, Total int64
	Percent     int // of Total done, rounded down; 100 only when all is done
	// PerMinute is items per minute over the recent window; Known says there was enough
	// evidence to tell it, and Left is then the time the rest takes at that pace.
	PerMinute float64
	Left      time.Duration
	Known     bool
	Running   bool
}

// Of estimates a reading.
func Of(r Reading) Estimate {
	e := Estimate{Done: r.Done, Total: r.Total, Running: r.Running}
	if r.Total > 0 {
		e.Percent = int(min(100, 100*max(0, r.Done)/r.Total))
	}
	if !r.Running || r.Recent < MinItems || r.Span < MinSpan {
		return e
	}
	perSecond := float64(r.Recent) / r.Span.Seconds()
	e.PerMinute, e.Known = perSecond*60, true
	if left := r.Total - r.Done; left > 0 {
		e.Left = time.Duration(float64(left) / perSecond * float64(time.Second))
	}
	return e
}

// LeftText says how long the rest takes, in the words the pages use: "estimating…" until the
// pace is known, "done" once the work ended.
func (e Estimate) LeftText() string {
	switch {
	case !e.Running:
		return "done"
	case !e.Known:
		return "estimating…"
	case e.Left < time.Minute:
		return "less than a minute left"
	case e.Left < 90*time.Minute:
		return fmt.Sprintf("about %d min left", int(math.Round(e.Left.Minutes())))
	default:
		return fmt.Sprintf("about %.1f h left", e.Left.Hours())
	}
}

// RateText is the pace, per minute of unit ("12.5 lines a minute"), or "" while unknown.
func (e Estimate) RateText(unit string) string {
	if !e.Known {
		return ""
	}
	return fmt.Sprintf("%.1f %s a minute", e.PerMinute, unit)
}
