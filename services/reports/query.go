package reports

import (
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// DefaultDays is the period a report covers when no dates are given: the last 30 UTC days,
// today included.
const DefaultDays = 30

// MaxDays bounds a report's period, so that one request reads at most a few years of an
// account's rollups.
const MaxDays = 3*366 + 1

const dateLayout = "2006-01-02"

// ParseQuery reads a report's query as the pages and the API take it: from and to are UTC
// dates (YYYY-MM-DD), both included; group is "day" or "month". Without dates the report is
// the last DefaultDays days to today; without a group, by day. The period is widened to whole
// periods of the group (a month report from 2026-03-15 starts on 2026-03-01), so that every
// row covers a whole day or month and a month row can be set beside that month's invoice.
// Every bad value is named in the error (services.FieldErrors).
func ParseQuery(from, to, group string, now time.Time) (Query, error) {
	fe := services.FieldErrors{}
	date := func(field, v string) (time.Time, bool) {
		v = strings.TrimSpace(v)
		if v == "" {
			return time.Time{}, false
		}
		d, err := time.Parse(dateLayout, v)
		if err != nil {
			fe.Add(field, "Enter a date as YYYY-MM-DD, like 2026-11-30.")
			return time.Time{}, false
		}
		return d, true
	}
	q := Query{Group: Group(strings.TrimSpace(group))}
	switch q.Group {
	case "":
		q.Group = GroupDay
	case GroupDay, GroupMonth:
	default:
		fe.Add("group", "Group by day or month.")
	}
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	first, fromSet := date("from", from)
	last, toSet := date("to", to)
	if !toSet {
		last = today
		if fromSet && first.After(today) {
			last = first
		}
	}
	if !fromSet {
		first = last.AddDate(0, 0, -(DefaultDays - 1))
	}
	if last.Before(first) {
		fe.Add("to", "End on or after the start date.")
	} else if last.Sub(first) > MaxDays*24*time.Hour {
		fe.Add("to", "Ask for at most three years at a time.")
	}
	if err := fe.Err(); err != nil {
		return Query{}, err
	}
	q.From, q.To = first, last.AddDate(0, 0, 1)
	if q.Group == GroupMonth {
		q.From = monthStart(q.From)
		if m := monthStart(q.To); !m.Equal(q.To) {
			q.To = m.AddDate(0, 1, 0)
		}
	}
	return q, nil
}

func monthStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Validate checks a query made without ParseQuery: whole periods of a known group.
func (q Query) Validate() error {
	fe := services.FieldErrors{}
	if q.Group != GroupDay && q.Group != GroupMonth {
		fe.Add("group", "Group by day or month.")
	}
	if !q.To.After(q.From) {
		fe.Add("to", "End after the start.")
	}
	whole := func(t time.Time) bool {
		t = t.UTC()
		if q.Group == GroupMonth {
			return t.Equal(monthStart(t))
		}
		return t.Equal(t.Truncate(24 * time.Hour))
	}
	if !whole(q.From) {
		fe.Add("from", "Start on the first hour of a day (of a month, by month).")
	}
	if !whole(q.To) {
		fe.Add("to", "End on the first hour of a day (of a month, by month).")
	}
	return fe.Err()
}

// trunc is the argument of PostgreSQL's date_trunc for the group.
func (q Query) trunc() string {
	if q.Group == GroupMonth {
		return "month"
	}
	return "day"
}
