package requestlog

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
)

// NewestByOffering returns the newest n recorded attempts of each offering among those made with the API keys
// apiKeyIDs, by offering id, newest first: what routing's live figures would be measured from. An attempt
// carries what the gateway recorded of it: its request id, offering, status, whether it streamed, its time to
// first output (0: none came) and duration, when it ended, and the usage its response reported (nil: none).
func NewestByOffering(ctx context.Context, pool *pgxpool.Pool, apiKeyIDs []string, n int) (_ map[string][]GatewayRequest, err error) {
	defer services.Wrap(&err, "requestlog.NewestByOffering")
	rows, err := pool.Query(ctx, `
		SELECT offering_id::text, request_id, at, ttft_ms, coalesce(streamed, false), duration_ms,
			input_tokens, output_tokens, status
		FROM (SELECT g.*, row_number() OVER (PARTITION BY g.offering_id ORDER BY g.at DESC) AS newest
			FROM gateway_requests g WHERE g.api_key_id::text = ANY ($1)) g
		WHERE newest <= $2
		ORDER BY offering_id, at DESC`, apiKeyIDs, n)
	if err != nil {
		return nil, err
	}
	out := map[string][]GatewayRequest{}
	var (
		r                   GatewayRequest
		status              string
		ttftMs              *float64
		durationMs          float64
		inTokens, outTokens *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&r.OfferingID, &r.RequestID, &r.At, &ttftMs, &r.Streamed, &durationMs,
		&inTokens, &outTokens, &status}, func() error {
		a := GatewayRequest{OfferingID: r.OfferingID, RequestID: r.RequestID, At: r.At, Streamed: r.Streamed,
			Status: GatewayStatus(status), Duration: fromMs(durationMs)}
		if ttftMs != nil {
			a.TTFT = fromMs(*ttftMs)
		}
		if inTokens != nil || outTokens != nil {
			a.Usage = &admission.TokenCount{}
			if inTokens != nil {
				a.Usage.Input = *inTokens
			}
			if outTokens != nil {
				a.Usage.Output = *outTokens
			}
		}
		out[a.OfferingID] = append(out[a.OfferingID], a)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fromMs is a duration the log keeps in milliseconds.
func fromMs(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
