package budgets

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// DefaultThresholds are the percentages of a limit an alert fires at unless its rule says
// otherwise.
var DefaultThresholds = []int{50, 80, 100}

// Service sets the member limits and the account budgets and reads the spend against them.
type Service struct {
	pool     *pgxpool.Pool
	accounts *accounts.Service
	spend    *metering.SpendReader
	now      func() time.Time
}

// NewService returns the budgets on pool; now nil means time.Now.
func NewService(pool *pgxpool.Pool, acc *accounts.Service, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, accounts: acc, spend: metering.NewSpendReader(pool), now: now}
}

// MemberLimit is what the keys one person created in an account may spend per period.
type MemberLimit struct {
	AccountID, UserID string
	Email             string
	Limit             money.Pico
	Period            periods.Period
	Thresholds        []int
	// Spent is what those keys were billed in the current period.
	Spent money.BigPico
}

// AccountBudget is an account's monthly budget: a hard stop on what all its keys spend in a
// calendar month.
type AccountBudget struct {
	AccountID  string
	Limit      money.Pico
	Thresholds []int
	Spent      money.BigPico // this month
}

func invalid(field, problem string) error {
	return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
		Fields: map[string]string{field: problem}}
}

// ParseThresholds reads alert thresholds in percent ("50, 80, 100"); empty is the default.
func ParseThresholds(field string, values []int) ([]int, error) {
	if len(values) == 0 {
		return DefaultThresholds, nil
	}
	out := slices.Clone(values)
	slices.Sort(out)
	out = slices.Compact(out)
	if out[0] < 1 || out[len(out)-1] > 1000 || len(out) > 10 {
		return nil, invalid(field, "Give up to ten percentages between 1 and 1000, such as 50, 80, 100.")
	}
	return out, nil
}

