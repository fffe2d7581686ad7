package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// The catalog as package invoicing reads it into documents: the rigs of a statement's offerings, and the price
// versions an invoice's lines name.

// QueueRigsOfProviders queues on b the read of the rigs of the providers' offerings, whatever their status, and
// calls each with every one and its provider as the batch is read.
func QueueRigsOfProviders(b *pgx.Batch, providerIDs []string, each func(providerID string, r Rig)) {
	b.Queue(`SELECT id::text, provider_account_id::text, gpu, gpu_count, region, site, pue FROM offerings
		WHERE provider_account_id = ANY ($1::text[]::uuid[])`, providerIDs).Query(func(rows pgx.Rows) error {
		var provider string
		var r Rig
		_, err := pgx.ForEachRow(rows, []any{&r.OfferingID, &provider, &r.GPU, &r.GPUCount, &r.Region, &r.Site, &r.StatedPUE},
			func() error {
				each(provider, r)
				return nil
			})
		if err != nil {
			return fmt.Errorf("catalog: the offerings of %d providers: %w", len(providerIDs), err)
		}
		return nil
	})
}

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
