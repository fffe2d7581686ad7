package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// usageDays is the period the usage pages show when no dates are given: the last 30 UTC
// days, today included.
const usageDays = 30

// usageQuery is a usage request's filters: the filter the reports take, and the dates as
// the pages and the API show them.
type usageQuery struct {
	filter   metering.UsageFilter
	from, to string // UTC dates, both days included
}

// values is the query string that asks for the same selection, without paging.
func (q usageQuery) values() url.Values {
	v := url.Values{"from": {q.from}, "to": {q.to}}
	if q.filter.Model != "" {
		v.Set("model", q.filter.Model)
	}
	if q.filter.Tier != "" {
		v.Set("tier", string(q.filter.Tier))
	}
	return v
}

// readUsageQuery reads the filters of the usage pages, the API and the exports from the query
// string: from and to are UTC dates, both included (without them the last usageDays days);
// model, tier; limit and before page the request list. Every bad value is named in the error.
func (s *Server) readUsageQuery(c echo.Context) (usageQuery, error) {
	fe := services.FieldErrors{}
	date := func(field string) (time.Time, bool) {
		v := strings.TrimSpace(c.QueryParam(field))
		if v == "" {
			return time.Time{}, false
		}
		d, err := time.Parse(core.DateLayout, v)
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
		from = to.AddDate(0, 0, -(usageDays - 1))
	}
	q := usageQuery{from: from.Format(core.DateLayout), to: to.Format(core.DateLayout), filter: metering.UsageFilter{
		From: from, To: to.AddDate(0, 0, 1), Model: strings.TrimSpace(c.QueryParam("model")),
		Tier: catalog.Tier(c.QueryParam("tier")), Before: metering.UsageCursor(c.QueryParam("before")),
	}}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fe.Add("limit", fmt.Sprintf("Ask for 1 to %d requests a page.", metering.MaxUsageLimit))
		}
		q.filter.Limit = n
	}
	if toSet && to.Before(from) {
		fe.Add("to", "End on or after the start date.")
	}
	var ae *services.Error
	if err := q.filter.Validate(); errors.As(err, &ae) {
		for field, problem := range ae.Fields {
			fe.Add(field, problem)
		}
	} else if err != nil {
		return q, err
	}
	return q, fe.Err()
}

func (s *Server) usageFilters(c echo.Context, q usageQuery) (templates.UsageFilters, error) {
	f := templates.UsageFilters{From: q.from, To: q.to, Model: q.filter.Model, Tier: string(q.filter.Tier)}
	models, err := s.catalog.Models(c.Request().Context())
	if err != nil {
		return f, err
	}
	if f.Model != "" && !slices.Contains(models, f.Model) {
		// A model no rig serves any longer still has its usage.
		models = append(models, f.Model)
	}
	for _, m := range models {
		f.Models = append(f.Models, templates.Option{Value: m, Label: m})
	}
	return f, nil
}

// Developer's usage.

func (s *Server) usagePage(c echo.Context) error {
	ctx := c.Request().Context()
	q, qerr := s.readUsageQuery(c)
	filters, err := s.usageFilters(c, q)
	if err != nil {
		return err
	}
	p := templates.UsagePage{Page: s.Page(c, "Usage"), Filters: filters}
	if fields := core.InvalidFields(qerr); fields != nil {
		p.Filters.Errors = fields
		// The values as typed, not the defaults put in their place.
		p.Filters.From, p.Filters.To, p.Filters.Tier = c.QueryParam("from"), c.QueryParam("to"), c.QueryParam("tier")
		return s.Render(c, http.StatusUnprocessableEntity, templates.Usage(p))
	} else if qerr != nil {
		return qerr
	}
	sess, _ := core.CurrentSession(c)
	account := sess.User.AccountID
	page, err := s.usage.Requests(ctx, account, q.filter)
	if err != nil {
		return err
	}
	totals, err := s.usage.DailyTotals(ctx, account, q.filter)
	if err != nil {
		return err
	}
	for _, r := range page.Requests {
		ttft, ttftTitle := "—", "No first-token time: the answer was not streamed, or had no output"
		if r.TTFTMillis != nil {
			ttft, ttftTitle = core.FormatMs(*r.TTFTMillis), "Time to the first streamed token"
		}
		p.Requests = append(p.Requests, templates.UsageRequestRow{
			When: r.OccurredAt.Format("2006-01-02 15:04:05"), RequestID: r.RequestID, Model: r.Model, Tier: string(r.Tier),
			Hardware: fmt.Sprintf("%dx %s", r.GPUCount, r.GPUName), Provider: r.Provider, Offering: r.OfferingID,
			TokensIn: money.FormatCount(r.InputTokens), TokensCached: money.FormatCount(r.CachedInputTokens),
			TokensOut: money.FormatCount(r.OutputTokens), TTFT: ttft, TTFTTitle: ttftTitle, Duration: core.FormatMs(r.DurationMillis), Cost: money.FormatPrecisePico(r.Cost), Status: string(r.Status),
			BatchID: r.BatchID,
		})
	}
	for _, d := range totals.Days {
		p.Days = append(p.Days, usageTotalRow(d.Day, string(d.Tier), d.UsageSum))
	}
	p.Total = usageTotalRow("", "", totals.Total)
	v := q.values()
	p.CSVURL = "/usage.csv?" + v.Encode()
	if q.filter.Before != "" {
		p.FirstPage = "/usage?" + v.Encode()
	}
	if page.Next != "" {
		v.Set("before", string(page.Next))
		p.NextPage = "/usage?" + v.Encode()
	}
	return s.Render(c, http.StatusOK, templates.Usage(p))
}

