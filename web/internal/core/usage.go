package core

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
)

// UsageDays is the period the usage pages show when no dates are given: the last 30 UTC
// days, today included.
const UsageDays = 30

// UsageQuery is a usage request's filters: the filter the reports take, and the dates as
// the pages and the API show them.
type UsageQuery struct {
	Filter   metering.UsageFilter
	From, To string // UTC dates, both days included
}

// Values is the query string that asks for the same selection, without paging.
func (q UsageQuery) Values() url.Values {
	v := url.Values{"from": {q.From}, "to": {q.To}}
	if q.Filter.Model != "" {
		v.Set("model", q.Filter.Model)
	}
	if q.Filter.Tier != "" {
		v.Set("tier", string(q.Filter.Tier))
	}
	return v
}

// ReadUsageQuery reads the filters of the usage pages, the API and the exports from the query
// string: from and to are UTC dates, both included (without them the last UsageDays days);
// model, tier; limit and before page the request list. Every bad value is named in the error.
func (s *Core) ReadUsageQuery(c echo.Context) (UsageQuery, error) {
	fe := services.FieldErrors{}
	date := func(field string) (time.Time, bool) {
		v := strings.TrimSpace(c.QueryParam(field))
		if v == "" {
			return time.Time{}, false
		}
		d, err := time.Parse(DateLayout, v)
		if err != nil {
			fe.Add(field, "Enter a date as YYYY-MM-DD, like 2026-11-30.")
			return time.Time{}, false
		}
		return d, true
	}
	now := s.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	from, fromSet := date("from")
	to, toSet := date("to")
	switch {
	case !toSet && fromSet && from.After(today):
		to = from
	case !toSet:
		to = today
	}
	if !fromSet {
		from = to.AddDate(0, 0, -(UsageDays - 1))
	}
	q := UsageQuery{From: from.Format(DateLayout), To: to.Format(DateLayout), Filter: metering.UsageFilter{
		From: from, To: to.AddDate(0, 0, 1), Model: strings.TrimSpace(c.QueryParam("model")),
		Tier: catalog.Tier(c.QueryParam("tier")), Before: metering.UsageCursor(c.QueryParam("before")),
	}}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fe.Add("limit", fmt.Sprintf("Ask for 1 to %d requests a page.", metering.MaxUsageLimit))
		}
		q.Filter.Limit = n
	}
	if toSet && to.Before(from) {
		fe.Add("to", "End on or after the start date.")
	}
	var ae *services.Error
	if err := q.Filter.Validate(); errors.As(err, &ae) {
		for field, problem := range ae.Fields {
			fe.Add(field, problem)
		}
	} else if err != nil {
		return q, err
	}
	return q, fe.Err()
}
