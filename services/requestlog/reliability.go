package requestlog

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/services/ticket"
)

var _ reliability.Source = (*RequestLog)(nil)

// Reliability counts every offering's attempts in the gateway's record over the window, as
// docs/reliability.md defines them, in one query over the day's rows (index
// gateway_requests_at_idx), leaving out the attempts billed to the accounts excluded:
//   - a success is an attempt answered with a 2xx relayed to its end (ok);
//   - a rate limit is an attempt the rig answered 429, relayed or failed over;
//   - an error is any other attempt that failed over (a 5xx, a refused ticket, a redirect, an answer that
//     was not one) or that broke off after its first byte, and any other error but a 4xx;
//   - a refusal is a 4xx other than 429 the rig answered as an OpenAI error, relayed to the customer;
//   - a cancellation is an attempt whose client went away first.
//
// The latency samples are the streamed successes that ended in the half hour: their time to first token
// from the gateway's clock, and their throughput, the output tokens after the first over the time from the
// first token to the last, (output - 1) / (duration - ttft). The output tokens are the answer's usage, at
// most what the gateway saw relayed (ticket.RelayBound): a rig cannot look faster by claiming tokens it did
// not send.
func (l *RequestLog) Reliability(ctx context.Context, w reliability.Window, excluded []string) (_ map[string]reliability.Counts, err error) {
	defer services.Wrap(&err, "requestlog.RequestLog.Reliability")
	if excluded == nil {
		excluded = []string{}
	}
	rows, err := l.pool.Query(ctx, reliabilityQuery, w.DayFrom, w.RecentFrom, w.To, excluded, ticket.OutputSlack)
	if err != nil {
		return nil, err
	}
	out := map[string]reliability.Counts{}
	var id string
	var c reliability.Counts
	var ttft, tps []float64
	_, err = pgx.ForEachRow(rows, []any{&id, &c.Successes, &c.Errors, &c.RateLimited, &c.Refused, &c.Canceled,
		&c.TTFTSamples, &ttft, &c.TPSSamples, &tps}, func() error {
		c.TTFTMs, c.TPS = percentilesOf(ttft), percentilesOf(tps)
		out[id] = c
		return nil
	})
	return out, err
}

// reliabilityQuery counts the attempts of the day (RequestLog.Reliability): $1 to $3 is the day, $2 to $3
// the half hour, $4 the accounts left out, $5 ticket.OutputSlack.
const reliabilityQuery = `
	WITH g AS (
		SELECT offering_id, status, http_status, ttft_ms,
			at >= $2 AND status = 'ok' AND streamed AND ttft_ms IS NOT NULL AS sampled,
			CASE WHEN output_tokens IS NOT NULL
				THEN (least(output_tokens, relayed_output_bytes + relayed_output_chunks + $5) - 1)
					* 1000.0 / nullif(duration_ms - ttft_ms, 0) END AS tps
		FROM gateway_requests
		WHERE at >= $1 AND at < $3 AND account_id <> ALL ($4::uuid[])
	)
	SELECT offering_id::text,
		count(*) FILTER (WHERE status = 'ok'),
		count(*) FILTER (WHERE (status = 'failed_over' AND http_status <> 429)
			OR (status = 'error' AND http_status NOT BETWEEN 400 AND 499)),
		count(*) FILTER (WHERE status IN ('error', 'failed_over') AND http_status = 429),
		count(*) FILTER (WHERE status = 'error' AND http_status BETWEEN 400 AND 499 AND http_status <> 429),
		count(*) FILTER (WHERE status = 'canceled'),
		count(*) FILTER (WHERE sampled),
		percentile_disc(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY ttft_ms) FILTER (WHERE sampled),
		count(*) FILTER (WHERE sampled AND tps > 0),
		percentile_disc(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY tps) FILTER (WHERE sampled AND tps > 0)
	FROM g
	GROUP BY offering_id`

// percentilesOf reads percentile_disc's array of P50, P90 and P99; nil without samples.
func percentilesOf(v []float64) *reliability.Percentiles {
	if len(v) != 3 {
		return nil
	}
	return &reliability.Percentiles{P50: v[0], P90: v[1], P99: v[2]}
}
