package provider

import (
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/performance"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The provider's view of its own rigs over a window (services/performance): a page and
// GET /api/provider/performance?days=N, both the caller's provider account's only.

// performanceDays are the windows the page offers.
var performanceDays = []string{"1", "7", "30", "90"}

// performanceOf reads the caller's view over the last days (the "days" query, 7 by default).
func (s *Server) performanceOf(c echo.Context) (performance.Window, []performance.Offering, error) {
	if s.performance == nil {
		return performance.Window{}, nil, services.Errorf(services.CodeUnavailable, "The performance view is not available here.")
	}
	days := 7
	if v := c.QueryParam("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			n = 0
		}
		days = n
	}
	w, err := performance.WindowOf(s.Now(), days)
	if err != nil {
		return w, nil, err
	}
	caps, _ := s.router.(performance.Capacities)
	list, err := s.performance.Offerings(c.Request().Context(), core.ProviderAccount(c), w, caps)
	for i := range list {
		list[i].Reliability = s.RecordOf(list[i].OfferingID)
	}
	return w, list, err
}

func (s *Server) apiPerformance(c echo.Context) error {
	w, list, err := s.performanceOf(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"window": w, "offerings": list})
}

func (s *Server) performancePage(c echo.Context) error {
	p := templates.PerformancePage{Page: s.Page(c, "Performance"), Days: c.QueryParam("days")}
	if p.Days == "" {
		p.Days = "7"
	}
	for _, d := range performanceDays {
		label := "last " + d + " days"
		if d == "1" {
			label = "last day"
		}
		p.DayOptions = append(p.DayOptions, templates.Option{Value: d, Label: label})
	}
	w, list, err := s.performanceOf(c)
	if err != nil {
		if fields := core.InvalidFields(err); fields != nil {
			p.Error = fields["days"]
			return s.Render(c, http.StatusUnprocessableEntity, templates.Performance(p))
		}
		return err
	}
	p.Window = w.From.Format("2006-01-02 15:04") + " to " + w.To.Format("2006-01-02 15:04") + " UTC"
	for _, o := range list {
		p.Rigs = append(p.Rigs, performanceRow(o))
	}
	return s.Render(c, http.StatusOK, templates.Performance(p))
}

func performanceRow(o performance.Offering) templates.PerformanceRow {
	r := templates.PerformanceRow{ID: o.OfferingID, Rig: fmt.Sprintf("%dx %s", o.GPUCount, o.GPU), Model: o.Model,
		Region: o.Region, Tier: string(o.Tier), Status: string(o.Status), Requests: strconv.FormatInt(o.Requests, 10),
		Tokens:   core.Count(o.InputTokens + o.OutputTokens),
		InFlight: strconv.FormatFloat(o.MeanInFlight, 'f', 2, 64), Utilisation: "capacity unknown",
		TTFTClaimed: msText(o.ClaimedTTFTP99Ms), TTFTMeasured: msText(o.MeasuredTTFTP99Ms),
		TPSClaimed: rateText(o.ClaimedTokensPerSec), TPSMeasured: rateText(o.MeasuredTokensPerSec),
		TTFTVerdict: verdict(o.TTFTKeepsClaim), TPSVerdict: verdict(o.TokensPerSecKeepsClaim),
		KWhPerMTok: numText(o.KWhPerMTok, 4), EstimatedKWhPerMTok: numText(o.EstimatedKWhPerMTok, 4),
		Earned: money.FormatBigCents(o.Earned), EarnedPerKWh: "—", Reliability: core.ReliabilityCell(o.Reliability)}
	if o.Utilisation != nil {
		r.Utilisation = strconv.FormatFloat(100**o.Utilisation, 'f', 1, 64) + "% of " + strconv.Itoa(o.Capacity)
	}
	if o.MeasuredEnergyShare != nil {
		r.MeasuredShare = strconv.FormatFloat(100**o.MeasuredEnergyShare, 'f', 0, 64) + "% measured"
		if o.SimulatedEnergyShare != nil && *o.SimulatedEnergyShare > 0 {
			r.MeasuredShare += ", " + strconv.FormatFloat(100**o.SimulatedEnergyShare, 'f', 0, 64) + "% simulated"
		}
	}
	if o.EarnedPerKWh != nil {
		r.EarnedPerKWh = money.FormatPrecisePico(*o.EarnedPerKWh)
	}
	return r
}

func msText(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64) + " ms"
}

func numText(v *float64, places int) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(*v, 'f', places, 64)
}

// rateText writes tokens per second whole and grouped by thousands ("2,688"), as counts are.
func rateText(v *float64) string {
	if v == nil {
		return "—"
	}
	return money.FormatCount(int64(math.Round(*v)))
}

func verdict(keeps *bool) string {
	switch {
	case keeps == nil:
		return ""
	case *keeps:
		return "keeps the claim"
	default:
		return "misses the claim"
	}
}
