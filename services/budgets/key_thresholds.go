package budgets

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// MaxKeyThresholds is how many alert thresholds an account may set for its keys' limits.
const MaxKeyThresholds = 5

// ValidateKeyThresholds checks an account's alert thresholds for its keys' limits: each a
// percentage from 1 to 100, at most MaxKeyThresholds, none twice. It returns them in order;
// none at all is the default.
func ValidateKeyThresholds(values []int) ([]int, error) {
	if len(values) == 0 {
		return slices.Clone(DefaultThresholds), nil
	}
	const problem = "Give one to five different percentages from 1 to 100, such as 80, 85, 95."
	if len(values) > MaxKeyThresholds {
		return nil, invalid("key_thresholds", problem)
	}
	out := slices.Clone(values)
	slices.Sort(out)
	if len(slices.Compact(slices.Clone(out))) != len(out) || out[0] < 1 || out[len(out)-1] > 100 {
		return nil, invalid("key_thresholds", problem)
	}
	return out, nil
}

// SetKeyThresholds sets the percentages of a key's limit at which the account is alerted, for
// every key of the account without thresholds of its own; none restores the default (50, 80,
// 100). The row is the account's alert_rules row of kind key with no subject.
func (s *Service) SetKeyThresholds(ctx context.Context, accountID string, thresholds []int) (err error) {
	defer services.Wrap(&err, "budgets.SetKeyThresholds(%s)", accountID)
	if len(thresholds) == 0 {
		_, err = s.pool.Exec(ctx, `DELETE FROM alert_rules WHERE account_id = $1 AND kind = 'key' AND subject = ''`, accountID)
		return err
	}
	if thresholds, err = ValidateKeyThresholds(thresholds); err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		INSERT INTO alert_rules (account_id, kind, subject, thresholds, updated_at) VALUES ($1, 'key', '', $2, $3)
		ON CONFLICT (account_id, kind, subject) DO UPDATE SET thresholds = EXCLUDED.thresholds, updated_at = EXCLUDED.updated_at`,
		accountID, thresholds, s.now().UTC())
	return err
}

// KeyThresholds are the account's alert thresholds for its keys' limits: its own, or the default.
func (s *Service) KeyThresholds(ctx context.Context, accountID string) (_ []int, err error) {
	defer services.Wrap(&err, "budgets.KeyThresholds(%s)", accountID)
	var t []int16
	err = s.pool.QueryRow(ctx, `SELECT thresholds FROM alert_rules WHERE account_id = $1 AND kind = 'key' AND subject = ''`,
		accountID).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return slices.Clone(DefaultThresholds), nil
	}
	if err != nil {
		return nil, err
	}
	return ints(t), nil
}
