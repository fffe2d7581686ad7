package metering

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// addBatchCosts adds the stored events that served batch lines to usage_by_batch, in the
// transaction that stores them, so that each is counted once, with its usage row. The meter owns
// the table; the batch service reads it for a batch's cost (docs/batches.md, "Cost"). The sums
// are the database's numeric, which no batch's charges can overflow; the rows are upserted in
// key order, so that committers lock them in one order.
func addBatchCosts(ctx context.Context, tx pgx.Tx, stored []*pricedEvent) error {
	var ids, accounts []string
	var charges []int64
	for _, pe := range stored {
		batchID, isLine := services.BatchOfRequest(pe.c.ev.Data.RequestID)
		if !isLine {
			continue
		}
		ids, accounts, charges = append(ids, batchID), append(accounts, pe.account), append(charges, int64(pe.charge))
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO usage_by_batch AS b (batch_id, account_id, requests, charge_pico)
		SELECT batch_id, account_id::uuid, count(*), sum(charge_pico)
		FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v (batch_id, account_id, charge_pico)
		GROUP BY batch_id, account_id ORDER BY batch_id, account_id
		ON CONFLICT (batch_id, account_id) DO UPDATE SET requests = b.requests + EXCLUDED.requests,
			charge_pico = b.charge_pico + EXCLUDED.charge_pico`, ids, accounts, charges)
	return err
}