// SetMemberLimit sets (limit nil: removes) the limit on the keys userID created in the account;
// the person must be of the account.
func (s *Service) SetMemberLimit(ctx context.Context, accountID, userID string, limit *money.Pico, period periods.Period,
	thresholds []int) (err error) {
	defer services.Wrap(&err, "budgets.SetMemberLimit(%s, %s)", accountID, userID)
	users, err := s.accounts.UsersOfAccount(ctx, accountID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(users, func(u accounts.User) bool { return u.ID == userID }) {
		return services.Errorf(services.CodeNotFound, "No such member of this account.")
	}
	if limit == nil {
		_, err = s.pool.Exec(ctx, `DELETE FROM member_limits WHERE account_id = $1 AND user_id = $2`, accountID, userID)
		return err
	}
	if *limit <= 0 {
		return invalid("limit_usd", "Set a limit above $0, or leave it empty for none.")
	}
	if !period.Valid() {
		return invalid("limit_period", "Choose day, week or month.")
	}
	if thresholds, err = ParseThresholds("thresholds", thresholds); err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		INSERT INTO member_limits (account_id, user_id, limit_pico, period, alert_thresholds, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (account_id, user_id) DO UPDATE SET limit_pico = EXCLUDED.limit_pico, period = EXCLUDED.period,
			alert_thresholds = EXCLUDED.alert_thresholds, updated_at = EXCLUDED.updated_at`,
		accountID, userID, int64(*limit), string(period), thresholds, s.now().UTC())
	return err
}

// SetAccountBudget sets (limit nil: removes) the account's monthly budget.
func (s *Service) SetAccountBudget(ctx context.Context, accountID string, limit *money.Pico, thresholds []int) (err error) {
	defer services.Wrap(&err, "budgets.SetAccountBudget(%s)", accountID)
	if limit == nil {
		_, err = s.pool.Exec(ctx, `DELETE FROM account_budgets WHERE account_id = $1`, accountID)
		return err
	}
	if *limit <= 0 {
		return invalid("budget_usd", "Set a budget above $0, or leave it empty for none.")
	}
	if thresholds, err = ParseThresholds("budget_thresholds", thresholds); err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		INSERT INTO account_budgets (account_id, limit_pico, alert_thresholds, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (account_id) DO UPDATE SET limit_pico = EXCLUDED.limit_pico,
			alert_thresholds = EXCLUDED.alert_thresholds, updated_at = EXCLUDED.updated_at`,
		accountID, int64(*limit), thresholds, s.now().UTC())
	return err
}

// Overview is an account's member limits and budget with their spend, and its balance alert.
type Overview struct {
	Members []MemberLimit
	Budget  *AccountBudget
	// CreditLowBelow is the balance under which the account is alerted; nil for no alert.
	CreditLowBelow *money.Pico
	People         []accounts.User
	// Unsubscribed are the people who chose not to get an alert kind's e-mail, by kind.
	Subscriptions map[string]map[string]bool // kind -> user id -> subscribed
}

// Overview reads the account's member limits, budget, balance alert and subscriptions, with the
// spend against each in its current period.
func (s *Service) Overview(ctx context.Context, accountID string) (_ Overview, err error) {
	defer services.Wrap(&err, "budgets.Overview(%s)", accountID)
	var o Overview
	if o.People, err = s.accounts.UsersOfAccount(ctx, accountID); err != nil {
		return Overview{}, err
	}
	keys, err := s.accounts.Keys(ctx, accountID)
	if err != nil {
		return Overview{}, err
	}
	now := s.now()
	spend, err := s.spend.KeySpend(ctx, keyIDs(keys), now)
	if err != nil {
		return Overview{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT user_id::text, limit_pico::bigint, period, alert_thresholds FROM member_limits
		WHERE account_id = $1 ORDER BY updated_at`, accountID)
	if err != nil {
		return Overview{}, err
	}
	o.Members, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (MemberLimit, error) {
		m := MemberLimit{AccountID: accountID}
		var thresholds []int16
		err := r.Scan(&m.UserID, &m.Limit, &m.Period, &thresholds)
		m.Thresholds = ints(thresholds)
		return m, err
	})
	if err != nil {
		return Overview{}, err
	}
	for i := range o.Members {
		m := &o.Members[i]
		for _, u := range o.People {
			if u.ID == m.UserID {
				m.Email = u.Email
			}
		}
		m.Spent = spentBy(keys, spend, m.Period, func(k accounts.APIKey) bool { return k.CreatedBy == m.UserID })
	}
	var b AccountBudget
	var thresholds []int16
	err = s.pool.QueryRow(ctx, `SELECT limit_pico::bigint, alert_thresholds FROM account_budgets WHERE account_id = $1`,
		accountID).Scan(&b.Limit, &thresholds)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return Overview{}, err
	default:
		b.AccountID, b.Thresholds = accountID, ints(thresholds)
		b.Spent = spentBy(keys, spend, periods.Month, func(accounts.APIKey) bool { return true })
		o.Budget = &b
	}
	var below *int64
	err = s.pool.QueryRow(ctx, `SELECT below_pico::bigint FROM alert_rules WHERE account_id = $1 AND kind = 'credit_low' AND subject = ''`,
		accountID).Scan(&below)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Overview{}, err
	}
	if below != nil {
		p := money.Pico(*below)
		o.CreditLowBelow = &p
	}
	if o.Subscriptions, err = s.subscriptions(ctx, accountID); err != nil {
		return Overview{}, err
	}
	return o, nil
}

func keyIDs(keys []accounts.APIKey) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

// spentBy sums the period's spend of the keys that match.
func spentBy(keys []accounts.APIKey, spend map[string]metering.KeySpend, p periods.Period, match func(accounts.APIKey) bool) money.BigPico {
	total := money.BigPicoOf(0)
	for _, k := range keys {
		if match(k) {
			total = total.Add(spend[k.ID].In(p))
		}
	}
	return total
}

func ints(v []int16) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}
