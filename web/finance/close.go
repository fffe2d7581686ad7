package finance

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/progress"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Closing a month from a page or the API (see docs/invoicing.md, "Pages and API"). A close of
// many accounts outlasts a request, so it runs on its own: the request waits a little for it,
// then answers with the close as it stands, and the close's page follows it while it runs: its
// progress block in place (docs/progress.md), or by reloading itself without scripts.

// closeWait is how long a request that starts a close waits for it to end before answering
// that it runs; closeRefresh how often the close's page reloads itself meanwhile when scripts
// do not run.
const (
	closeWait    = 3 * time.Second
	closeRefresh = 2
)

// startClose starts the period's close by the user and returns it as it stands once it ended
// or closeWait passed, whichever comes first: done, failed, or running. A close that cannot
// start (a period that has not ended, a close of it already running) is that error. The close
// goes on when the request ends; a close cut off by the process stopping reads as failed and
// is completed by closing again.
func (s *Server) startClose(ctx context.Context, p invoicing.Period, by string) (invoicing.CloseProgress, error) {
	type outcome struct {
		pr  invoicing.CloseProgress
		err error
	}
	done := make(chan outcome, 1)
	started := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var latest invoicing.CloseProgress
	// The close outlives the request, not the server (Server.Close).
	closeCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopWithServer := context.AfterFunc(s.background, stop)
	s.closes.Go(func() {
		defer stop()
		defer stopWithServer()
		pr, err := s.invoicing.Close(closeCtx, invoicing.CloseInput{Period: p, By: by,
			Progress: func(pr invoicing.CloseProgress) {
				mu.Lock()
				latest = pr
				mu.Unlock()
				once.Do(func() { close(started) })
			}})
		if err != nil && services.ErrorCode(err) != services.CodeInvalid && services.ErrorCode(err) != services.CodeConflict {
			s.Log.Error("close failed", "period", p.String(), "err", err)
		}
		done <- outcome{pr, err}
	})
	timer := time.NewTimer(closeWait)
	defer timer.Stop()
	select {
	case o := <-done:
		return o.pr, o.err
	case <-timer.C:
	}
	// Still running: answer once the close has recorded its start, so that its page finds it
	// (or once the client is gone; the close goes on).
	select {
	case o := <-done:
		return o.pr, o.err
	case <-started:
		mu.Lock()
		defer mu.Unlock()
		return latest, nil
	case <-ctx.Done():
		return invoicing.CloseProgress{}, ctx.Err()
	}
}

// lastMonth is the period a close form suggests: the month before this one.
func (s *Server) lastMonth() invoicing.Period { return invoicing.PeriodOf(s.Now()).Prev() }

func (s *Server) closePage(c echo.Context) error {
	return s.renderClose(c, http.StatusOK, templates.Form{Values: map[string]string{"period": s.lastMonth().String()}})
}

func (s *Server) renderClose(c echo.Context, status int, form templates.Form) error {
	ctx := c.Request().Context()
	p := templates.ClosePage{Page: s.Page(c, "Close a month"), Form: form}
	if v := c.QueryParam("period"); v != "" {
		period, err := invoicing.ParsePeriod(v)
		if err != nil {
			return err
		}
		pr, err := s.invoicing.CloseProgressOf(ctx, period)
		if err != nil {
			return err
		}
		view := closeView(core.Zone(c), pr)
		p.Current, p.Progress = &view, s.closeProgressView(pr)
		if view.Running {
			p.Refresh = closeRefresh
		}
		if form.Values == nil || form.Values["period"] == "" {
			p.Form.Values = map[string]string{"period": period.String()}
		}
	}
	closes, err := s.invoicing.Closes(ctx, 24)
	if err != nil {
		return err
	}
	for _, pr := range closes {
		p.Closes = append(p.Closes, closeView(core.Zone(c), pr))
	}
	return s.Render(c, status, templates.Close(p))
}

