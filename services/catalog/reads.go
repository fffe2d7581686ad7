package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
)

// Querier is what the catalog's reads for other packages go through: the pool, or a caller's transaction when
// they must come from the snapshot of its other reads (the close's).
type Querier = services.Querier

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

// Rig is what a report or a document of past usage, or the meter, needs of the offering that served it: whose it
// is and the model it serves, the GPUs it runs on, and where (region, site, PUE as its provider stated it, nil when
// not stated).
type Rig struct {
	OfferingID        string
	ProviderAccountID string
	Model             string
	GPU               string
	GPUCount          int
	Region            string
	Site              carbon.Site
	StatedPUE         *float64
}

// rigsSelect reads the rigs of the offerings whose ids are the uuid text[] $1, in scanRig's order.
const rigsSelect = `SELECT id::text, provider_account_id::text, model, gpu, gpu_count, region, site, pue FROM offerings
	WHERE id = ANY ($1::text[]::uuid[])`

// scanRig reads the rigs of rigsSelect's rows into out, by offering id.
func scanRig(rows pgx.Rows, out map[string]Rig) error {
	var r Rig
	_, err := pgx.ForEachRow(rows, []any{&r.OfferingID, &r.ProviderAccountID, &r.Model, &r.GPU, &r.GPUCount, &r.Region,
		&r.Site, &r.StatedPUE}, func() error {
		out[r.OfferingID] = r
		return nil
	})
	return err
}

// RigsByID reads the rigs of the offerings of ids through q, by offering id, whatever the offerings' status. An id
// of no offering is missing from the map.
func RigsByID(ctx context.Context, q Querier, ids []string) (_ map[string]Rig, err error) {
	defer services.Wrap(&err, "catalog.RigsByID")
	out := map[string]Rig{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, rigsSelect, ids)
	if err != nil {
		return nil, err
	}
	if err := scanRig(rows, out); err != nil {
		return nil, err
	}
	return out, nil
}
