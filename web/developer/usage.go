package developer

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

func (s *Server) usageFilters(c echo.Context, q core.UsageQuery) (templates.UsageFilters, error) {
	f := templates.UsageFilters{From: q.From, To: q.To, Model: q.Filter.Model, Tier: string(q.Filter.Tier)}
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

func (s *Server) usagePage(c echo.Context) error {
	ctx := c.Request().Context()
	q, qerr := s.ReadUsageQuery(c)
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
	page, err := s.usage.Requests(ctx, account, q.Filter)
	if err != nil {
		return err
	}
	totals, err := s.usage.DailyTotals(ctx, account, q.Filter)
	if err != nil {
		return err
	}
	for _, r := range page.Requests {
		ttft, ttftTitle := "—", "No first-token time: the answer was not streamed, or had no output"
		if r.TTFTMillis != nil {
			ttft, ttftTitle = core.FormatMs(*r.TTFTMillis), "Time to the first streamed token"
		}
		p.Requests = append(p.Requests, templates.UsageRequestRow{
			When: core.MomentSeconds(c, r.OccurredAt), RequestID: r.RequestID, Model: r.Model, Tier: string(r.Tier),
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
	v := q.Values()
	p.CSVURL = "/usage.csv?" + v.Encode()
	if q.Filter.Before != "" {
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
	q, err := s.ReadUsageQuery(c)
	if err != nil {
		return err
	}
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	res.Header().Set(echo.HeaderContentDisposition,
		fmt.Sprintf(`attachment; filename="gpumarket-usage-%s-to-%s.csv"`, q.From, q.To))
	// An export of many months may take longer than the server's timeouts: it extends its own
	// deadlines while it writes (web/internal/httpx).
	out, err := httpx.NewDeadlineWriter(res, httpx.ExportWindow)
	if err != nil {
		return err
	}
	res.WriteHeader(http.StatusOK)
	sess, _ := core.CurrentSession(c)
	if err := s.usage.ExportCSV(c.Request().Context(), sess.User.AccountID, q.Filter, out); err != nil {
		// The status is sent: the client sees a cut-off file, the log sees why.
		s.Log.Error("usage export failed", "path", c.Path(),
			"request_id", res.Header().Get(echo.HeaderXRequestID), "err", err)
	}
	return nil
}

func (s *Server) apiUsage(c echo.Context) error {
	ctx := c.Request().Context()
	q, err := s.ReadUsageQuery(c)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	account := sess.User.AccountID
	page, err := s.usage.Requests(ctx, account, q.Filter)
	if err != nil {
		return err
	}
	totals, err := s.usage.DailyTotals(ctx, account, q.Filter)
	if err != nil {
		return err
	}
	if page.Requests == nil {
		page.Requests = []metering.RequestRecord{}
	}
	if totals.Days == nil {
		totals.Days = []metering.DailyTotal{}
	}
	return c.JSON(http.StatusOK, map[string]any{"from": q.From, "to": q.To, "requests": page.Requests,
		"next": page.Next, "totals": totals, "unit": "picodollar (1e-12 USD)"})
}
