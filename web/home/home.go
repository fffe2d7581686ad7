// Package home is the first page after logging in, /home: one route whose panels depend on
// who is signed in and the account in use. A customer's member sees the balance, this month's
// spend against last month's, the savings and footprint of this month's tokens, the alerts to
// act on and, while the account is new, the steps to a first call; a provider's member sees
// its rigs, this month's earnings and the next payout; the platform's finance sees its work
// waiting and the month's close; its admins see what they watch and the finance panel too
// (docs/home.md).
//
// Every figure is read through its owning package's functions, scoped to the account in use,
// and written as the pages that own it write it. It imports web/internal/core and the
// services, never another audience's package nor web.
package home

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// ReportSource is what the home needs of services/reports: this month's savings, energy and
// carbon. *reports.Service is one.
type ReportSource interface {
	Savings(ctx context.Context, accountID string, q reports.Query) (reports.Savings, error)
	Carbon(ctx context.Context, accountID string, q reports.Query) (reports.Carbon, error)
}

// Config is what the homes read beside the core's accounts and payments. A nil service leaves
// out the panel or the count it gives.
type Config struct {
	Catalog   *catalog.Service
	Usage     *metering.Reports
	Reports   ReportSource
	Budgets   *budgets.Service
	Invoicing *invoicing.Service
	Batches   *batch.Service
	Requests  *requestlog.RequestLog
}

// Server serves the home.
type Server struct {
	*core.Core
	cfg Config
}

// New builds the home over the shared core.
func New(c *core.Core, cfg Config) *Server { return &Server{Core: c, cfg: cfg} }

// Routes registers /home on e.
func (s *Server) Routes(e *echo.Echo) {
	s.Mount(e).GET(core.HomePath, s.homePage)
}

// homePage shows the home of the account in use, or of the platform's role.
func (s *Server) homePage(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	now := s.Now().UTC()
	p := templates.UserHomePage{Page: s.Page(c, "Home"), Heading: sess.Account.Name}
	var err error
	switch {
	case sess.User.Role == accounts.RoleFinance || sess.User.Role == accounts.RoleAdmin:
		p.Heading = "Finance"
		if sess.User.Role == accounts.RoleAdmin {
			p.Heading = "Administration"
			if p.Admin, err = s.adminHome(ctx, now); err != nil {
				return err
			}
		}
		if p.Finance, err = s.financeHome(ctx, now, core.Zone(c)); err != nil {
			return err
		}
	case sess.Account.Kind == accounts.KindProvider:
		if p.Provider, err = s.providerHome(ctx, sess.Account.ID, now, core.Zone(c)); err != nil {
			return err
		}
	default:
		if p.Customer, err = s.customerHome(c, sess, now); err != nil {
			return err
		}
	}
	return s.Render(c, http.StatusOK, templates.UserHome(p))
}

// monthSoFar is this month from its first hour to the end of now's hour, and last month from
// its first hour over as long (to its end at most): the two spans the home sets side by side.
// Usage is kept per hour, so the spans end on a whole hour.
func monthSoFar(now time.Time) (from, to, lastFrom, lastTo time.Time) {
	now = now.UTC()
	from = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	to = now.Truncate(time.Hour).Add(time.Hour)
	lastFrom = from.AddDate(0, -1, 0)
	lastTo = lastFrom.Add(to.Sub(from))
	if lastTo.After(from) {
		lastTo = from
	}
	return from, to, lastFrom, lastTo
}

// spanText writes a span of hours in UTC: "1 Dec 00:00 to 6 Dec 15:00 UTC".
func spanText(from, to time.Time) string {
	return from.UTC().Format("2 Jan 15:04") + " to " + to.UTC().Format("2 Jan 15:04") + " UTC"
}

// minuteText writes a moment to the minute in the reader's zone, with the zone: "14:05 UTC on 4
// Dec 2026", "15:05 CET on 4 Dec 2026".
func minuteText(loc *time.Location, t time.Time) string {
	return core.MomentIn(loc, t, "15:04") + " on " + t.In(loc).Format("2 Jan 2006")
}
