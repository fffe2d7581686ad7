package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
)

// keyInfoPaths are where a key reads its own limit and spend: the gateway's /v1/key, and
// /api/v1/key, the address OpenRouter's clients call it at.
var keyInfoPaths = []string{"/v1/key", "/api/v1/key"}

// keyInfo is the key's limit and its spend, as the key itself may read it.
type keyInfo struct {
	ID    string `json:"id"`
	Label string `json:"label"` // the key's name
	// The limit, null for none, its period (day, week or month; reset at 00:00 UTC, weeks on
	// Monday) and when the current period ends.
	// Amounts are the JSON API's: a number of picodollars (*_pico) beside exact decimal dollars
	// (*_usd).
	LimitPico     *money.BigPico `json:"limit_pico"`
	LimitUSD      *string        `json:"limit_usd"`
	LimitPeriod   string         `json:"limit_period"`
	LimitReset    time.Time      `json:"limit_reset"`
	UsagePico     money.BigPico  `json:"usage_pico"` // billed in the current period
	UsageUSD      string         `json:"usage_usd"`
	RemainingPico *money.BigPico `json:"limit_remaining_pico"`
	RemainingUSD  *string        `json:"limit_remaining_usd"`
	// Billed today, this week and this month (UTC), whatever the limit's period.
	DailyPico   money.BigPico `json:"usage_daily_pico"`
	DailyUSD    string        `json:"usage_daily_usd"`
	WeeklyPico  money.BigPico `json:"usage_weekly_pico"`
	WeeklyUSD   string        `json:"usage_weekly_usd"`
	MonthlyPico money.BigPico `json:"usage_monthly_pico"`
	MonthlyUSD  string        `json:"usage_monthly_usd"`
}

func usdText(b money.BigPico) string { return strings.TrimPrefix(b.String(), "$") }

// key answers GET /v1/key: the calling key's limit, period, spend and reset, from the meter's
// billed figures (requests in flight or not yet metered are not in them).
func (g *Gateway) key(c echo.Context) error {
	key, err := g.admitKey(c)
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	if g.cfg.Budgets == nil {
		return g.writeGatewayError(c, services.Errorf(services.CodeUnavailable, "Key usage is not available in this process."))
	}
	us, err := g.cfg.Budgets.KeyUsages(c.Request().Context(), []accounts.APIKey{key})
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	u := us[0]
	v := keyInfo{ID: key.ID, Label: key.Name, LimitPeriod: string(key.LimitPeriod), LimitReset: u.ResetsAt,
		UsagePico: u.InPeriod, UsageUSD: usdText(u.InPeriod),
		DailyPico: u.Spend.Day, DailyUSD: usdText(u.Spend.Day),
		WeeklyPico: u.Spend.Week, WeeklyUSD: usdText(u.Spend.Week),
		MonthlyPico: u.Spend.Month, MonthlyUSD: usdText(u.Spend.Month)}
	if key.Limit != nil {
		l := money.BigPicoOf(*key.Limit)
		lu, ru := usdText(l), usdText(*u.Remaining)
		v.LimitPico, v.LimitUSD, v.RemainingPico, v.RemainingUSD = &l, &lu, u.Remaining, &ru
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]any{"data": v})
}
