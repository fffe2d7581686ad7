package requestlog

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
)

// Querier is what the reads of the gateway's record for other packages go through: the pool, or the caller's
// transaction (the meter's batch, a batch line's recovery).
type Querier = services.Querier

// Billed is the gateway's record of an attempt as the meter bills the attempt's usage by it (AttemptsBilled).
type Billed struct {
	Recorded   bool // false when the gateway has no record of the attempt; the rest is then zero
	HTTPStatus int
	Status     GatewayStatus
	// RelayedOutputBytes and RelayedOutputChunks are the output the gateway relayed, when Counted; a gateway that
	// did not count it left them out of its record.
	RelayedOutputBytes, RelayedOutputChunks int64
	Counted                                 bool
	// CachedInputTokens are the cached input tokens the answer's usage showed the client, when SawCached.
	CachedInputTokens int64
	SawCached         bool
}

// AttemptsBilled reads through q the gateway's records of the requests of requestIDs, in their order: the i-th is
// the record of requestIDs[i], Recorded false when there is none.
//
// Each record comes back with the index of its request, and its status only when it is not "ok": no string to
// read back for nearly every one. Each request is looked up by its primary key, one probe per request (the LATERAL
// subquery with OFFSET 0 is never flattened into a join, so no plan scans the table whole), and the statement is
// planned for each call, as an unnamed statement described afresh (QueryExecModeDescribeExec), outside a batch's
// cached statements: a plan cached while gateway_requests was nearly empty would scan it whole as it grows, and a
// join planned for a batch of thousands hashes the whole table, 150 ms a batch at 200,000 records. Described, the
// request ids go in and the records come back in binary, which costs both sides less than thousands of them
// written and parsed as text: two round trips, one to describe the statement and one to run it.
func AttemptsBilled(ctx context.Context, q Querier, requestIDs []string) (_ []Billed, err error) {
	defer services.Wrap(&err, "requestlog.AttemptsBilled")
	out := make([]Billed, len(requestIDs))
	rows, err := q.Query(ctx, `SELECT r.n - 1, g.http_status, nullif(g.status, 'ok'), g.relayed_output_bytes, g.relayed_output_chunks,
			g.cached_input_tokens
		FROM unnest($1::text[]) WITH ORDINALITY AS r (request_id, n)
		CROSS JOIN LATERAL (SELECT http_status, status, relayed_output_bytes, relayed_output_chunks, cached_input_tokens
			FROM gateway_requests WHERE request_id = r.request_id OFFSET 0) g`, pgx.QueryExecModeDescribeExec, requestIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var status pgtype.Text
		var bytes, chunks, cached pgtype.Int8
		var r Billed
		if err := rows.Scan(&i, &r.HTTPStatus, &status, &bytes, &chunks, &cached); err != nil {
			return nil, err
		}
		r.Recorded, r.Status = true, GatewayOK
		if status.Valid {
			r.Status = GatewayStatus(status.String)
		}
		r.RelayedOutputBytes, r.RelayedOutputChunks, r.Counted = bytes.Int64, chunks.Int64, bytes.Valid
		r.CachedInputTokens, r.SawCached = cached.Int64, cached.Valid
		out[i] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Answered reads through q which of the requests of requestIDs the gateway recorded as answered (GatewayOK).
func Answered(ctx context.Context, q Querier, requestIDs []string) (_ []string, err error) {
	defer services.Wrap(&err, "requestlog.Answered")
	rows, err := q.Query(ctx, `SELECT request_id FROM gateway_requests WHERE request_id = ANY($1) AND status = 'ok'`, requestIDs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
