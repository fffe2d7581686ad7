package requestlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
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
	pool  *pgxpool.Pool
	usage Usage
	now   func() time.Time
	log   *slog.Logger

	// writing is held for the whole of a Flush: a Flush returns once every record queued before it is written,
	// also those another Flush (Run's) had taken and was still writing.
	writing sync.Mutex
	mu      sync.Mutex
	buf     []GatewayRequest
	dropped int64
	wake    chan struct{}
}

// NewRequestLog returns the log, which reads the meter's usage rows through usage (nil for a
// log whose attempts leave nothing held, and that neither reconciles nor lists discrepancies:
// see Usage); Run writes it.
func NewRequestLog(pool *pgxpool.Pool, usage Usage, now func() time.Time, log *slog.Logger) *RequestLog {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &RequestLog{pool: pool, usage: usage, now: now, log: log, wake: make(chan struct{}, 1)}
}

// errNoUsage refuses what needs the meter's usage rows of a log given none.
var errNoUsage = errors.New("the request log reads the meter's usage rows through the Usage it is given, and was given none")

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
	holds := make([]admission.HoldRecord, 0, n)
	for i, r := range rs {
		if r.Hold.Amount > 0 {
			holds = append(holds, admission.HoldRecord{RequestID: r.RequestID, AccountID: r.AccountID, APIKeyID: r.APIKeyID,
				Hold: r.Hold, At: r.At})
		}
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
	if len(holds) > 0 && l.usage == nil {
		return errNoUsage
	}
	// The records and their holds (admission.QueueRecordHolds) are written by one batch, in one
	// round trip and one transaction, so that a hold exists exactly when the record the meter
	// bills by does.
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO gateway_requests (request_id, account_id, api_key_id, offering_id, tier, model, http_status, status,
			input_tokens, output_tokens, ttft_ms, duration_ms, at, input_bytes, max_input_tokens, max_output_tokens,
			streamed, relayed_output_bytes, relayed_output_chunks, cached_input_tokens)
		SELECT * FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::int[], $8::text[],
			$9::bigint[], $10::bigint[], $11::float8[], $12::float8[], $13::timestamptz[], $14::bigint[], $15::bigint[],
			$16::bigint[], $17::bool[], $18::bigint[], $19::bigint[], $20::bigint[])
		ON CONFLICT (request_id) DO NOTHING`,
		ids, accts, keys, offerings, tiers, models, codes, statuses, in, out, ttftMs, durationMs, at,
		inBytes, maxIn, maxOut, streamed, outBytes, outChunks, cached)
	if len(holds) > 0 {
		admission.QueueRecordHolds(b, holds, l.usage.Metered)
	}
	return l.pool.SendBatch(ctx, b).Close()
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
	if l.usage == nil {
		return res, errNoUsage
	}
	now := l.now().UTC()
	// The oldest records whose request is metered, compared with what it was billed
	// (Usage.MeteredTokens): a difference of more than 1% either way is flagged.
	rows, err := l.pool.Query(ctx, `
		SELECT g.request_id FROM gateway_requests g
		WHERE g.reconciled_at IS NULL AND `+l.usage.Metered("g.request_id")+`
		ORDER BY g.at LIMIT $1`, reconcileBatch)
	if err != nil {
		return res, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return res, err
	}
	metered, err := l.usage.MeteredTokens(ctx, l.pool, ids)
	if err != nil {
		return res, err
	}
	ids = ids[:0]
	var in, out []int64
	for id, u := range metered {
		ids, in, out = append(ids, id), append(in, u.Input), append(out, u.Output)
	}
	rows, err = l.pool.Query(ctx, `
		WITH d AS (
			SELECT g.request_id, concat_ws('; ',
				CASE WHEN g.input_tokens IS NOT NULL AND abs(g.input_tokens - u.input_tokens) * 100 > greatest(g.input_tokens, u.input_tokens)
					THEN format('input tokens: the response reported %s, the meter billed %s', g.input_tokens, u.input_tokens) END,
				CASE WHEN g.output_tokens IS NOT NULL AND abs(g.output_tokens - u.output_tokens) * 100 > greatest(g.output_tokens, u.output_tokens)
					THEN format('output tokens: the response reported %s, the meter billed %s', g.output_tokens, u.output_tokens) END
			) AS reason
			FROM gateway_requests g
			JOIN unnest($2::text[], $3::bigint[], $4::bigint[]) AS u (request_id, input_tokens, output_tokens)
				ON u.request_id = g.request_id
			WHERE g.reconciled_at IS NULL
		)
		UPDATE gateway_requests g SET reconciled_at = $1,
			flagged_at = CASE WHEN d.reason <> '' THEN $1::timestamptz END, flag_reason = nullif(d.reason, '')
		FROM d WHERE g.request_id = d.request_id
		RETURNING g.flagged_at IS NOT NULL`, now, ids, in, out)
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
				AND NOT `+l.usage.Metered("g.request_id")+`
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
	expired, err := admission.DeleteExpiredHolds(ctx, l.pool, now)
	if err != nil {
		return res, err
	}
	res.HoldsExpired = int(expired)
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

// Discrepancies lists the flagged requests the filter selects, the latest flagged first: the newest the
// reconciliation flagged and the newest the meter flagged (Usage.FlaggedByMeter), the latest Limit of them each
// with the gateway's record, its usage row (Usage.MeteredUsage) and its resolution, if any.
func (l *RequestLog) Discrepancies(ctx context.Context, f DiscrepancyFilter) (_ []Discrepancy, err error) {
	defer services.Wrap(&err, "requestlog.RequestLog.Discrepancies")
	if l.usage == nil {
		return nil, errNoUsage
	}
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	// Which of the flagged requests: the open ones have no resolution, the resolved ones one.
	var state string
	switch f.State {
	case DiscrepanciesAll:
	case DiscrepanciesOpen:
		state = `AND NOT EXISTS (SELECT 1 FROM discrepancy_resolutions r WHERE r.request_id = g.request_id)`
	case DiscrepanciesResolved:
		state = `AND EXISTS (SELECT 1 FROM discrepancy_resolutions r WHERE r.request_id = g.request_id)`
	default:
		fe := services.FieldErrors{}
		fe.Add("state", "Choose open or resolved.")
		return nil, fe.Err()
	}
	resolutions, err := l.resolutions(ctx)
	if err != nil {
		return nil, err
	}
	keep := func(requestID string) bool {
		_, resolved := resolutions[requestID]
		return f.State == DiscrepanciesAll || resolved == (f.State == DiscrepanciesResolved)
	}
	rows, err := l.pool.Query(ctx, `SELECT request_id, flagged_at FROM gateway_requests g WHERE flagged_at IS NOT NULL `+state+`
		ORDER BY flagged_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	byGateway, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Flagged])
	if err != nil {
		return nil, err
	}
	// The meter's flags are its own rows: those the filter leaves out are dropped here, so as many more are read
	// as there are resolutions, and the newest limit of those kept are still among them.
	byMeter, err := l.usage.FlaggedByMeter(ctx, l.pool, limit+len(resolutions))
	if err != nil {
		return nil, err
	}
	byMeter = slices.DeleteFunc(byMeter, func(f Flagged) bool { return !keep(f.RequestID) })
	// A request flagged by both is listed once, at the later of the two.
	latest := map[string]time.Time{}
	for _, f := range append(byGateway, byMeter...) {
		if at, ok := latest[f.RequestID]; !ok || f.At.After(at) {
			latest[f.RequestID] = f.At
		}
	}
	flagged := make([]Flagged, 0, len(latest))
	for id, at := range latest {
		flagged = append(flagged, Flagged{RequestID: id, At: at})
	}
	sort.Slice(flagged, func(i, j int) bool {
		if !flagged[i].At.Equal(flagged[j].At) {
			return flagged[i].At.After(flagged[j].At)
		}
		return flagged[i].RequestID < flagged[j].RequestID
	})
	flagged = flagged[:min(len(flagged), limit)]
	ids := make([]string, len(flagged))
	for i, f := range flagged {
		ids[i] = f.RequestID
	}
	records, err := l.flaggedRecords(ctx, ids)
	if err != nil {
		return nil, err
	}
	usage, err := l.usage.MeteredUsage(ctx, l.pool, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Discrepancy, len(flagged))
	for i, f := range flagged {
		var u *MeteredUsage
		if m, ok := usage[f.RequestID]; ok {
			u = &m
		}
		out[i] = discrepancyOf(f, records[f.RequestID], u)
		if r, ok := resolutions[f.RequestID]; ok {
			out[i].Resolution = &r
		}
	}
	var by []string
	for _, d := range out {
		if d.Resolution != nil {
			by = append(by, d.Resolution.ResolvedByID)
		}
	}
	emails, err := accounts.EmailsByID(ctx, l.pool, by)
	if err != nil {
		return nil, err
	}
	for _, d := range out {
		if d.Resolution != nil {
			d.Resolution.ResolvedBy = emails[d.Resolution.ResolvedByID]
		}
	}
	return out, nil
}

