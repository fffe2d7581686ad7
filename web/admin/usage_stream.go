package admin

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/riglimits"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// UsageStreamReport says where the rigs stand against their limits on the usage stream
// (riglimits.Watcher).
type UsageStreamReport interface {
	Report() riglimits.Report
}

var _ UsageStreamReport = (*riglimits.Watcher)(nil)

// usageStreamPage shows admins the rigs at their limits on the usage stream.
func (s *Server) usageStreamPage(c echo.Context) error {
	p := templates.UsageStreamPage{Page: s.Page(c, "Usage stream")}
	if s.usageStream != nil {
		r := s.usageStream.Report()
		fillUsageStreamPage(&p, core.Zone(c), r)
		if err := s.nameStreamRigs(c, p.Rigs); err != nil {
			return err
		}
	}
	return s.Render(c, http.StatusOK, templates.UsageStream(p))
}

// nameStreamRigs names each rig's provider and offering in place of their ids.
func (s *Server) nameStreamRigs(c echo.Context, rows []templates.StreamRigRow) error {
	var providers, offerings []string
	for _, r := range rows {
		// The stream's subjects carry what a rig published; only well-formed ids are looked up.
		if services.CanonicalUUID(r.ProviderID) {
			providers = append(providers, r.ProviderID)
		}
		offerings = append(offerings, r.OfferingID)
	}
	names, err := s.Accounts.AccountNames(c.Request().Context(), providers)
	if err != nil {
		return err
	}
	labels, err := s.offeringLabels(c, offerings)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Provider, rows[i].Offering = names[rows[i].ProviderID], labels[rows[i].OfferingID]
	}
	return nil
}

func fillUsageStreamPage(p *templates.UsageStreamPage, loc *time.Location, r riglimits.Report) {
	p.Watched = true
	pending := "no limit"
	if r.MaxPendingPerRig > 0 {
		pending = strconv.FormatInt(r.MaxPendingPerRig, 10)
	}
	rate := fmt.Sprintf("%g events a second, averaged over %s", r.MaxRate, r.RateWindow)
	switch {
	case r.MaxRate == 0:
		rate = "no rate limit"
	case r.Enforced:
		rate += fmt.Sprintf("; a rig over its rate is shut out for %s", r.Cooldown)
	default:
		rate += "; a rig over its rate is reported here, not shut out: this NATS server is not the platform's own"
	}
	p.Limits = fmt.Sprintf("Each rig may have %s usage events waiting to be metered, and publish %s.", pending, rate)
	p.Checked = "never"
	if !r.CheckedAt.IsZero() {
		p.Checked = core.MomentIn(loc, r.CheckedAt, core.ToSecond)
	}
	p.Error = r.Error
	p.Pending = money.Counted(int64(r.PendingEvents), "event", "events") + " waiting to be metered, of " +
		money.Counted(int64(r.RigsPending), "rig", "rigs")
	for _, rig := range r.Rigs {
		row := templates.StreamRigRow{ProviderID: rig.ProviderID, OfferingID: rig.OfferingID,
			Pending: strconv.FormatUint(rig.Pending, 10), AtLimit: rig.AtPendingLimit,
			Rate: strconv.FormatFloat(rig.Rate, 'f', 1, 64), OverRate: rig.OverRate}
		if rig.ShutOutUntil != nil {
			row.ShutOutUntil = core.MomentIn(loc, *rig.ShutOutUntil, core.ToSecond)
		}
		p.Rigs = append(p.Rigs, row)
	}
}

// apiUsageStream is the same as JSON: {"watched": false} where this process does not watch the
// stream, else {"watched": true, "report": riglimits.Report}.
func (s *Server) apiUsageStream(c echo.Context) error {
	if s.usageStream == nil {
		return c.JSON(http.StatusOK, map[string]any{"watched": false})
	}
	return c.JSON(http.StatusOK, map[string]any{"watched": true, "report": s.usageStream.Report()})
}
