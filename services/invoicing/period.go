package invoicing

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// Period is a calendar month in UTC, [start, end): what an invoice or a statement covers. A
// request belongs to the period of the instant it finished (its usage event's time), a ledger
// transaction to the period of its occurred_at. The zero Period is no period.
type Period struct {
	start time.Time // the first instant, 00:00:00.000 UTC on the 1st
}

// PeriodOf is the period holding t.
func PeriodOf(t time.Time) Period {
	t = t.UTC()
	return Period{start: time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)}
}

// MonthPeriod is the period of the month and year.
func MonthPeriod(year int, month time.Month) Period {
	return Period{start: time.Date(year, month, 1, 0, 0, 0, 0, time.UTC)}
}

// ParsePeriod reads a period written YYYY-MM, as String writes it.
func ParsePeriod(s string) (Period, error) {
	t, err := time.Parse("2006-01", s)
	if err != nil || t.Year() < 2000 || t.Year() > 9999 {
		return Period{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"period": fmt.Sprintf("Write the month as YYYY-MM, like 2026-03; %.20q is not one.", s)}}
	}
	return Period{start: t}, nil
}

// IsZero reports whether p is no period.
func (p Period) IsZero() bool { return p.start.IsZero() }

// Start is the period's first instant.
func (p Period) Start() time.Time { return p.start }

// End is the first instant after the period: the start of the next one.
func (p Period) End() time.Time { return p.start.AddDate(0, 1, 0) }

// Next is the period after p.
func (p Period) Next() Period { return Period{start: p.End()} }

// Prev is the period before p.
func (p Period) Prev() Period { return Period{start: p.start.AddDate(0, -1, 0)} }

// Contains reports whether t falls in the period.
func (p Period) Contains(t time.Time) bool { return !t.Before(p.start) && t.Before(p.End()) }

// Before reports whether p comes before q.
func (p Period) Before(q Period) bool { return p.start.Before(q.start) }

// String writes the period as YYYY-MM.
func (p Period) String() string {
	if p.IsZero() {
		return ""
	}
	return p.start.Format("2006-01")
}

// Label writes the period for a document: "March 2026".
func (p Period) Label() string { return p.start.Format("January 2006") }

// lockKey is the period as the key of the close's advisory lock.
func (p Period) lockKey() int32 { return int32(p.start.Year()*100 + int(p.start.Month())) }

// MarshalJSON writes the period as "YYYY-MM", or null for no period.
func (p Period) MarshalJSON() ([]byte, error) {
	if p.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(p.String())
}

// UnmarshalJSON reads "YYYY-MM".
func (p *Period) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	q, err := ParsePeriod(s)
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// periodOfDate is the period of a date column read back (midnight UTC on the 1st).
func periodOfDate(t time.Time) Period { return PeriodOf(t) }
