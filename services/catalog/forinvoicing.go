package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// The catalog as package invoicing reads it into documents: the price versions an invoice's lines name.

// PricesByID reads the price versions of ids through q, by id. An id of no price is missing from the map.
func PricesByID(ctx context.Context, q Querier, ids []int64) (_ map[int64]Price, err error) {
	defer services.Wrap(&err, "catalog.PricesByID")
	out := map[int64]Price{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT `+priceColumns+` FROM prices WHERE id = ANY ($1::bigint[])`, ids)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanPrice)
	if err != nil {
		return nil, err
	}
	for _, p := range list {
		out[p.ID] = p
	}
	return out, nil
}
