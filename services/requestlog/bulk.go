package requestlog

import (
	"context"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// Bulk loads and reads: what the benchmarks (cmd/meterbench, the gateway's bench-gateway) and data loads use to
// write the gateway's records by the million and to read back what the gateway recorded of a run.

// Loader is what a bulk load writes through: the pool, or a caller's transaction.
type Loader = services.Loader

var copiedColumns = []string{"request_id", "account_id", "api_key_id", "offering_id", "tier", "model", "http_status",
	"status", "input_tokens", "output_tokens", "ttft_ms", "duration_ms", "at", "input_bytes", "max_input_tokens",
	"max_output_tokens", "streamed", "relayed_output_bytes", "relayed_output_chunks", "cached_input_tokens"}

// CopyRecords writes the records by one COPY, as they come, and returns how many it wrote: each as Flush writes
// it, but without its hold (a loaded record holds no credit). No record may have the request id of one stored.
func CopyRecords(ctx context.Context, db Loader, records iter.Seq[GatewayRequest]) (_ int64, err error) {
	defer services.Wrap(&err, "requestlog.CopyRecords")
	next, stop := iter.Pull(records)
	defer stop()
	return db.CopyFrom(ctx, pgx.Identifier{"gateway_requests"}, copiedColumns, pgx.CopyFromFunc(func() ([]any, error) {
		r, ok := next()
		if !ok {
			return nil, nil
		}
		var in, out, cached, ttftMs any
		if r.Usage != nil {
			in, out, cached = r.Usage.Input, r.Usage.Output, r.Usage.Cached
		}
		if r.TTFT > 0 {
			ttftMs = float64(r.TTFT) / float64(time.Millisecond)
		}
		return []any{r.RequestID, r.AccountID, r.APIKeyID, r.OfferingID, string(r.Tier), r.Model, int32(r.HTTPStatus),
			string(r.Status), in, out, ttftMs, float64(r.Duration) / float64(time.Millisecond), r.At.UTC(), r.InputBytes,
			r.MaxInputTokens, r.MaxOutputTokens, r.Streamed, r.RelayedOutputBytes, r.RelayedOutputChunks, cached}, nil
	}))
}

// DurationsOfAccount reads the duration of each attempt of the account's requests that ended in [from, to), from
// the route ticket to the answer relayed, in milliseconds, by request id.
func DurationsOfAccount(ctx context.Context, pool *pgxpool.Pool, accountID string, from, to time.Time) (_ map[string]float64, err error) {
	defer services.Wrap(&err, "requestlog.DurationsOfAccount")
	rows, err := pool.Query(ctx, `SELECT request_id, duration_ms FROM gateway_requests
		WHERE account_id = $1 AND at >= $2 AND at < $3`, accountID, from, to)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	var id string
	var ms float64
	_, err = pgx.ForEachRow(rows, []any{&id, &ms}, func() error {
		out[id] = ms
		return nil
	})
	return out, err
}
