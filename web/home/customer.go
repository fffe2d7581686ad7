package home

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// customerHome is a customer's account at a glance (see docs/home.md, "A customer's account").
func (s *Server) customerHome(c echo.Context, sess accounts.Session, now time.Time) (*templates.CustomerHome, error) {
	ctx := c.Request().Context()
	account := sess.Account.ID
	bal, err := s.Payments.Credits.Balance(ctx, account)
	if err != nil {
		return nil, err
	}
	h := &templates.CustomerHome{Balance: money.FormatBigCents(bal.Pico), Negative: bal.Negative}
	if err := s.spend(ctx, account, now, h); err != nil {
		return nil, err
	}
	if err := s.figures(ctx, account, now, h); err != nil {
		return nil, err
	}
	if h.Alerts, err = s.alerts(ctx, account, bal, core.Zone(c)); err != nil {
		return nil, err
	}
	if h.Steps, err = s.firstSteps(ctx, account, sess.Member); err != nil {
		return nil, err
	}
	if h.Steps != nil {
		if model, err := s.liveModel(ctx); err != nil {
			return nil, err
		} else if model != "" {
			h.Curl = curlExample(s.BaseURL(c), model)
		}
	}
	return h, nil
}

// spend is this month's spend so far beside last month's to the same point, from the hourly
// totals the usage page shows (metering.Reports.DailyTotals).
func (s *Server) spend(ctx context.Context, account string, now time.Time, h *templates.CustomerHome) error {
	from, to, lastFrom, lastTo := monthSoFar(now)
	h.SpendThisMonth, h.SpendLastMonth = "—", "—"
	if s.cfg.Usage == nil {
		return nil
	}
	this, err := s.cfg.Usage.DailyTotals(ctx, account, metering.UsageFilter{From: from, To: to})
	if err != nil {
		return err
	}
	last, err := s.cfg.Usage.DailyTotals(ctx, account, metering.UsageFilter{From: lastFrom, To: lastTo})
	if err != nil {
		return err
	}
	h.SpendThisMonth, h.SpendLastMonth = money.FormatBigCents(this.Total.Cost), money.FormatBigCents(last.Total.Cost)
	h.SpendSpan = spanText(from, to) + ", against " + spanText(lastFrom, lastTo)
	return nil
}

// figures are this month's savings, energy and carbon as the reports compute them
// (reports.Service.Savings and Carbon over this month's days, today's included), each with the
// link to its method.
func (s *Server) figures(ctx context.Context, account string, now time.Time, h *templates.CustomerHome) error {
	if s.cfg.Reports == nil {
		return nil
	}
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	q := reports.Query{From: first, To: today.AddDate(0, 0, 1), Group: reports.GroupDay}
	sav, err := s.cfg.Reports.Savings(ctx, account, q)
	if err != nil {
		return err
	}
	car, err := s.cfg.Reports.Carbon(ctx, account, q)
	if err != nil {
		return err
	}
	t, ct := sav.Totals, car.Totals
	// Rounded as /reports rounds a report by day, so that the two pages show the same figures.
	rounded, err := reports.RoundedSaving(t.Spend, t.Baseline)
	if err != nil {
		return err
	}
	saved := money.FormatCents(rounded.SavedCents)
	if rounded.SavedPct != "" {
		saved += " (" + rounded.SavedPct + "%)"
	}
	h.Figures = []templates.ReportFigure{
		{ID: "savings", Label: "Saved against enterprise GPUs", Value: saved, MethodURL: "/methodology#savings"},
		{ID: "baseline", Label: "Baseline (realtime price)", Value: money.FormatCents(rounded.BaselineCents), MethodURL: "/methodology#baseline"},
		{ID: "energy", Label: "Energy", Value: documents.ChartValue(ct.EnergyKWh) + " kWh", MethodURL: "/methodology#energy"},
		{ID: "carbon", Label: "Carbon (location-based)", Value: documents.ChartValue(ct.GCO2e) + " gCO2e", MethodURL: "/methodology#carbon"},
		{ID: "carbon-baseline", Label: "Carbon on enterprise GPUs", Value: documents.ChartValue(ct.BaselineGCO2e) + " gCO2e",
			MethodURL: "/methodology#carbon-baseline"},
	}
	v := url.Values{"from": {first.Format(core.DateLayout)}, "to": {today.Format(core.DateLayout)}, "group": {"day"}}
	h.ReportsURL = "/reports?" + v.Encode()
	return nil
}

