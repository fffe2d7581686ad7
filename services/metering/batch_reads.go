package metering

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// What the batch service reads of the meter's usage: a batch's cost, and whether a line's attempts were metered.

// BatchCosts reads through q what the meter billed the requests of the batches of batchIDs, each of the account at
// the same index of accountIDs (usage_by_batch): by batch id, a batch without metered requests missing. It is exact
// once the batches' usage is metered (docs/batches.md, "Cost").
func BatchCosts(ctx context.Context, q Querier, batchIDs, accountIDs []string) (_ map[string]money.BigPico, err error) {
	defer services.Wrap(&err, "metering.BatchCosts")
	out := make(map[string]money.BigPico, len(batchIDs))
	if len(batchIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT u.batch_id, sum(u.charge_pico)
		FROM unnest($1::text[], $2::uuid[]) AS b (id, account_id)
		JOIN usage_by_batch u ON u.batch_id = b.id AND u.account_id = b.account_id
		GROUP BY u.batch_id`, batchIDs, accountIDs)
	if err != nil {
		return nil, err
	}
	var id string
	var cost money.BigPico
	_, err = pgx.ForEachRow(rows, []any{&id, &cost}, func() error {
		out[id] = cost
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequestsMetered reads through q which of the requests of requestIDs have a usage row, by request id, each true
// when its row carries a charge or a provider's earning.
func RequestsMetered(ctx context.Context, q Querier, requestIDs []string) (_ map[string]bool, err error) {
	defer services.Wrap(&err, "metering.RequestsMetered")
	rows, err := q.Query(ctx, `SELECT request_id, charge_pico > 0 OR payable_pico > 0 FROM usage_events WHERE request_id = ANY($1)`,
		requestIDs)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var id string
	var charged bool
	_, err = pgx.ForEachRow(rows, []any{&id, &charged}, func() error {
		out[id] = charged
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
