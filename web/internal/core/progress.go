package core

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/progress"
	"github.com/gpumarket/gpumarket/templates"
)

// ProgressView is an estimate of long work as every page shows it (docs/progress.md): "10 of
// 40 lines done", its share, the pace over the recent window and the time left. The caller
// adds what the block is (TestID, Label), where it is polled from while it runs (Src, which
// this leaves "" once the work ended), and anything else it says.
func ProgressView(e progress.Estimate, unit, src string) templates.ProgressView {
	v := templates.ProgressView{Count: fmt.Sprintf("%d of %d %s done", e.Done, e.Total, unit), Percent: e.Percent,
		Rate: e.RateText(unit), Left: e.LeftText()}
	if e.Running {
		v.Src = src
	}
	return v
}

// RenderProgress answers a progress block's fragment: the block alone, never cached, for the
// page's script to put in place of the one it shows.
func (s *Core) RenderProgress(c echo.Context, v templates.ProgressView) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return s.Render(c, http.StatusOK, templates.ProgressBlock(v))
}

// PayoutRunView is a period's payout run as the payouts pages show it: every provider's for
// finance (providerAccountID ""), or the provider's own. base is the page's address; its
// fragment is base+"/progress". A page with no payout yet shows an empty bar.
func (s *Core) PayoutRunView(ctx context.Context, period, providerAccountID, base string) (templates.ProgressView, error) {
	po, err := s.PayoutsService()
	if err != nil {
		return templates.ProgressView{}, err
	}
	run, err := po.RunProgress(ctx, period, providerAccountID)
	if err != nil {
		return templates.ProgressView{}, err
	}
	v := ProgressView(progress.Of(run.Reading), "payouts", base+"/progress?period="+url.QueryEscape(run.Period))
	v.TestID, v.Label = "payout-run", "Payouts of "+run.Period+" ended"
	switch {
	case run.Period == "":
		v.Status, v.Left = "no payout yet", "nothing left"
	case run.Reading.Running:
		v.Status = run.Period + ": paying"
	default:
		v.Status = run.Period + ": no payout under way"
	}
	v.Note = fmt.Sprintf("%d paid, %d failed, %d pending", run.Paid, run.Failed, run.Pending)
	return v, nil
}
