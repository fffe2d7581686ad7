// Package reliability is each offering's published reliability record: its uptime over the last day and its
// time to first token and throughput over the last half hour, as the gateways recorded its customers' requests
// (docs/reliability.md). It holds the figures' definitions, their windows, the warm-up below which they are not
// shown, and the standing routing orders offerings by; the query that counts them belongs to the owner of the
// gateway's record (requestlog.RequestLog.Reliability). Board keeps the latest figures of every offering in memory,
// refreshed every RefreshEvery, so that a page or a Pick reads them without touching the database.
//
// Every process computes the figures over the same windows, ending at the same instant (WindowAt), from the
// same rows: two gateway replicas, or a gateway and the catalog page, that refreshed in the same period hold
// the same figures. The package owns no table.
package reliability

import (
	"time"
)

// The record's windows and thresholds (docs/reliability.md).
const (
	// Day is the window uptime is computed over.
	Day = 24 * time.Hour
	// Recent is the window time to first token and throughput are computed over.
	Recent = 30 * time.Minute
	// WarmUp is how many requests a figure rests on before it is shown and, for uptime, before routing uses it:
	// successes plus errors in the day for uptime, samples in the half hour for the others.
	WarmUp = 100
	// PreferredPercent: an offering whose uptime is below it is tried after every offering at or above it.
	PreferredPercent = 95
	// FallbackPercent: an offering whose uptime is below it is tried only when no other offering can take the
	// request.
	FallbackPercent = 80
	// RefreshEvery is how often a Board reads the figures again, and the step the windows' end moves by.
	RefreshEvery = 30 * time.Second
	// settle is how far behind now the windows end: the gateway writes its records within a tenth of a second
	// (requestlog.RequestLog), so a window ending a few seconds ago holds all of its records.
	settle = 5 * time.Second
)

// Window is the period a record covers: uptime over [DayFrom, To), the latency figures over [RecentFrom, To).
type Window struct {
	DayFrom    time.Time `json:"day_from"`
	RecentFrom time.Time `json:"recent_from"`
	To         time.Time `json:"to"`
}

// WindowAt is the window of the figures at now: ending at the last multiple of RefreshEvery (counted from the
// Unix epoch) at least settle before now, so that every process refreshing within the same period computes
// over the same rows.
func WindowAt(now time.Time) Window {
	to := now.UTC().Add(-settle).Truncate(RefreshEvery)
	return Window{DayFrom: to.Add(-Day), RecentFrom: to.Add(-Recent), To: to}
}

// Counts is an offering's requests over the day, by how they ended (docs/reliability.md, "What counts"), and its
// latency samples over the half hour, as the gateway's record holds them.
type Counts struct {
	Successes   int64 // answered whole: a 2xx relayed to its end
	Errors      int64 // failed over, broken off, or a server error
	RateLimited int64 // answered 429: counted apart, neither a success nor an error
	// Refused are answers the rig gave the customer as an error of the request (a 4xx other than 429);
	// Canceled are requests whose client went away first. Neither counts.
	Refused  int64
	Canceled int64
	// TTFTSamples and TTFTMs are the streamed successes of the half hour and the P50, P90 and P99 of their
	// times to first token; TPSSamples and TPS those of their throughputs. The percentiles are nil without
	// samples.
	TTFTSamples int64
	TTFTMs      *Percentiles
	TPSSamples  int64
	TPS         *Percentiles
}

// Percentiles are the P50, P90 and P99 of a figure, by nearest rank: the value ranked ceil(p x N) of N.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// Requests is what uptime rests on: successes plus errors.
func (c Counts) Requests() int64 { return c.Successes + c.Errors }

// Uptime is successes over successes plus errors, in percent; ok is false below WarmUp requests.
func (c Counts) Uptime() (percent float64, ok bool) {
	n := c.Requests()
	if n < WarmUp {
		return 0, false
	}
	return 100 * float64(c.Successes) / float64(n), true
}

// Standing is where routing places an offering by its uptime.
type Standing int

const (
	// Preferred: at least PreferredPercent uptime, or not enough traffic yet to tell.
	Preferred Standing = iota
	// Degraded: below PreferredPercent; tried after every preferred offering.
	Degraded
	// Fallback: below FallbackPercent; tried only when no other offering can take the request.
	Fallback
)

// String names the standing as the API shows it.
func (s Standing) String() string {
	switch s {
	case Degraded:
		return "degraded"
	case Fallback:
		return "fallback"
	default:
		return "preferred"
	}
}

// Standing is the offering's standing by its uptime, compared exactly: successes x 100 against the threshold
// times successes plus errors. Below the warm-up it is Preferred: an offering without a record is routed as
// any other.
func (c Counts) Standing() Standing {
	n := c.Requests()
	switch {
	case n < WarmUp:
		return Preferred
	case c.Successes*100 < FallbackPercent*n:
		return Fallback
	case c.Successes*100 < PreferredPercent*n:
		return Degraded
	default:
		return Preferred
	}
}