func usageTotalRow(day, tier string, sum metering.UsageSum) templates.UsageTotalRow {
	return templates.UsageTotalRow{Day: day, Tier: tier, Requests: money.FormatCount(sum.Requests),
		TokensIn: money.FormatCount(sum.InputTokens), TokensCached: money.FormatCount(sum.CachedInputTokens),
		TokensOut: money.FormatCount(sum.OutputTokens), Cost: money.FormatBigCents(sum.Cost)}
}

// usageCSV exports the filtered requests, all of them, as a CSV attachment: the page's
// export link and the API's.
func (s *Server) usageCSV(c echo.Context) error {
	q, err := s.readUsageQuery(c)
	if err != nil {
		return err
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	res.Header().Set(echo.HeaderContentDisposition,
		fmt.Sprintf(`attachment; filename="gpumarket-usage-%s-to-%s.csv"`, q.from, q.to))
	// An export of many months may take longer than the server's timeouts: it extends its own
	// deadlines while it writes (deadlines.go).
	out, err := httpx.NewDeadlineWriter(res, httpx.ExportWindow)
	if err != nil {
		return err
	}
	res.WriteHeader(http.StatusOK)
	sess, _ := core.CurrentSession(c)
	if err := s.usage.ExportCSV(c.Request().Context(), sess.User.AccountID, q.filter, out); err != nil {
		// The status is sent: the client sees a cut-off file, the log sees why.
		s.Log.Error("usage export failed", "path", c.Path(),
			"request_id", res.Header().Get(echo.HeaderXRequestID), "err", err)
	}
	return nil
}

func (s *Server) apiUsage(c echo.Context) error {
	ctx := c.Request().Context()
	q, err := s.readUsageQuery(c)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	account := sess.User.AccountID
	page, err := s.usage.Requests(ctx, account, q.filter)
	if err != nil {
		return err
	}
	totals, err := s.usage.DailyTotals(ctx, account, q.filter)
	if err != nil {
		return err
	}
	if page.Requests == nil {
		page.Requests = []metering.RequestRecord{}
	}
	if totals.Days == nil {
		totals.Days = []metering.DailyTotal{}
	}
	return c.JSON(http.StatusOK, map[string]any{"from": q.from, "to": q.to, "requests": page.Requests,
		"next": page.Next, "totals": totals, "unit": "picodollar (1e-12 USD)"})
}

// Provider's earnings.

func (s *Server) earningsPage(c echo.Context) error {
	q, qerr := s.readUsageQuery(c)
	p := templates.EarningsPage{Page: s.Page(c, "Earnings"), Filters: templates.UsageFilters{From: q.from, To: q.to}}
	if fields := core.InvalidFields(qerr); fields != nil {
		p.Filters.Errors = fields
		p.Filters.From, p.Filters.To = c.QueryParam("from"), c.QueryParam("to")
		return s.Render(c, http.StatusUnprocessableEntity, templates.Earnings(p))
	} else if qerr != nil {
		return qerr
	}
	traffic, err := s.usage.ProviderTraffic(c.Request().Context(), core.ProviderAccount(c), q.filter)
	if err != nil {
		return err
	}
	for _, d := range traffic.Days {
		row := earningsRow(d.TrafficSum)
		row.Day, row.Offering, row.Model = d.Day, d.OfferingID, d.Model
		row.Hardware = fmt.Sprintf("%dx %s", d.GPUCount, d.GPUName)
		p.Days = append(p.Days, row)
	}
	p.Total = earningsRow(traffic.Total)
	return s.Render(c, http.StatusOK, templates.Earnings(p))
}

func earningsRow(sum metering.TrafficSum) templates.EarningsRow {
	return templates.EarningsRow{Requests: money.FormatCount(sum.Requests), TokensIn: money.FormatCount(sum.InputTokens),
		TokensOut: money.FormatCount(sum.OutputTokens), Earn: money.FormatBigCents(sum.Earned)}
}

func (s *Server) apiEarnings(c echo.Context) error {
	q, err := s.readUsageQuery(c)
	if err != nil {
		return err
	}
	traffic, err := s.usage.ProviderTraffic(c.Request().Context(), core.ProviderAccount(c), q.filter)
	if err != nil {
		return err
	}
	if traffic.Days == nil {
		traffic.Days = []metering.OfferingDay{}
	}
	return c.JSON(http.StatusOK, map[string]any{"from": q.from, "to": q.to, "days": traffic.Days, "total": traffic.Total,
		"unit": "picodollar (1e-12 USD)"})
}
