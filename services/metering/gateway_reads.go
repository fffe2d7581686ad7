package metering

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// GatewayReads is what the gateway reads of the meter's usage: its admission, of the keys' spend and of which
// requests are metered (admission.Usage), and its request log, of the usage rows it reconciles its records with
// (requestlog.Usage). The platform hands it to both, since both packages are imported by this one.
type GatewayReads struct{}

var _ requestlog.Usage = GatewayReads{}

// Metered is the SQL condition that the request whose id is the SQL expression requestID is metered: that its key
// is stored (usage_event_keys), as the meter stores it with its usage row. Another package's statement carries it
// where a count must tell metered requests from the others in the statement's own snapshot, in the one round trip
// the statement takes (admission's holds, the request log's holds and its reconciliation); everything else of the
// meter's usage is read through this package's functions.
func (GatewayReads) Metered(requestID string) string {
	return `EXISTS (SELECT 1 FROM usage_event_keys metered_key WHERE metered_key.request_id = (` + requestID + `))`
}

// MeteredTokens reads through q the input and output tokens the meter billed the metered requests of requestIDs
// (requestlog.Usage), by request id, each row found through its key, in its month's partition.
func (GatewayReads) MeteredTokens(ctx context.Context, q requestlog.Querier, requestIDs []string) (_ map[string]requestlog.Tokens, err error) {
	defer services.Wrap(&err, "metering.GatewayReads.MeteredTokens")
	out := map[string]requestlog.Tokens{}
	if len(requestIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `
		SELECT k.request_id, u.input_tokens, u.output_tokens
		FROM usage_event_keys k
		JOIN usage_events u ON u.occurred_at = k.occurred_at AND u.request_id = k.request_id
		WHERE k.request_id = ANY ($1)`, requestIDs)
	if err != nil {
		return nil, err
	}
	var id string
	var t requestlog.Tokens
	_, err = pgx.ForEachRow(rows, []any{&id, &t.Input, &t.Output}, func() error {
		out[id] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MeteredUsage reads through q the usage rows of the requests of requestIDs (requestlog.Usage), by request id; a
// request without one is missing.
func (GatewayReads) MeteredUsage(ctx context.Context, q requestlog.Querier, requestIDs []string) (_ map[string]requestlog.MeteredUsage, err error) {
	defer services.Wrap(&err, "metering.GatewayReads.MeteredUsage")
	out := map[string]requestlog.MeteredUsage{}
	if len(requestIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `
		SELECT request_id, account_id::text, api_key_id, offering_id::text, tier, model, reported_input_tokens,
			reported_output_tokens, input_tokens, output_tokens, charge_pico::bigint, occurred_at, coalesce(flag, ''),
			flag_reason
		FROM usage_events WHERE request_id = ANY ($1)`, requestIDs)
	if err != nil {
		return nil, err
	}
	var id string
	var m requestlog.MeteredUsage
	_, err = pgx.ForEachRow(rows, []any{&id, &m.AccountID, &m.APIKeyID, &m.OfferingID, &m.Tier, &m.Model, &m.ReportedInput,
		&m.ReportedOutput, &m.Input, &m.Output, &m.ChargePico, &m.OccurredAt, &m.Flag, &m.FlagReason}, func() error {
		out[id] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FlaggedByMeter reads through q the newest limit requests the meter flagged (Flag), the latest metered first.
func (GatewayReads) FlaggedByMeter(ctx context.Context, q requestlog.Querier, limit int) (_ []requestlog.Flagged, err error) {
	defer services.Wrap(&err, "metering.GatewayReads.FlaggedByMeter")
	rows, err := q.Query(ctx, `SELECT request_id, metered_at FROM usage_events WHERE flag IS NOT NULL
		ORDER BY metered_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[requestlog.Flagged])
}

var _ admission.Usage = GatewayReads{}

// QueueMetered queues into b the read of which of requestIDs are metered (admission.Usage), each passed to metered.
func (GatewayReads) QueueMetered(b *pgx.Batch, requestIDs []string, metered func(requestID string)) {
	b.Queue(`SELECT request_id FROM usage_event_keys WHERE request_id = ANY($1::text[])`, requestIDs).Query(func(rows pgx.Rows) error {
		var id string
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			metered(id)
			return nil
		})
		return err
	})
}

// QueueSpendInPeriods queues into b the read of each key's metered spend in the period keys gives it that holds now
// (admission.Usage): one row of api_key_spend_days for a day, at most seven for a week, one row of api_key_spend for
// a month.
func (GatewayReads) QueueSpendInPeriods(b *pgx.Batch, keys map[string]periods.Period, now time.Time, spent map[string]money.BigPico) {
	ids, kinds := make([]string, 0, len(keys)), make([]string, 0, len(keys))
	for id, p := range keys {
		ids, kinds = append(ids, id), append(kinds, string(p))
	}
	b.Queue(`
		SELECT id, CASE period
				WHEN 'day' THEN coalesce((SELECT charge_pico FROM api_key_spend_days d WHERE d.api_key_id = id AND d.day = $3::date), 0)
				WHEN 'week' THEN coalesce((SELECT sum(charge_pico) FROM api_key_spend_days d WHERE d.api_key_id = id
					AND d.day >= $4::date AND d.day < $4::date + 7), 0)
				ELSE coalesce((SELECT charge_pico FROM api_key_spend s WHERE s.api_key_id = id AND s.month = $5), 0) END
		FROM unnest($1::text[], $2::text[]) AS k (id, period)`,
		ids, kinds, periods.Day.Start(now), periods.Week.Start(now), periods.Month.Start(now)).Query(func(rows pgx.Rows) error {
		var id string
		var charge money.BigPico
		_, err := pgx.ForEachRow(rows, []any{&id, &charge}, func() error {
			spent[id] = charge
			return nil
		})
		return err
	})
}

// QueueKeySpend queues into b the read of the keys' metered spend in month (api_key_spend) and on each day of
// [from, to) (api_key_spend_days), into spend (admission.Usage).
func (GatewayReads) QueueKeySpend(b *pgx.Batch, keys []string, month, from, to time.Time, spend *admission.KeySpend) {
	b.Queue(`SELECT api_key_id, charge_pico FROM api_key_spend WHERE api_key_id = ANY($1::text[]) AND month = $2`,
		keys, month).Query(func(rows pgx.Rows) error {
		var key string
		var charge money.BigPico
		_, err := pgx.ForEachRow(rows, []any{&key, &charge}, func() error {
			spend.Month[key] = charge
			return nil
		})
		return err
	})
	b.Queue(`SELECT api_key_id, day, charge_pico FROM api_key_spend_days
		WHERE api_key_id = ANY($1::text[]) AND day >= $2::date AND day < $3::date`, keys, from, to).Query(func(rows pgx.Rows) error {
		var d admission.DaySpend
		_, err := pgx.ForEachRow(rows, []any{&d.Key, &d.Day, &d.Charge}, func() error {
			spend.Days = append(spend.Days, d)
			return nil
		})
		return err
	})
}
