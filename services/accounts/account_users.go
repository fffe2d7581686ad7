package accounts

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// UsersOfAccount lists the people of an account, oldest first: whom its budgets may name and
// whom its alerts may reach.
func (s *Service) UsersOfAccount(ctx context.Context, accountID string) (_ []User, err error) {
	defer services.Wrap(&err, "accounts.UsersOfAccount(%s)", accountID)
	rows, err := s.pool.Query(ctx, `SELECT id, account_id, email, role, created_at FROM users WHERE account_id = $1
		ORDER BY created_at, email`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) {
		var u User
		err := r.Scan(&u.ID, &u.AccountID, &u.Email, &u.Role, &u.CreatedAt)
		return u, err
	})
}
