package admin

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Discrepancies: requests whose usage as the gateway saw it differs from what was metered.

func (s *Server) discrepancies(c echo.Context) ([]requestlog.Discrepancy, error) {
	if s.requests == nil {
		return []requestlog.Discrepancy{}, nil
	}
	return s.requests.Discrepancies(c.Request().Context(), 200)
}

func (s *Server) apiDiscrepancies(c echo.Context) error {
	list, err := s.discrepancies(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"discrepancies": list, "count": len(list)})
}

// discrepanciesPage lists flagged requests for an admin to review.
func (s *Server) discrepanciesPage(c echo.Context) error {
	list, err := s.discrepancies(c)
	if err != nil {
		return err
	}
	tokens := func(n *int64) string {
		if n == nil {
			return "-"
		}
		return strconv.FormatInt(*n, 10)
	}
	ids := make([]string, 0, len(list))
	for _, d := range list {
		ids = append(ids, d.OfferingID)
	}
	labels, err := s.offeringLabels(c, ids)
	if err != nil {
		return err
	}
	p := templates.DiscrepanciesPage{Page: s.Page(c, "Discrepancies")}
	for _, d := range list {
		p.Rows = append(p.Rows, templates.DiscrepancyRow{Flagged: core.MomentSeconds(c, d.FlaggedAt), RequestID: d.RequestID,
			OfferingID: d.OfferingID, Offering: labelOr(labels, d.OfferingID), Tier: string(d.Tier), Model: d.Model,
			Seen: tokens(d.InputTokens) + " / " + tokens(d.OutputTokens), Reported: tokens(d.ReportedInput) + " / " + tokens(d.ReportedOutput),
			Metered: tokens(d.MeteredInput) + " / " + tokens(d.MeteredOutput), Excess: tokens(d.ExcessInput) + " / " + tokens(d.ExcessOutput),
			Flag: d.MeterFlag, Reason: d.Reason})
	}
	return s.Render(c, http.StatusOK, templates.Discrepancies(p))
}

// offeringLabels names the offerings of ids (catalog.Label); none without a catalog.
func (s *Server) offeringLabels(c echo.Context, ids []string) (map[string]string, error) {
	if s.catalog == nil {
		return map[string]string{}, nil
	}
	return s.catalog.LabelsByID(c.Request().Context(), ids)
}

// labelOr is the label of id, or "—" for an offering with none (a request no rig served).
func labelOr(labels map[string]string, id string) string {
	if l, ok := labels[id]; ok {
		return l
	}
	if id == "" {
		return "—"
	}
	return "unknown offering"
}
