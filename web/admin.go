package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
)

func (s *Server) usersPage(c echo.Context) error {
	users, err := s.accounts.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	rows := make([]templates.UserRow, 0, len(users))
	for _, u := range users {
		rows = append(rows, templates.UserRow{ID: u.ID, Email: u.Email, Role: string(u.Role), AccountID: u.AccountID,
			Created: u.CreatedAt.UTC().Format("2006-01-02")})
	}
	return s.render(c, http.StatusOK, templates.Users(templates.UsersPage{Page: s.page(c, "Users"), Users: rows, Roles: roleNames()}))
}

func (s *Server) grantRoleSubmit(c echo.Context) error {
	sess, _ := currentSession(c)
	if err := s.accounts.GrantRole(c.Request().Context(), sess.User, c.Param("id"), accounts.Role(c.FormValue("role"))); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?flash=role-set")
}

func (s *Server) apiUsers(c echo.Context) error {
	users, err := s.accounts.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"users": users})
}

func (s *Server) apiGrantRole(c echo.Context) error {
	var in struct {
		Role accounts.Role `json:"role"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	sess, _ := currentSession(c)
	if err := s.accounts.GrantRole(c.Request().Context(), sess.User, c.Param("id"), in.Role); err != nil {
		return err
	}
	u, err := s.accounts.UserByID(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

// Rig reports: rigs whose agent's own figures disagree with what the gateways measured
// (catalog.Offering.ReportDivergence).

func (s *Server) rigReportsPage(c echo.Context) error {
	list, err := s.catalog.ListDivergent(c.Request().Context())
	if err != nil {
		return err
	}
	rows := make([]templates.RigReportRow, 0, len(list))
	for _, o := range list {
		rows = append(rows, templates.RigReportRow{OfferingID: o.ID, Provider: o.ProviderName, Model: o.Model,
			Hardware: fmt.Sprintf("%dx %s", o.GPUCount, o.GPUName), Tier: string(o.Tier),
			Measured: figuresText(o.MeasuredTTFTP99Ms, o.MeasuredTokensPerSec, o.MeasuredRequests),
			Reported: figuresText(o.ReportedTTFTP99Ms, o.ReportedTokensPerSec, o.ReportedRequests), Why: o.ReportDivergence()})
	}
	return s.render(c, http.StatusOK, templates.RigReports(templates.RigReportsPage{Page: s.page(c, "Rig reports"), Rows: rows}))
}

// figuresText writes a P99, a throughput and a count of requests as the rig reports page shows them.
func figuresText(p99, tps *float64, requests int64) string {
	out := "P99 —"
	if p99 != nil {
		out = "P99 " + formatMs(*p99)
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
