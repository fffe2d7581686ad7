package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
)

// Querier is what the catalog's reads for other packages go through: the pool, or a caller's transaction when
// they must come from the snapshot of its other reads (the close's).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

var (
	_ Querier = (*pgxpool.Pool)(nil)
	_ Querier = (pgx.Tx)(nil)
)

// ReadPriceBook reads the whole price book through q (Service.PriceBook reads it through the pool).
func ReadPriceBook(ctx context.Context, q Querier) (_ PriceBook, err error) {
	defer services.Wrap(&err, "catalog.ReadPriceBook")
	rows, err := q.Query(ctx, `SELECT `+priceColumns+` FROM prices ORDER BY tier, effective_from, id`)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanPrice)
	if err != nil {
		return nil, err
	}
	book := PriceBook{}
	for _, p := range list {
		book[p.Tier] = append(book[p.Tier], p)
	}
	return book, nil
}

// OfferingsByID reads the offerings of ids through q, by id, whatever their status: what a report or a document
// of past usage needs of the rigs that served it (their site, region and GPUs). An id of no offering is missing
// from the map.
func OfferingsByID(ctx context.Context, q Querier, ids []string) (_ map[string]Offering, err error) {
	defer services.Wrap(&err, "catalog.OfferingsByID")
	out := map[string]Offering{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT `+offeringColumns+` FROM offerings o WHERE o.id = ANY ($1::text[]::uuid[])`, ids)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanOffering)
	if err != nil {
		return nil, err
	}
	providers := make([]string, len(list))
	for i, o := range list {
		providers[i] = o.ProviderAccountID
	}
	names, err := accounts.NamesByID(ctx, q, providers)
	if err != nil {
		return nil, err
	}
	for _, o := range list {
		o.ProviderName = names[o.ProviderAccountID]
		out[o.ID] = o
	}
	return out, nil
}
