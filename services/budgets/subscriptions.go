package budgets

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
)

// SetSubscription records whether a person of the account gets the e-mail of an alert kind
// (KindBudget, KindCreditLow), over the default.
func (s *Service) SetSubscription(ctx context.Context, accountID, userID, kind string, subscribed bool) (err error) {
	defer services.Wrap(&err, "budgets.SetSubscription(%s, %s)", accountID, kind)
	if kind != KindBudget && kind != KindCreditLow {
		return invalid("kind", "Choose budget or credit_low.")
	}
	users, err := s.accounts.UsersOfAccount(ctx, accountID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(users, func(u accounts.User) bool { return u.ID == userID }) {
		return services.Errorf(services.CodeNotFound, "No such member of this account.")
	}
	_, err = s.pool.Exec(ctx, `
		INSERT INTO alert_subscriptions (account_id, user_id, kind, subscribed) VALUES ($1, $2, $3, $4)
		ON CONFLICT (account_id, user_id, kind) DO UPDATE SET subscribed = EXCLUDED.subscribed`,
		accountID, userID, kind, subscribed)
	return err
}

// SetCreditLowAlert sets (below nil: removes) the balance under which the account is alerted.
func (s *Service) SetCreditLowAlert(ctx context.Context, accountID string, below *money.Pico) (err error) {
	defer services.Wrap(&err, "budgets.SetCreditLowAlert(%s)", accountID)
	if below == nil {
		_, err = s.pool.Exec(ctx, `DELETE FROM alert_rules WHERE account_id = $1 AND kind = 'credit_low' AND subject = ''`, accountID)
		return err
	}
	if *below <= 0 {
		return invalid("credit_low_usd", "Set an amount above $0, or leave it empty for no alert.")
	}
	_, err = s.pool.Exec(ctx, `
		INSERT INTO alert_rules (account_id, kind, subject, below_pico, updated_at) VALUES ($1, 'credit_low', '', $2, $3)
		ON CONFLICT (account_id, kind, subject) DO UPDATE SET below_pico = EXCLUDED.below_pico, updated_at = EXCLUDED.updated_at`,
		accountID, int64(*below), s.now().UTC())
	return err
}

func (s *Service) subscriptions(ctx context.Context, accountID string) (map[string]map[string]bool, error) {
	return subscriptionsOf(ctx, s.pool, accountID)
}

// subscriptionsOf is who of the account chose for or against an alert kind: kind -> user -> choice.
func subscriptionsOf(ctx context.Context, pool *pgxpool.Pool, accountID string) (map[string]map[string]bool, error) {
	rows, err := pool.Query(ctx, `SELECT kind, user_id::text, subscribed FROM alert_subscriptions WHERE account_id = $1`, accountID)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{KindBudget: {}, KindCreditLow: {}}
	err = forEach(rows, func(r pgx.Rows) error {
		var kind, user string
		var sub bool
		err := r.Scan(&kind, &user, &sub)
		out[kind][user] = sub
		return err
	})
	return out, err
}
