package accounts

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Querier is what the lookups by ids read through: the pool, or a caller's transaction when the names must come
// from the snapshot its other reads come from.
type Querier = services.Querier

// NamesByID returns the names of the accounts of ids, by id: what a list of another package's rows shows beside
// each account's id, looked up after the rows are read. An id of no account is missing from the map.
func NamesByID(ctx context.Context, q Querier, ids []string) (_ map[string]string, err error) {
	defer services.Wrap(&err, "accounts.NamesByID")
	return textByID(ctx, q, `SELECT id::text, name FROM accounts WHERE id = ANY ($1::uuid[])`, ids)
}

// EmailsByID returns the emails of the users of ids, by id, as NamesByID does the accounts' names.
func EmailsByID(ctx context.Context, q Querier, ids []string) (_ map[string]string, err error) {
	defer services.Wrap(&err, "accounts.EmailsByID")
	return textByID(ctx, q, `SELECT id::text, email FROM users WHERE id = ANY ($1::uuid[])`, ids)
}

// textByID reads a query of (id, text) rows over the distinct ids into a map.
func textByID(ctx context.Context, q Querier, sql string, ids []string) (map[string]string, error) {
	out := map[string]string{}
	distinct := make([]string, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			distinct = append(distinct, id)
		}
	}
	if len(distinct) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, sql, distinct)
	if err != nil {
		return nil, err
	}
	var id, text string
	_, err = pgx.ForEachRow(rows, []any{&id, &text}, func() error {
		out[id] = text
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AccountNames is NamesByID through the service's own pool, for a page that lists accounts'
// rows it read from this package.
func (s *Service) AccountNames(ctx context.Context, ids []string) (map[string]string, error) {
	return NamesByID(ctx, s.pool, ids)
}
