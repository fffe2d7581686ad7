package catalog

import (
	"github.com/jackc/pgx/v5"
)

// The catalog's reads queued into a caller's pgx.Batch, for a caller that sends several packages' statements
// together, in one round trip and in its own transaction (the meter's batch reads what it judges its events by).
// Each fills its map once the batch is sent and its results are read (BatchResults.Close).

// QueueRigs queues into b the read of the rigs of the offerings of ids (RigsByID), into rigs by offering id. The
// ids must be uuids as the database writes them, lower-case and canonical: another id fails the batch.
func QueueRigs(b *pgx.Batch, ids []string, rigs map[string]Rig) {
	b.Queue(rigsSelect, ids).Query(func(rows pgx.Rows) error {
		return scanRig(rows, rigs)
	})
}

// QueuePricesByID queues into b the read of the price book's rows of ids, into prices by id, whatever their
// effective time. An id of no row is missing from the map.
func QueuePricesByID(b *pgx.Batch, ids []int64, prices map[int64]Price) {
	b.Queue(`SELECT `+priceColumns+` FROM prices WHERE id = ANY ($1)`, ids).Query(func(rows pgx.Rows) error {
		_, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
			p, err := scanPrice(r)
			if err == nil {
				prices[p.ID] = p
			}
			return struct{}{}, err
		})
		return err
	})
}
