package accounts

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// UsersOfAccount lists the members of an account, the earliest to join first: whom its budgets
// may name and whom its alerts may reach. AccountID is the account asked about.
func (s *Service) UsersOfAccount(ctx context.Context, accountID string) (_ []User, err error) {
	defer services.Wrap(&err, "accounts.UsersOfAccount(%s)", accountID)
	rows, err := s.pool.Query(ctx, `SELECT u.id, m.account_id, u.email, u.role, u.created_at
		FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.account_id = $1
		ORDER BY m.created_at, u.email`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) {
		var u User
		err := r.Scan(&u.ID, &u.AccountID, &u.Email, &u.Role, &u.CreatedAt)
		return u, err
	})
}
