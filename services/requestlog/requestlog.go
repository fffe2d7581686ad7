package requestlog

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpumarket/gpumarket/services/admission"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// The gateway's record of what it saw (RequestLog), and its reconciliation with the meter.

// GatewayStatus is how an attempt ended as the gateway saw it.
type GatewayStatus string

const (
	GatewayOK         GatewayStatus = "ok"          // a 2xx relayed whole
	GatewayError      GatewayStatus = "error"       // a refusal by the rig, or a response that broke off
	GatewayCanceled   GatewayStatus = "canceled"    // the client went away first
	GatewayFailedOver GatewayStatus = "failed_over" // a 5xx before the first byte; the next candidate was tried
)

// GatewayRequest is one attempt of a gateway request, as the gateway saw it.
type GatewayRequest struct {
	RequestID  string
	AccountID  string
	APIKeyID   string
	OfferingID string
	Tier       catalog.Tier
	Model      string
	HTTPStatus int
	Status     GatewayStatus
	Usage      *admission.TokenCount // from the response; nil when none came by
	TTFT       time.Duration         // to the first output; 0 when none came
	Duration   time.Duration
	At         time.Time // when the attempt ended
	// What the gateway bounded and relayed, which the meter bills the rig's report against.
	InputBytes      int64 // the body forwarded to the rig
	MaxInputTokens  int64 // the route ticket's bounds
	MaxOutputTokens int64
	Streamed        bool
	// RelayedOutputBytes is the output text of a stream's chunks, or the whole body of a
	// response that was not streamed; RelayedOutputChunks counts the stream's chunks that
	// carried output.
	RelayedOutputBytes  int64
	RelayedOutputChunks int64
	// Hold is what admission holds of the account's credit until the meter bills the attempt
	// (Reservation.Settle); written with the record, in admission_holds, when above zero.
	Hold admission.Hold
}

// Defaults of RequestLog.
const (
	// UnmeteredAfter is how long a request may go without a metered row before it is
	// reconciled without one: flagged when its response reported output.
	UnmeteredAfter  = 15 * time.Minute
	requestLogEvery = 100 * time.Millisecond
	requestLogBatch = 500
	// requestLogMax bounds the records waiting to be written; beyond it new ones are dropped
	// and counted, rather than holding up requests while the database is away.
	requestLogMax  = 100_000
	reconcileBatch = 10_000
)

// RequestLog keeps what the gateway saw of each request (table gateway_requests) and
// reconciles it with the meter's usage rows: a difference of more than 1% in input or output
// tokens, or output the response reported but no meter row after UnmeteredAfter, is flagged
// for review (docs/failure-cases.md, case 17). Records are written in batches off the request
// path by Run.
type RequestLog struct {
	pool *pgxpool.Pool
	now  func() time.Time
	log  *slog.Logger

	// writing is held for the whole of a Flush: a Flush returns once every record queued before it is written,
	// also those another Flush (Run's) had taken and was still writing.
	writing sync.Mutex
	mu      sync.Mutex
	buf     []GatewayRequest
	dropped int64
	wake    chan struct{}
}

// NewRequestLog returns the log; Run writes it.
func NewRequestLog(pool *pgxpool.Pool, now func() time.Time, log *slog.Logger) *RequestLog {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &RequestLog{pool: pool, now: now, log: log, wake: make(chan struct{}, 1)}
}

