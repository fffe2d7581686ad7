// Package keyinfo is what an API key reads of itself at GET /v1/key (and /api/v1/key, where
// OpenRouter's clients call it): its limit, the limit's period and when it resets, and what it was
// billed in the period, today, this week and this month. The gateway answers it (package gateway's
// keyinfo.go); this package only shapes the answer from the key and its spend (budgets.KeyUsage).
package keyinfo

import (
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/money"
)

// Info is the key's limit and its spend, as the key itself may read it.
type Info struct {
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

// Of is what key reads of itself, from its spend u (the meter's billed figures: requests in flight
// or not yet metered are not in them).
func Of(key accounts.APIKey, u budgets.KeyUsage) Info {
	v := Info{ID: key.ID, Label: key.Name, LimitPeriod: string(key.LimitPeriod), LimitReset: u.ResetsAt,
		UsagePico: u.InPeriod, UsageUSD: usdText(u.InPeriod),
		DailyPico: u.Spend.Day, DailyUSD: usdText(u.Spend.Day),
		WeeklyPico: u.Spend.Week, WeeklyUSD: usdText(u.Spend.Week),
		MonthlyPico: u.Spend.Month, MonthlyUSD: usdText(u.Spend.Month)}
	if key.Limit != nil {
		l := money.BigPicoOf(*key.Limit)
		lu, ru := usdText(l), usdText(*u.Remaining)
		v.LimitPico, v.LimitUSD, v.RemainingPico, v.RemainingUSD = &l, &lu, u.Remaining, &ru
	}
	return v
}
