package developer

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The savings and carbon reports as JSON, for the signed-in customer's own account: from and
// to are UTC dates, both included (the last 30 days without them), group is day or month.
// Money is in picodollars, as in /api/usage; every report and row names its method version
// (docs/methodology.md).

// reportQuery reads a report's query; a bad value is a 400 naming the field.
func (s *Server) reportQuery(c echo.Context) (reports.Query, error) {
	if s.reports == nil {
		return reports.Query{}, services.Errorf(services.CodeUnavailable, "Reports are not available here.")
	}
	q, err := reports.ParseQuery(c.QueryParam("from"), c.QueryParam("to"), c.QueryParam("group"), s.Now())
	var ae *services.Error
	if errors.As(err, &ae) && ae.Code == services.CodeInvalid {
		return q, c.JSON(http.StatusBadRequest, core.APIError{Error: core.APIErrorBody{Code: string(ae.Code), Message: ae.Message, Fields: ae.Fields}})
	}
	return q, err
}

func (s *Server) apiSavings(c echo.Context) error {
	q, err := s.reportQuery(c)
	if err != nil || c.Response().Committed {
		return err
	}
	sess, _ := core.CurrentSession(c)
	out, err := s.reports.Savings(c.Request().Context(), sess.User.AccountID, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, struct {
		reports.Savings
		Unit string `json:"unit"`
	}{out, "picodollar (1e-12 USD)"})
}

func (s *Server) apiCarbon(c echo.Context) error {
	q, err := s.reportQuery(c)
	if err != nil || c.Response().Committed {
		return err
	}
	sess, _ := core.CurrentSession(c)
	out, err := s.reports.Carbon(c.Request().Context(), sess.User.AccountID, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
