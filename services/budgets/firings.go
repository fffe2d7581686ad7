package budgets

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// Firing is an alert that fired in a period that has not ended yet: a limit's threshold
// reached, or the balance below its alert.
type Firing struct {
	// Limit is what the alert is about: "key", "member", "account" (the budget) or
	// "credit_low" (the balance).
	Limit string
	// Name names the limit: the key's name or the member's e-mail; "" for the account's.
	Name   string
	Period periods.Period
	// Percent is the threshold reached, for a limit; Below the balance the alert is set at,
	// for credit_low.
	Percent int
	Below   money.BigPico
	// Spent is what the limit's keys had spent, or the balance, when it fired.
	Spent   money.BigPico
	FiredAt time.Time
}

// FiredThisPeriod lists the account's alerts that fired in the current period of their limit
// (a key's or a member's day, week or month; the month for the budget and the balance), newest
// first: an alert whose period has ended has reset and is no longer news.
func (s *Service) FiredThisPeriod(ctx context.Context, accountID string) (_ []Firing, err error) {
	defer services.Wrap(&err, "budgets.FiredThisPeriod(%s)", accountID)
	now := s.now()
	keys, err := s.accounts.Keys(ctx, accountID)
	if err != nil {
		return nil, err
	}
	people, err := s.accounts.UsersOfAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	memberPeriods := map[string]periods.Period{}
	rows, err := s.pool.Query(ctx, `SELECT user_id::text, period FROM member_limits WHERE account_id = $1`, accountID)
	if err != nil {
		return nil, err
	}
	if err := forEach(rows, func(r pgx.Rows) error {
		var id string
		var p periods.Period
		err := r.Scan(&id, &p)
		memberPeriods[id] = p
		return err
	}); err != nil {
		return nil, err
	}
	// A week may have started in the month before: read from a week before the month's start.
	rows, err = s.pool.Query(ctx, `SELECT rule, period_start, threshold, spend_pico, fired_at FROM alert_firings
		WHERE account_id = $1 AND period_start >= $2 ORDER BY fired_at DESC, id`,
		accountID, periods.Month.Start(now).AddDate(0, 0, -7))
	if err != nil {
		return nil, err
	}
	var out []Firing
	err = forEach(rows, func(r pgx.Rows) error {
		var rule string
		var start time.Time
		var threshold money.BigPico
		f := Firing{Period: periods.Month}
		if err := r.Scan(&rule, &start, &threshold, &f.Spent, &f.FiredAt); err != nil {
			return err
		}
		f.Limit = rule
		kind, id, _ := strings.Cut(rule, ":")
		switch kind {
		case "key":
			f.Limit = "key"
			for _, k := range keys {
				if k.ID == id {
					f.Name = k.Name
					if k.LimitPeriod != "" {
						f.Period = k.LimitPeriod
					}
				}
			}
		case "member":
			f.Limit = "member"
			for _, u := range people {
				if u.ID == id {
					f.Name = u.Email
				}
			}
			if p, ok := memberPeriods[id]; ok && p != "" {
				f.Period = p
			}
		}
		if f.Limit == "credit_low" {
			f.Below = threshold
		} else if pct, err := threshold.Pico(); err == nil {
			f.Percent = int(pct)
		}
		if f.Period.Start(now).Equal(start.UTC()) {
			out = append(out, f)
		}
		return nil
	})
	return out, err
}
