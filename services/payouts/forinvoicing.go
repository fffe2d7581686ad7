package payouts

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Querier is what the reads for other packages go through: the pool, or a caller's transaction when they must
// come from its snapshot or follow its locks.
type Querier = services.Querier

// UnderwayOf returns which of the statements of statementIDs have their payout under way: an attempt holds it or
// ended without an outcome (pending), or a transfer may exist (in doubt). Money may then be leaving for the
// statement, which is neither voided nor marked paid by hand meanwhile (docs/invoicing.md, "Paying statements").
// A statement without a payout under way is missing from the map.
func UnderwayOf(ctx context.Context, q Querier, statementIDs []string) (_ map[string]bool, err error) {
	defer services.Wrap(&err, "payouts.UnderwayOf")
	out := map[string]bool{}
	if len(statementIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT statement_id FROM payouts
		WHERE statement_id = ANY ($1::text[]) AND (status = 'pending' OR in_doubt)`, statementIDs)
	if err != nil {
		return nil, err
	}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		out[id] = true
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}
