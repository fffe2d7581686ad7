package metering

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// GatewayReads is what the gateway's request log reads of the meter's usage rows (requestlog.Usage), handed to it
// by the platform, since package requestlog is imported by this one.
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

// MeteredUsage reads through q the usage rows of the requests of requestIDs, by request id; a request not metered
// is missing. Each row is found through its key, in its month's partition.
func (GatewayReads) MeteredUsage(ctx context.Context, q requestlog.Querier, requestIDs []string) (_ map[string]requestlog.MeteredUsage, err error) {
	defer services.Wrap(&err, "metering.GatewayReads.MeteredUsage")
	out := map[string]requestlog.MeteredUsage{}
	if len(requestIDs) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `
		SELECT u.request_id, u.account_id::text, u.api_key_id, u.offering_id::text, u.tier, u.model,
			u.reported_input_tokens, u.reported_output_tokens, u.input_tokens, u.output_tokens, u.charge_pico::bigint,
			u.occurred_at, coalesce(u.flag, ''), u.flag_reason
		FROM usage_event_keys k
		JOIN usage_events u ON u.occurred_at = k.occurred_at AND u.request_id = k.request_id
		WHERE k.request_id = ANY ($1)`, requestIDs)
	if err != nil {
		return nil, err
	}
	var id string
	var m requestlog.MeteredUsage
	var reason pgtype.Text
	_, err = pgx.ForEachRow(rows, []any{&id, &m.AccountID, &m.APIKeyID, &m.OfferingID, &m.Tier, &m.Model, &m.ReportedInput,
		&m.ReportedOutput, &m.Input, &m.Output, &m.ChargePico, &m.OccurredAt, &m.Flag, &reason}, func() error {
		m.FlagReason = nil
		if reason.Valid {
			s := reason.String
			m.FlagReason = &s
		}
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