// Record queues an attempt to be written. It never waits on the database.
func (l *RequestLog) Record(r GatewayRequest) {
	l.mu.Lock()
	if len(l.buf) >= requestLogMax {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.buf = append(l.buf, r)
	full := len(l.buf) >= requestLogBatch
	l.mu.Unlock()
	if full {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// Run writes the queued records every tenth of a second, or sooner when a batch is full, until
// ctx ends; then it writes what is left, briefly.
func (l *RequestLog) Run(ctx context.Context) {
	t := time.NewTicker(requestLogEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := l.Flush(last); err != nil {
				l.log.Warn("gateway request log: last write failed", "error", err)
			}
			cancel()
			return
		case <-t.C:
		case <-l.wake:
		}
		if err := l.Flush(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("gateway request log: write failed; retrying", "error", err)
		}
	}
}

// Flush writes every queued record, those a Flush in progress had taken included. Records a write
// failed on are queued again, unless the database refused them as invalid (they are dropped and
// logged).
func (l *RequestLog) Flush(ctx context.Context) (err error) {
	defer services.Wrap(&err, "requestlog.RequestLog.Flush")
	l.writing.Lock()
	defer l.writing.Unlock()
	l.mu.Lock()
	batch, dropped := l.buf, l.dropped
	l.buf, l.dropped = nil, 0
	l.mu.Unlock()
	if dropped > 0 {
		l.log.Error("gateway request log: records dropped while the database was behind", "dropped", dropped)
	}
	for len(batch) > 0 {
		n := min(len(batch), requestLogBatch)
		if err := l.insert(ctx, batch[:n]); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code[:2] == "23" {
				l.log.Error("gateway request log: records refused by the database; dropped", "records", n, "error", err)
				batch = batch[n:]
				continue
			}
			l.mu.Lock()
			l.buf = append(batch, l.buf...)
			l.mu.Unlock()
			return err
		}
		batch = batch[n:]
	}
	return nil
}

func (l *RequestLog) insert(ctx context.Context, rs []GatewayRequest) error {
	n := len(rs)
	ids, accts, keys, offerings := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tiers, models, statuses := make([]string, n), make([]string, n), make([]string, n)
	codes := make([]int32, n)
	in, out, cached := make([]*int64, n), make([]*int64, n), make([]*int64, n)
	ttftMs, durationMs := make([]*float64, n), make([]float64, n)
	at := make([]time.Time, n)
	inBytes, maxIn, maxOut := make([]int64, n), make([]int64, n), make([]int64, n)
	streamed := make([]bool, n)
	outBytes, outChunks := make([]int64, n), make([]int64, n)
	holds, holdUntil := make([]int64, n), make([]time.Time, n)
	for i, r := range rs {
		holds[i], holdUntil[i] = int64(r.Hold.Amount), r.Hold.Until.UTC()
		inBytes[i], maxIn[i], maxOut[i], streamed[i] = r.InputBytes, r.MaxInputTokens, r.MaxOutputTokens, r.Streamed
		outBytes[i], outChunks[i] = r.RelayedOutputBytes, r.RelayedOutputChunks
		ids[i], accts[i], keys[i], offerings[i] = r.RequestID, r.AccountID, r.APIKeyID, r.OfferingID
		tiers[i], models[i], statuses[i], codes[i] = string(r.Tier), r.Model, string(r.Status), int32(r.HTTPStatus)
		if r.Usage != nil {
			in[i], out[i], cached[i] = &r.Usage.Input, &r.Usage.Output, &r.Usage.Cached
		}
		if r.TTFT > 0 {
			ms := float64(r.TTFT) / float64(time.Millisecond)
			ttftMs[i] = &ms
		}
		durationMs[i] = float64(r.Duration) / float64(time.Millisecond)
		at[i] = r.At.UTC()
	}
	// The record and its hold are written by one statement, so that the hold exists exactly
	// when the record the meter bills by does. A hold whose request the meter billed already (a
	// record written late) is not written.
	_, err := l.pool.Exec(ctx, `
		WITH r AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::int[], $8::text[],
				$9::bigint[], $10::bigint[], $11::float8[], $12::float8[], $13::timestamptz[], $14::bigint[], $15::bigint[],
				$16::bigint[], $17::bool[], $18::bigint[], $19::bigint[], $20::bigint[], $21::timestamptz[], $22::bigint[])
				AS r(request_id, account_id, api_key_id, offering_id, tier, model, http_status, status, input_tokens,
					output_tokens, ttft_ms, duration_ms, at, input_bytes, max_input_tokens, max_output_tokens, streamed,
					relayed_output_bytes, relayed_output_chunks, hold_pico, hold_until, cached_input_tokens)
		), g AS (
			INSERT INTO gateway_requests (request_id, account_id, api_key_id, offering_id, tier, model, http_status, status,
				input_tokens, output_tokens, ttft_ms, duration_ms, at, input_bytes, max_input_tokens, max_output_tokens,
				streamed, relayed_output_bytes, relayed_output_chunks, cached_input_tokens)
			SELECT request_id, account_id, api_key_id, offering_id, tier, model, http_status, status, input_tokens,
				output_tokens, ttft_ms, duration_ms, at, input_bytes, max_input_tokens, max_output_tokens, streamed,
				relayed_output_bytes, relayed_output_chunks, cached_input_tokens
			FROM r
			ON CONFLICT (request_id) DO NOTHING
		)
		INSERT INTO admission_holds (request_id, account_id, api_key_id, amount_pico, held_at, expires_at)
		SELECT request_id, account_id, api_key_id::text, hold_pico, at, hold_until FROM r
		WHERE hold_pico > 0 AND NOT EXISTS (SELECT 1 FROM usage_event_keys k WHERE k.request_id = r.request_id)
		ON CONFLICT (request_id) DO NOTHING`,
		ids, accts, keys, offerings, tiers, models, codes, statuses, in, out, ttftMs, durationMs, at,
		inBytes, maxIn, maxOut, streamed, outBytes, outChunks, holds, holdUntil, cached)
	return err
}

// ReconcileResult says what a reconciliation did.
type ReconcileResult struct {
	Matched   int // compared with their metered rows
	Unmetered int // given up on a metered row after UnmeteredAfter
	Flagged   int // of both, flagged for review
	// HoldsExpired counts the admission holds deleted because the meter can no longer bill
	// their requests (Admission).
	HoldsExpired int
}

// Reconcile compares the recorded requests not yet reconciled with their metered rows (see
// RequestLog); the platform runs it periodically. Each record is reconciled once.
func (l *RequestLog) Reconcile(ctx context.Context) (res ReconcileResult, err error) {
	defer services.Wrap(&err, "requestlog.RequestLog.Reconcile")
	now := l.now().UTC()
	rows, err := l.pool.Query(ctx, `
		WITH d AS (
			SELECT g.request_id, concat_ws('; ',
				CASE WHEN g.input_tokens IS NOT NULL AND abs(g.input_tokens - u.input_tokens) * 100 > greatest(g.input_tokens, u.input_tokens)
					THEN format('input tokens: the response reported %s, the meter billed %s', g.input_tokens, u.input_tokens) END,
				CASE WHEN g.output_tokens IS NOT NULL AND abs(g.output_tokens - u.output_tokens) * 100 > greatest(g.output_tokens, u.output_tokens)
					THEN format('output tokens: the response reported %s, the meter billed %s', g.output_tokens, u.output_tokens) END
			) AS reason
			FROM gateway_requests g
			JOIN usage_event_keys k ON k.request_id = g.request_id
			JOIN usage_events u ON u.occurred_at = k.occurred_at AND u.request_id = k.request_id
			WHERE g.reconciled_at IS NULL
			ORDER BY g.at LIMIT $2
		)
		UPDATE gateway_requests g SET reconciled_at = $1,
			flagged_at = CASE WHEN d.reason <> '' THEN $1::timestamptz END, flag_reason = nullif(d.reason, '')
		FROM d WHERE g.request_id = d.request_id
		RETURNING g.flagged_at IS NOT NULL`, now, reconcileBatch)
	if err != nil {
		return res, err
	}
	flagged, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return res, err
	}
	res.Matched = len(flagged)
	for _, f := range flagged {
		if f {
			res.Flagged++
		}
	}
	rows, err = l.pool.Query(ctx, `
		WITH d AS (
			SELECT g.request_id, coalesce(g.output_tokens, 0) > 0 AS billable,
				format('not metered within %s: the response reported %s input and %s output tokens',
					$3::text, g.input_tokens, g.output_tokens) AS reason
			FROM gateway_requests g
			WHERE g.reconciled_at IS NULL AND g.at < $2
				AND NOT EXISTS (SELECT 1 FROM usage_event_keys k WHERE k.request_id = g.request_id)
			ORDER BY g.at LIMIT $4
		)
		UPDATE gateway_requests g SET reconciled_at = $1,
			flagged_at = CASE WHEN d.billable THEN $1::timestamptz END, flag_reason = CASE WHEN d.billable THEN d.reason END
		FROM d WHERE g.request_id = d.request_id
		RETURNING g.flagged_at IS NOT NULL`, now, now.Add(-UnmeteredAfter), fmt.Sprintf("%d minutes", int(UnmeteredAfter.Minutes())), reconcileBatch)
	if err != nil {
		return res, err
	}
	if flagged, err = pgx.CollectRows(rows, pgx.RowTo[bool]); err != nil {
		return res, err
	}
	res.Unmetered = len(flagged)
	for _, f := range flagged {
		if f {
			res.Flagged++
		}
	}
	// Holds the meter can no longer bill against count for nothing (Admission.load); they go.
	tag, err := l.pool.Exec(ctx, `DELETE FROM admission_holds WHERE expires_at <= $1`, now)
	if err != nil {
		return res, err
	}
	res.HoldsExpired = int(tag.RowsAffected())
	return res, nil
}

