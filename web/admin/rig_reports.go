package admin

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Rig reports: rigs whose agent's own figures disagree with what the gateways measured
// (catalog.Offering.ReportDivergence).

func (s *Server) rigReportsPage(c echo.Context) error {
	list, err := s.catalog.ListDivergent(c.Request().Context())
	if err != nil {
		return err
	}
	rows := make([]templates.RigReportRow, 0, len(list))
	for _, o := range list {
		rows = append(rows, templates.RigReportRow{OfferingID: o.ID, Offering: catalog.Label(o.GPU, o.GPUCount, o.Model, o.Region), Provider: o.ProviderName, Model: o.Model,
			Hardware: fmt.Sprintf("%dx %s", o.GPUCount, o.GPUName), Tier: string(o.Tier),
			Measured: figuresText(o.MeasuredTTFTP99Ms, o.MeasuredTokensPerSec, o.MeasuredRequests),
			Reported: figuresText(o.ReportedTTFTP99Ms, o.ReportedTokensPerSec, o.ReportedRequests), Why: o.ReportDivergence()})
	}
	return s.Render(c, http.StatusOK, templates.RigReports(templates.RigReportsPage{Page: s.Page(c, "Rig reports"), Rows: rows}))
}

// figuresText writes a P99, a throughput and a count of requests as the rig reports page shows them.
func figuresText(p99, tps *float64, requests int64) string {
	out := "P99 —"
	if p99 != nil {
		out = "P99 " + core.FormatMs(*p99)
	}
	if tps != nil {
		out += ", " + strconv.FormatFloat(*tps, 'f', 0, 64) + " tokens/s"
	}
	return out + " over " + strconv.FormatInt(requests, 10) + " requests"
}

// rigReportJSON is a flagged rig as the API shows it.
type rigReportJSON struct {
	catalog.Offering
	Why string `json:"report_divergence"`
}

func (s *Server) apiRigReports(c echo.Context) error {
	list, err := s.catalog.ListDivergent(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]rigReportJSON, 0, len(list))
	for _, o := range list {
		out = append(out, rigReportJSON{Offering: o, Why: o.ReportDivergence()})
	}
	return c.JSON(http.StatusOK, map[string]any{"rigs": out, "count": len(out)})
}
