// Package periods is the calendar that spending limits and budgets reset on: a day, a week or a
// month in UTC, each starting at 00:00 UTC, a week on Monday and a month on its first day
// (docs/budgets.md). It has no state and imports nothing of ours, so that accounts, admission,
// the meter's readers and the budgets can all name a period.
package periods

import (
	"fmt"
	"time"
)

// Period is how often a limit resets.
type Period string

// The periods a limit may have.
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
)

// All are the periods, shortest first.
var All = []Period{Day, Week, Month}

// Parse reads a period's name; "" is a month, the period a limit had before it could choose.
func Parse(s string) (Period, error) {
	switch p := Period(s); p {
	case Day, Week, Month:
		return p, nil
	case "":
		return Month, nil
	}
	return "", fmt.Errorf("periods: %q is no period: choose day, week or month", s)
}

// Valid reports whether p is one of the periods.
func (p Period) Valid() bool { return p == Day || p == Week || p == Month }

// Start is the start of the period that holds t.
func (p Period) Start(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case Day:
		return day
	case Week:
		// Monday is the first day: Go's weekdays count from Sunday.
		return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// End is when the period that holds t ends and the next begins: when a limit of the period resets.
func (p Period) End(t time.Time) time.Time {
	s := p.Start(t)
	switch p {
	case Day:
		return s.AddDate(0, 0, 1)
	case Week:
		return s.AddDate(0, 0, 7)
	}
	return s.AddDate(0, 1, 0)
}

// Adjective is the period as people read it before "limit": daily, weekly, monthly.
func (p Period) Adjective() string {
	switch p {
	case Day:
		return "daily"
	case Week:
		return "weekly"
	}
	return "monthly"
}