// Discrepancy is a flagged request: what the gateway saw beside what the rig reported and
// what the meter billed. A request is flagged by the reconciliation (the usage in the
// response differs from what was metered, or nothing was metered) or by the meter (it billed
// less than the rig reported, or billed without a complete record of the request: the
// meter's flag, see package metering); one row shows both.
type Discrepancy struct {
	RequestID  string        `json:"request_id"`
	AccountID  string        `json:"account_id"`
	APIKeyID   string        `json:"api_key_id"`
	OfferingID string        `json:"offering_id"`
	Tier       catalog.Tier  `json:"tier"`
	Model      string        `json:"model"`
	HTTPStatus *int          `json:"http_status"` // null when the gateway has no record of the attempt
	Status     GatewayStatus `json:"status,omitempty"`
	// InputTokens and OutputTokens are the usage in the response as the gateway saw it.
	InputTokens  *int64 `json:"input_tokens"`
	OutputTokens *int64 `json:"output_tokens"`
	// ReportedInput and ReportedOutput are what the rig reported; MeteredInput and
	// MeteredOutput what the meter billed; ExcessInput and ExcessOutput the difference, the
	// tokens the rig reported and was not paid for. Null when not metered.
	ReportedInput  *int64      `json:"reported_input_tokens"`
	ReportedOutput *int64      `json:"reported_output_tokens"`
	MeteredInput   *int64      `json:"metered_input_tokens"`
	MeteredOutput  *int64      `json:"metered_output_tokens"`
	ExcessInput    *int64      `json:"excess_input_tokens"`
	ExcessOutput   *int64      `json:"excess_output_tokens"`
	Charge         *money.Pico `json:"charge_pico"` // what the customer was charged; null when not metered
	At             time.Time   `json:"at"`          // when the attempt ended, or, without a gateway record, when the rig said
	FlaggedAt      time.Time   `json:"flagged_at"`
	// MeterFlag is the meter's flag ("clipped", "incomplete", "failed_attempt",
	// "no_gateway_record"), "" when only the reconciliation flagged the request.
	MeterFlag string `json:"meter_flag,omitempty"`
	// Reason says why, the reconciliation's reason and the meter's, "; " between them.
	Reason string `json:"reason"`
	// Resolution is an administrator's, once one has marked the discrepancy resolved; nil while
	// it is open.
	Resolution *DiscrepancyResolution `json:"resolution,omitempty"`
}

