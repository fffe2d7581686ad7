package core

import (
	"fmt"
	"net/http"

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
