package payouts

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
)

// payoutColumns read a payout p.
const payoutColumns = `p.id::text, p.statement_id, p.statement_number, p.period, p.provider_account_id::text,
	p.amount_cents, p.currency, p.status, coalesce(p.stripe_account_id, ''), coalesce(p.stripe_transfer_id, ''),
	coalesce(p.ledger_transaction_id::text, ''), p.attempts, p.last_error, p.in_doubt, p.attempt_started_at,
	p.created_at, p.updated_at, p.paid_at`

const payoutFrom = ` FROM payouts p`

// scanPayout reads a payout; its provider's name is left to named.
func (s *Service) scanPayout(row pgx.Row) (Payout, error) {
	var p Payout
	err := row.Scan(&p.ID, &p.StatementID, &p.StatementNumber, &p.Period, &p.ProviderAccountID,
		&p.AmountCents, &p.Currency, &p.Status, &p.StripeAccountID, &p.StripeTransferID,
		&p.LedgerTransactionID, &p.Attempts, &p.LastError, &p.InDoubt, &p.AttemptStartedAt,
		&p.CreatedAt, &p.UpdatedAt, &p.PaidAt)
	p.Actions = actionsOf(p, s.now())
	return p, err
}

// named writes each payout's provider's name, looked up through q (accounts.NamesByID): the
// pool, or the transaction that read the payouts.
func named(ctx context.Context, q accounts.Querier, list ...*Payout) error {
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.ProviderAccountID
	}
	names, err := accounts.NamesByID(ctx, q, ids)
	if err != nil {
		return err
	}
	for _, p := range list {
		p.ProviderName = names[p.ProviderAccountID]
	}
	return nil
}

var errPayoutNotFound = services.Errorf(services.CodeNotFound, "No such payout.")

// Get returns one payout, for finance.
func (s *Service) Get(ctx context.Context, id string) (_ Payout, err error) {
	defer services.Wrap(&err, "payouts.Get(%s)", id)
	if !uuidPattern.MatchString(id) {
		return Payout{}, errPayoutNotFound
	}
	p, err := s.scanPayout(s.pool.QueryRow(ctx, `SELECT `+payoutColumns+payoutFrom+` WHERE p.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, errPayoutNotFound
	}
	if err != nil {
		return Payout{}, err
	}
	return p, named(ctx, s.pool, &p)
}

// ForStatement returns the payout of a statement; ok is false when none was made.
func (s *Service) ForStatement(ctx context.Context, statementID string) (_ Payout, ok bool, err error) {
	defer services.Wrap(&err, "payouts.ForStatement(%s)", statementID)
	p, err := s.scanPayout(s.pool.QueryRow(ctx, `SELECT `+payoutColumns+payoutFrom+` WHERE p.statement_id = $1`, statementID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Payout{}, false, nil
	}
	if err != nil {
		return Payout{}, false, err
	}
	return p, true, named(ctx, s.pool, &p)
}

// MaxListed bounds one listing of payouts.
const MaxListed = 500

// ListFilter selects payouts.
type ListFilter struct {
	Status            Status // "" for every status
	ProviderAccountID string // "" for every provider (finance); a provider's own otherwise
	Limit             int    // 1..MaxListed; 0 means 200
}

// List returns payouts, the newest first: every provider's for finance, or one provider's.
func (s *Service) List(ctx context.Context, f ListFilter) (_ []Payout, err error) {
	defer services.Wrap(&err, "payouts.List")
	var where []string
	var args []any
	switch f.Status {
	case "":
	case StatusPending, StatusPaid, StatusFailed:
		args = append(args, string(f.Status))
		where = append(where, fmt.Sprintf("p.status = $%d", len(args)))
	default:
		return nil, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"status": "A status is pending, paid or failed."}}
	}
	if f.ProviderAccountID != "" {
		if !uuidPattern.MatchString(f.ProviderAccountID) {
			return []Payout{}, nil
		}
		args = append(args, f.ProviderAccountID)
		where = append(where, fmt.Sprintf("p.provider_account_id = $%d", len(args)))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 200
	}
	args = append(args, min(limit, MaxListed))
	query := `SELECT ` + payoutColumns + payoutFrom
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += fmt.Sprintf(` ORDER BY p.created_at DESC, p.id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payout, error) { return s.scanPayout(r) })
	if err != nil {
		return nil, err
	}
	each := make([]*Payout, len(list))
	for i := range list {
		each[i] = &list[i]
	}
	return list, named(ctx, s.pool, each...)
}