// flaggedRecord is the gateway's record of a flagged request as a Discrepancy shows it.
type flaggedRecord struct {
	found                           bool
	accountID, apiKeyID, offeringID string
	tier                            catalog.Tier
	model                           string
	httpStatus                      int
	status                          GatewayStatus
	inputTokens, outputTokens       *int64
	at                              time.Time
	flagReason                      *string
}

// flaggedRecords reads the gateway's records of the requests of ids, by request id.
func (l *RequestLog) flaggedRecords(ctx context.Context, ids []string) (map[string]flaggedRecord, error) {
	rows, err := l.pool.Query(ctx, `SELECT request_id, account_id::text, api_key_id::text, offering_id::text, tier, model,
			http_status, status, input_tokens, output_tokens, at, flag_reason
		FROM gateway_requests WHERE request_id = ANY ($1)`, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]flaggedRecord{}
	var id string
	r := flaggedRecord{found: true}
	_, err = pgx.ForEachRow(rows, []any{&id, &r.accountID, &r.apiKeyID, &r.offeringID, &r.tier, &r.model, &r.httpStatus,
		&r.status, &r.inputTokens, &r.outputTokens, &r.at, &r.flagReason}, func() error {
		out[id] = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// discrepancyOf is a flagged request as the gateway recorded it (g, when found) beside its usage row (u, when
// metered): where both have a value, the gateway's is shown.
func discrepancyOf(f Flagged, g flaggedRecord, u *MeteredUsage) Discrepancy {
	d := Discrepancy{RequestID: f.RequestID, FlaggedAt: f.At}
	var reasons []string
	if g.found {
		d.AccountID, d.APIKeyID, d.OfferingID, d.Tier, d.Model = g.accountID, g.apiKeyID, g.offeringID, g.tier, g.model
		status := g.httpStatus
		d.HTTPStatus, d.Status, d.InputTokens, d.OutputTokens, d.At = &status, g.status, g.inputTokens, g.outputTokens, g.at
		if g.flagReason != nil {
			reasons = append(reasons, *g.flagReason)
		}
	}
	if u != nil {
		if !g.found {
			d.AccountID, d.APIKeyID, d.OfferingID, d.Tier, d.Model, d.At = u.AccountID, u.APIKeyID, u.OfferingID, u.Tier, u.Model, u.OccurredAt
		}
		in, out, charge := u.Input, u.Output, money.Pico(u.ChargePico)
		d.ReportedInput, d.ReportedOutput, d.MeteredInput, d.MeteredOutput = u.ReportedInput, u.ReportedOutput, &in, &out
		d.ExcessInput, d.ExcessOutput = excess(u.ReportedInput, in), excess(u.ReportedOutput, out)
		d.Charge, d.MeterFlag = &charge, u.Flag
		if u.FlagReason != nil {
			reasons = append(reasons, *u.FlagReason)
		}
	}
	d.Reason = strings.Join(reasons, "; ")
	return d
}

// excess is the tokens a rig reported beyond those billed, nil when the report is not known.
func excess(reported *int64, billed int64) *int64 {
	if reported == nil {
		return nil
	}
	e := *reported - billed
	return &e
}
