package history

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/usage"
)

// measure writes what the platform measured of each offering the history served: the figures of the gateway's
// records of its attempts (gateway_requests, as requestlog.RequestLog wrote them), the newest routing.WindowSize of
// them, by the rules of routing's live figures (routing.FiguresOf): percentiles of the streamed requests' times
// to first token, throughput over the time the rig was busy. An offering whose records hold fewer than
// catalog.MinMeasuredRequests streamed requests keeps no measured figures: its claims stand, as routing's do.
func (h *history) measure(ctx context.Context) error {
	var keys []string
	for _, c := range h.customers {
		for _, id := range c.keys {
			keys = append(keys, id)
		}
	}
	rows, err := h.pool.Query(ctx, `
		SELECT offering_id::text, request_id, at, ttft_ms, coalesce(streamed, false), duration_ms,
			coalesce(input_tokens, 0), coalesce(output_tokens, 0), status
		FROM (SELECT g.*, row_number() OVER (PARTITION BY g.offering_id ORDER BY g.at DESC) AS newest
			FROM gateway_requests g WHERE g.api_key_id::text = ANY ($1)) g
		WHERE newest <= $2`, keys, routing.WindowSize)
	if err != nil {
		return err
	}
	obs := map[string][]routing.Observation{}
	var (
		offering, requestID, status string
		at                          time.Time
		ttftMs                      *float64
		streamed                    bool
		durationMs                  float64
		in, out                     int64
	)
	_, err = pgx.ForEachRow(rows, []any{&offering, &requestID, &at, &ttftMs, &streamed, &durationMs, &in, &out, &status}, func() error {
		o := routing.Observation{RequestID: requestID, At: at, Streamed: streamed, Duration: ms(durationMs),
			InputTokens: in, OutputTokens: out, Status: usage.StatusOK}
		if ttftMs != nil {
			o.TTFT = ms(*ttftMs)
		}
		switch requestlog.GatewayStatus(status) { // as the gateway reports an attempt to routing
		case requestlog.GatewayCanceled:
			o.Status = usage.StatusCanceled
		case requestlog.GatewayError, requestlog.GatewayFailedOver:
			o.Status = usage.StatusError
		}
		obs[offering] = append(obs[offering], o)
		return nil
	})
	if err != nil {
		return err
	}
	for _, o := range h.offerings {
		f := routing.FiguresOf(obs[o.ID])
		if f.Requests < catalog.MinMeasuredRequests {
			continue
		}
		if _, err := h.catalog.MeasureSeeded(ctx, o.ID, int64(f.Requests), f.TTFTP50Ms, f.TTFTP99Ms, f.TokensPerSec); err != nil {
			return err
		}
	}
	return nil
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