// Discrepancies lists the flagged requests the filter selects, the latest flagged first.
func (l *RequestLog) Discrepancies(ctx context.Context, f DiscrepancyFilter) (_ []Discrepancy, err error) {
	defer services.Wrap(&err, "requestlog.RequestLog.Discrepancies")
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	// Which of the flagged requests: the open ones have no resolution, the resolved one.
	var state string
	switch f.State {
	case DiscrepanciesAll:
	case DiscrepanciesOpen:
		state = `AND NOT EXISTS (SELECT 1 FROM discrepancy_resolutions r WHERE r.request_id = x.request_id)`
	case DiscrepanciesResolved:
		state = `AND EXISTS (SELECT 1 FROM discrepancy_resolutions r WHERE r.request_id = x.request_id)`
	default:
		fe := services.FieldErrors{}
		fe.Add("state", "Choose open or resolved.")
		return nil, fe.Err()
	}
	rows, err := l.pool.Query(ctx, `
		WITH flagged AS (
			SELECT request_id, max(at) AS flagged_at FROM (
				(SELECT request_id, flagged_at AS at FROM gateway_requests x WHERE flagged_at IS NOT NULL `+state+`
					ORDER BY flagged_at DESC LIMIT $1)
				UNION ALL
				(SELECT request_id, metered_at FROM usage_events x WHERE flag IS NOT NULL `+state+`
					ORDER BY metered_at DESC LIMIT $1)
			) f GROUP BY request_id
			ORDER BY 2 DESC, 1 LIMIT $1
		)
		SELECT f.request_id, coalesce(g.account_id, u.account_id)::text, coalesce(g.api_key_id::text, u.api_key_id),
			coalesce(g.offering_id, u.offering_id)::text, coalesce(g.tier, u.tier), coalesce(g.model, u.model),
			g.http_status, coalesce(g.status, ''), g.input_tokens, g.output_tokens,
			u.reported_input_tokens, u.reported_output_tokens, u.input_tokens, u.output_tokens,
			u.reported_input_tokens - u.input_tokens, u.reported_output_tokens - u.output_tokens,
			u.charge_pico::bigint, coalesce(g.at, u.occurred_at), f.flagged_at,
			coalesce(u.flag, ''), concat_ws('; ', g.flag_reason, u.flag_reason),
			r.note, r.resolved_by::text, r.resolved_at
		FROM flagged f
		LEFT JOIN gateway_requests g ON g.request_id = f.request_id
		LEFT JOIN usage_events u ON u.request_id = f.request_id
		LEFT JOIN discrepancy_resolutions r ON r.request_id = f.request_id
		ORDER BY f.flagged_at DESC, f.request_id`, limit)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Discrepancy, error) {
		var d Discrepancy
		var charge *int64
		var note, by *string
		var at *time.Time
		err := r.Scan(&d.RequestID, &d.AccountID, &d.APIKeyID, &d.OfferingID, &d.Tier, &d.Model, &d.HTTPStatus, &d.Status,
			&d.InputTokens, &d.OutputTokens, &d.ReportedInput, &d.ReportedOutput, &d.MeteredInput, &d.MeteredOutput,
			&d.ExcessInput, &d.ExcessOutput, &charge, &d.At, &d.FlaggedAt, &d.MeterFlag, &d.Reason, &note, &by, &at)
		if charge != nil {
			c := money.Pico(*charge)
			d.Charge = &c
		}
		if note != nil && by != nil && at != nil {
			d.Resolution = &DiscrepancyResolution{Note: *note, ResolvedByID: *by, ResolvedAt: *at}
		}
		return d, err
	})
	if err != nil {
		return nil, err
	}
	var by []string
	for _, d := range list {
		if d.Resolution != nil {
			by = append(by, d.Resolution.ResolvedByID)
		}
	}
	emails, err := accounts.EmailsByID(ctx, l.pool, by)
	if err != nil {
		return nil, err
	}
	for _, d := range list {
		if d.Resolution != nil {
			d.Resolution.ResolvedBy = emails[d.Resolution.ResolvedByID]
		}
	}
	return list, nil
}