// alerts are what the account should act on: the budget alerts that fired in their current
// period (budgets.Service.FiredThisPeriod), the balance under the account's balance alert or
// below zero, and an auto top-up whose last charge failed or that turned itself off.
func (s *Server) alerts(ctx context.Context, account string, bal credits.Balance, loc *time.Location) ([]templates.HomeAlert, error) {
	var out []templates.HomeAlert
	var below *money.Pico
	if s.cfg.Budgets != nil {
		fired, err := s.cfg.Budgets.FiredThisPeriod(ctx, account)
		if err != nil {
			return nil, err
		}
		for i, f := range fired {
			if f.Limit == "credit_low" {
				continue // the balance's alert is told below, as the balance stands now
			}
			out = append(out, templates.HomeAlert{ID: fmt.Sprintf("budget-%d", i), Text: firingText(loc, f),
				Link: "/budgets", LinkText: "Budgets and limits"})
		}
		o, err := s.cfg.Budgets.Overview(ctx, account)
		if err != nil {
			return nil, err
		}
		below = o.CreditLowBelow
	}
	switch {
	case bal.Negative:
		out = append(out, templates.HomeAlert{ID: "low-balance", Link: "/credits", LinkText: "Buy credits",
			Text: "Your balance is below zero (" + money.FormatBigCents(bal.Pico) + "): requests are refused until you buy credits."})
	case below != nil && bal.Pico.Cmp(money.BigPicoOf(*below)) < 0:
		out = append(out, templates.HomeAlert{ID: "low-balance", Link: "/credits", LinkText: "Buy credits",
			Text: "Your balance, " + money.FormatBigCents(bal.Pico) + ", is below your alert at " + money.FormatCentsOf(*below) + "."})
	}
	if t := s.Payments.Topups; t != nil {
		settings, err := t.Settings(ctx, account)
		if err != nil {
			return nil, err
		}
		attempts, err := t.Attempts(ctx, account, 1)
		if err != nil {
			return nil, err
		}
		switch {
		case len(attempts) > 0 && attempts[0].Status == credits.AttemptFailed:
			a := attempts[0]
			text := "The auto top-up of " + core.CentsText(a.AmountCents) + " at " + minuteText(loc, a.CreatedAt) + " failed"
			if a.Failure != "" {
				text += ": " + a.Failure
			}
			out = append(out, templates.HomeAlert{ID: "topup-failed", Text: text + ".", Link: "/credits", LinkText: "Check the card"})
		case settings.StoppedReason != "":
			text := "Auto top-up turned itself off"
			if settings.StoppedAt != nil {
				text += " at " + minuteText(loc, *settings.StoppedAt)
			}
			out = append(out, templates.HomeAlert{ID: "topup-failed", Text: text + ": " + settings.StoppedReason,
				Link: "/credits", LinkText: "Check the card"})
		}
	}
	return out, nil
}

// firingText says what a budget alert is about.
func firingText(loc *time.Location, f budgets.Firing) string {
	when := " at " + minuteText(loc, f.FiredAt) + " (" + money.FormatBigCents(f.Spent) + " spent)."
	switch f.Limit {
	case "key":
		return fmt.Sprintf("The API key %s reached %d%% of its %s limit", f.Name, f.Percent, f.Period.Adjective()) + when
	case "member":
		return fmt.Sprintf("The keys of %s reached %d%% of their %s limit", f.Name, f.Percent, f.Period.Adjective()) + when
	}
	return fmt.Sprintf("The account reached %d%% of its monthly budget", f.Percent) + when
}

// firstSteps are the three steps to a first call, each ticked as it happens: credits bought
// (a paid purchase), a key made (revoked or not), a first request billed. Nil once all three
// are done. The links go where the member may act: buying is for who pays, keys for who builds.
func (s *Server) firstSteps(ctx context.Context, account string, member accounts.MemberRole) ([]templates.HomeStep, error) {
	purchased, err := s.Payments.Credits.PurchasedCents(ctx, account)
	if err != nil {
		return nil, err
	}
	keys, err := s.Accounts.Keys(ctx, account)
	if err != nil {
		return nil, err
	}
	called := false
	if s.cfg.Usage != nil {
		page, err := s.cfg.Usage.Requests(ctx, account, metering.UsageFilter{Limit: 1})
		if err != nil {
			return nil, err
		}
		called = len(page.Requests) > 0
	}
	if purchased > 0 && len(keys) > 0 && called {
		return nil, nil
	}
	pays := slices.Contains([]accounts.MemberRole{accounts.MemberOwner, accounts.MemberAdmin, accounts.MemberBilling}, member)
	builds := slices.Contains([]accounts.MemberRole{accounts.MemberOwner, accounts.MemberAdmin, accounts.MemberDeveloper}, member)
	steps := []templates.HomeStep{
		{ID: "credits", Title: "Buy credits", Done: purchased > 0,
			Detail: "Requests are paid from prepaid credit: buy $5 or more by card."},
		{ID: "key", Title: "Create an API key", Done: len(keys) > 0,
			Detail: "A key is shown once, when it is made: keep it where your code can read it."},
		{ID: "call", Title: "Make your first call", Done: called,
			Detail: "Paste this into a terminal, with your key in GPUMARKET_API_KEY. The request shows on your usage a moment later.",
			Link:   "/usage", LinkText: "See your usage"},
	}
	if pays {
		steps[0].Link, steps[0].LinkText = "/credits", "Buy credits"
	} else {
		steps[0].Detail += " An owner, an admin or a billing member of the account buys them."
	}
	if builds {
		steps[1].Link, steps[1].LinkText = "/keys", "Create a key"
	} else {
		steps[1].Detail += " An owner, an admin or a developer of the account makes them."
	}
	return steps, nil
}

// liveModel is a model of the public catalog (an active offering whose rig is active), one in
// the standard tier (what a request without a tier gets) when there is one; "" when none is.
func (s *Server) liveModel(ctx context.Context) (string, error) {
	if s.cfg.Catalog == nil {
		return "", nil
	}
	listed, err := s.cfg.Catalog.List(ctx, catalog.ListInput{})
	if err != nil || len(listed) == 0 {
		return "", err
	}
	for _, o := range listed {
		if o.Tier == catalog.TierStandard {
			return o.Model, nil
		}
	}
	return listed[0].Model, nil
}

// curlExample is the first call to paste: a chat completion at the site's gateway.
func curlExample(base, model string) string {
	return "curl " + base + "/v1/chat/completions \\\n" +
		"  -H \"Authorization: Bearer $GPUMARKET_API_KEY\" \\\n" +
		"  -H \"Content-Type: application/json\" \\\n" +
		"  -d '{\"model\": \"" + model + "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'"
}
