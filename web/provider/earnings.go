package provider

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// A provider's earnings: its traffic and what it earned, by day and offering, on the page and in
// the JSON. Each reads only the caller's own account.

func (s *Server) earningsPage(c echo.Context) error {
	q, qerr := s.ReadUsageQuery(c)
	p := templates.EarningsPage{Page: s.Page(c, "Earnings"), Filters: templates.UsageFilters{From: q.From, To: q.To}}
	if fields := core.InvalidFields(qerr); fields != nil {
		p.Filters.Errors = fields
		p.Filters.From, p.Filters.To = c.QueryParam("from"), c.QueryParam("to")
		return s.Render(c, http.StatusUnprocessableEntity, templates.Earnings(p))
	} else if qerr != nil {
		return qerr
	}
	traffic, err := s.usage.ProviderTraffic(c.Request().Context(), core.ProviderAccount(c), q.Filter)
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
	q, err := s.ReadUsageQuery(c)
	if err != nil {
		return err
	}
	traffic, err := s.usage.ProviderTraffic(c.Request().Context(), core.ProviderAccount(c), q.Filter)
	if err != nil {
		return err
	}
	if traffic.Days == nil {
		traffic.Days = []metering.OfferingDay{}
	}
	return c.JSON(http.StatusOK, map[string]any{"from": q.From, "to": q.To, "days": traffic.Days, "total": traffic.Total,
		"unit": "picodollar (1e-12 USD)"})
}