func closeView(loc *time.Location, pr invoicing.CloseProgress) templates.CloseView {
	period := pr.Period.String()
	v := templates.CloseView{Period: period, Status: string(pr.Status), Running: pr.Status == invoicing.CloseRunning,
		StartedBy: pr.StartedBy, StartedAt: core.MomentIn(loc, pr.StartedAt, core.ToMinute), Runs: pr.Runs,
		Customers: fmt.Sprintf("%d of %d", pr.CustomersDone, pr.CustomersTotal), Providers: fmt.Sprintf("%d of %d", pr.ProvidersDone, pr.ProvidersTotal),
		Invoices: pr.Invoices, Statements: pr.Statements, Left: pr.LeftIssued, Problem: pr.Problem,
		URL:         "/finance/close?period=" + url.QueryEscape(period),
		InvoicesURL: "/finance/invoices?period=" + url.QueryEscape(period), StatementsURL: "/finance/statements?period=" + url.QueryEscape(period),
		JournalURL: "/api/finance/journal.csv?period=" + url.QueryEscape(period)}
	if pr.FinishedAt != nil {
		v.FinishedAt = core.MomentIn(loc, *pr.FinishedAt, core.ToMinute)
	}
	return v
}

// closeSubmit starts the close of the month asked for and sends finance to its progress.
func (s *Server) closeSubmit(c echo.Context) error {
	values := core.Submitted(c, "period")
	p, err := invoicing.ParsePeriod(c.FormValue("period"))
	if err == nil {
		_, err = s.startClose(c.Request().Context(), p, core.UserID(c))
	}
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = values
			return s.renderClose(c, core.StatusFor(err), f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/finance/close?period="+url.QueryEscape(p.String()))
}

// apiClose starts a close and answers with it: 200 when it ended within the wait (done or
// failed), 202 with Location to poll while it runs.
func (s *Server) apiClose(c echo.Context) error {
	var in struct {
		Period string `json:"period"` // YYYY-MM
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	p, err := invoicing.ParsePeriod(in.Period)
	if err != nil {
		return err
	}
	pr, err := s.startClose(c.Request().Context(), p, core.UserID(c))
	if err != nil {
		return err
	}
	if pr.Status == invoicing.CloseRunning {
		c.Response().Header().Set(echo.HeaderLocation, "/api/finance/closes/"+p.String())
		return c.JSON(http.StatusAccepted, pr)
	}
	return c.JSON(http.StatusOK, pr)
}

func (s *Server) apiCloses(c echo.Context) error {
	list, err := s.invoicing.Closes(c.Request().Context(), 120)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"closes": list})
}

func (s *Server) apiCloseProgress(c echo.Context) error {
	p, err := invoicing.ParsePeriod(c.Param("period"))
	if err != nil {
		return err
	}
	pr, err := s.invoicing.CloseProgressOf(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pr)
}

// closeProgressView is a close's accounts, customers and providers, as its progress block
// shows them.
func (s *Server) closeProgressView(pr invoicing.CloseProgress) templates.ProgressView {
	period := pr.Period.String()
	v := core.ProgressView(progress.Of(pr.Reading(s.Now())), "accounts", "/finance/close/progress?period="+url.QueryEscape(period))
	v.TestID, v.Label, v.Status = "close-progress-bar", "Accounts of the close of "+period+" done", string(pr.Status)
	v.Note = fmt.Sprintf("customers %d of %d, providers %d of %d", pr.CustomersDone, pr.CustomersTotal, pr.ProvidersDone, pr.ProvidersTotal)
	if pr.Status == invoicing.CloseFailed {
		v.Left = "stopped"
	}
	return v
}

// closeProgress is a close's progress block alone, which its page's script polls.
func (s *Server) closeProgress(c echo.Context) error {
	p, err := invoicing.ParsePeriod(c.QueryParam("period"))
	if err != nil {
		return err
	}
	pr, err := s.invoicing.CloseProgressOf(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return s.RenderProgress(c, s.closeProgressView(pr))
}
