package ledger

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The usage events the meter refused, and why.

func (s *Server) rejectionsPage(c echo.Context) error {
	reason := c.QueryParam("reason")
	report, err := s.usage.Rejections(c.Request().Context(), reason, 200)
	if err != nil {
		return err
	}
	p := templates.RejectionsPage{Page: s.Page(c, "Rejected usage events"), Reason: reason}
	for _, rc := range report.ByReason {
		p.Counts = append(p.Counts, templates.Option{Value: rc.Reason, Label: strconv.FormatInt(rc.Count, 10)})
	}
	ids := make([]string, 0, len(report.ByRig))
	for _, g := range report.ByRig {
		ids = append(ids, g.OfferingID)
	}
	labels := map[string]string{}
	if s.catalog != nil {
		if labels, err = s.catalog.LabelsByID(c.Request().Context(), ids); err != nil {
			return err
		}
	}
	for _, g := range report.ByRig {
		p.Rigs = append(p.Rigs, templates.RigRejectionRow{Provider: g.ProviderName, ProviderID: g.ProviderID,
			OfferingID: g.OfferingID, Offering: labels[g.OfferingID], Reason: g.Reason, Count: strconv.FormatInt(g.Count, 10),
			Samples: strconv.FormatInt(g.Samples, 10), Last: core.MomentSeconds(c, g.LastAt)})
	}
	for _, ev := range report.Samples {
		p.Events = append(p.Events, templates.RejectionRow{Seq: strconv.FormatInt(ev.StreamSeq, 10),
			Received: core.MomentSeconds(c, ev.ReceivedAt), Subject: ev.Subject, EventID: ev.EventID,
			Reason: ev.Reason, Detail: ev.Detail, Raw: ev.Raw})
	}
	return s.Render(c, http.StatusOK, templates.Rejections(p))
}

func (s *Server) apiRejections(c echo.Context) error {
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	report, err := s.usage.Rejections(c.Request().Context(), c.QueryParam("reason"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, report)
}
