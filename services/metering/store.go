package metering

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services/money"
)

// A checked batch's transaction: the references it is judged against, its usage rows and
// rollups, its rejections and its ledger postings.

// commit writes a checked batch in one database transaction. It first takes every event for
// new, as nearly every one is, and inserts the batch without looking for stored duplicates;
// if one is stored after all (a redelivery), the database refuses the insert with a unique
// violation and the batch is written again in a second transaction that skips and reports
// each duplicate.
func (m *Meter) commit(ctx context.Context, b checkedBatch) (BatchResult, error) {
	if b.err != nil {
		return BatchResult{}, b.err
	}
	if err := m.resolveLedgers(ctx, b.cands); err != nil {
		return BatchResult{}, err
	}
	m.makeMonths(ctx, b.cands)
	res, err := m.commitTx(ctx, b, true)
	if pgErrorCode(err) == codeUniqueViolation {
		res, err = m.commitTx(ctx, b, false)
	}
	return res, err
}

// commitTx is one attempt at commit; assumeNew says whether to take every event for new.
func (m *Meter) commitTx(ctx context.Context, b checkedBatch, assumeNew bool) (BatchResult, error) {
	var res BatchResult
	err := pgx.BeginFunc(ctx, m.cfg.Pool, func(tx pgx.Tx) error {
		s, err := m.store(ctx, tx, b.cands, b.now, assumeNew)
		if err != nil {
			return err
		}
		all := append(slices.Clip(b.rejections), s.rejections...)
		samples, err := m.insertRejections(ctx, tx, all, b.now)
		if err != nil {
			return err
		}
		res = BatchResult{Stored: len(s.occurred), Charged: s.charged, Rejections: all, Samples: samples,
			Deferred: s.deferred, Occurred: s.occurred, Usages: s.usages}
		return nil
	})
	if err != nil {
		return BatchResult{}, err
	}
	return res, nil
}

// pricedEvent is a candidate the catalog, the price book and the gateway's record accept,
// with what it is billed.
type pricedEvent struct {
	c                 *candidate
	t                 terms
	in, out           int64 // the tokens billed
	cached            int64 // of in, the cached input tokens billed at the cached price
	flag              Flag  // "" unless the bill is flagged for review
	flagReason        string
	charge, payable   money.Pico
	account, provider string
}

// storeResult is what store wrote.
type storeResult struct {
	occurred   []time.Time   // of the events stored
	usages     []usage.Usage // of the events stored, in the order of occurred, with the tokens billed
	charged    money.BigPico
	rejections []StoredRejection
	deferred   []Deferral
}

// store writes the candidates' usage rows and rollups and the ledger postings of those that
// were new. With assumeNew, a candidate already stored fails the whole statement.
func (m *Meter) store(ctx context.Context, tx pgx.Tx, cands []candidate, now time.Time, assumeNew bool) (storeResult, error) {
	var out storeResult
	if len(cands) == 0 {
		return out, nil
	}
	refs, err := loadReferences(ctx, tx, cands)
	if err != nil {
		return out, err
	}
	priced := m.judge(cands, refs, now, &out)
	if len(priced) == 0 {
		return out, nil
	}

	var isNew map[string]bool // nil: every one is new
	var redelivered map[string]bool
	if assumeNew {
		copied, err := copyNewUsage(ctx, tx, priced, now)
		if err != nil {
			return out, err
		}
		if !copied {
			if _, err := tx.Exec(ctx, insertNewUsage, usageArrays(priced, now)...); err != nil {
				return out, err
			}
		}
	} else {
		rows, err := tx.Query(ctx, insertUsageOnce, usageArrays(priced, now)...)
		if err != nil {
			return out, err
		}
		newIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return out, err
		}
		isNew = make(map[string]bool, len(newIDs))
		for _, id := range newIDs {
			isNew[id] = true
		}
		if redelivered, err = redeliveries(ctx, tx, priced, isNew); err != nil {
			return out, err
		}
	}
	stored := make([]*pricedEvent, 0, len(priced))
	out.occurred = make([]time.Time, 0, len(priced))
	out.usages = make([]usage.Usage, 0, len(priced))
	for i := range priced {
		pe := &priced[i]
		if isNew != nil && !isNew[pe.c.ev.ID] {
			if redelivered[pe.c.ev.ID] {
				// The same message again (a crash or a lost ack after its commit): it is
				// stored, so it is acknowledged and is no duplicate to review.
				continue
			}
			out.rejections = append(out.rejections, StoredRejection{Message: pe.c.msg, EventID: pe.c.ev.ID, Reason: usage.RejectDuplicate,
				Detail: "event " + pe.c.ev.ID + " or request " + pe.c.ev.Data.RequestID + " is already metered"})
			continue
		}
		stored = append(stored, pe)
		u := pe.c.ev.Data
		u.InputTokens, u.CachedInputTokens, u.OutputTokens = pe.in, pe.cached, pe.out
		out.occurred = append(out.occurred, pe.c.ev.Time)
		out.usages = append(out.usages, u)
	}
	if len(stored) == 0 {
		return out, nil
	}
	if out.charged, err = m.post(ctx, tx, stored, now); err != nil {
		return out, err
	}
	if err := releaseHolds(ctx, tx, stored); err != nil {
		return out, err
	}
	if err := addBatchCosts(ctx, tx, stored); err != nil {
		return out, err
	}
	return out, nil
}

// releaseHolds deletes what admission holds for the requests stored (admission.ReleaseHolds), in
// the transaction that posts their charges: a snapshot shows each request either held or charged
// (admission.Admission).
func releaseHolds(ctx context.Context, tx pgx.Tx, stored []*pricedEvent) error {
	ids := make([]string, len(stored))
	for i, pe := range stored {
		ids[i] = pe.c.ev.Data.RequestID
	}
	return admission.ReleaseHolds(ctx, tx, ids)
}

// redeliveries finds which of the events not inserted are stored from the very same stream
// message: deliveries again of what a batch already committed, not duplicates.
func redeliveries(ctx context.Context, tx pgx.Tx, priced []pricedEvent, isNew map[string]bool) (map[string]bool, error) {
	var ids []string
	seqs := map[string]int64{}
	for i := range priced {
		id := priced[i].c.ev.ID
		if !isNew[id] {
			ids = append(ids, id)
			seqs[id] = int64(priced[i].c.msg.Seq)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Planned for each call (QueryExecModeExec): a plan cached while usage_event_keys was nearly
	// empty would scan the whole table as it grows.
	rows, err := tx.Query(ctx, `SELECT event_id, stream_seq FROM usage_event_keys WHERE event_id = ANY ($1)`,
		pgx.QueryExecModeExec, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, err
		}
		if seqs[id] == seq {
			out[id] = true
		}
	}
	return out, rows.Err()
}

// The statements that write a batch's usage rows, given as one array per column ($29 is the
// metering time, $30 to $33 the cached input columns), and add them to the hourly rollups, in one round trip. The rows go in in
// the order of the arrays, which usageArrays sorts by event id, so that meters racing on the
// same events take the unique indexes' locks in one order; rollup rows are upserted in key
// order for the same reason.
var (
	// insertNewUsage takes every row for new: one already stored fails its keys.
	insertNewUsage = `WITH ` + usageIncoming + `, keyed AS (` + usageKeysInsert + `), inserted AS (` + usageInsert + `
			FROM incoming ORDER BY n), ` + usageRollup("incoming") + `, ` + keySpend("incoming") + `, ` + keySpendDays("incoming") + `
		SELECT 1`
	// insertUsageOnce skips every event whose event id or request id is already stored, rolls
	// up the rows it inserted, and returns their event ids. The keys decide (as the usage
	// table's unique indexes did before it was partitioned by month): the rows inserted are
	// those whose keys were.
	insertUsageOnce = `WITH ` + usageIncoming + `, keyed AS (` + usageKeysInsert + `
			ON CONFLICT DO NOTHING
			RETURNING event_id, request_id, stream_seq), inserted AS (` + usageInsert + `
			FROM (SELECT DISTINCT ON (event_id) i.* FROM incoming i JOIN keyed k USING (event_id, request_id, stream_seq)
				ORDER BY event_id, n) incoming
			ORDER BY n
			RETURNING event_id, occurred_at, account_id, api_key_id, offering_id, tier, model, price_id, ask_input_price,
				ask_output_price, provider_account_id, input_tokens, output_tokens, charge_pico, payable_pico, energy_j,
				energy_source, duration_ms, cached_input_tokens, ask_cached_input_price), ` +
		usageRollup("inserted") + `, ` +
		keySpend("inserted") + `, ` + keySpendDays("inserted") + `
		SELECT event_id FROM inserted`
)

const (
	usageIncoming = `incoming AS (
		SELECT event_id, request_id, account_id::uuid, api_key_id, offering_id::uuid, provider_account_id::uuid,
			tier, model, input_tokens, output_tokens, reported_input_tokens, reported_output_tokens, ttft_ms,
			duration_ms, energy_j, energy_source, status, price_id, input_price, output_price, ask_input_price,
			ask_output_price, charge_pico, payable_pico, flag, flag_reason, occurred_at, stream_seq,
			cached_input_tokens, reported_cached_input_tokens, cached_input_price, ask_cached_input_price, n
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::float8[], $14::float8[],
			$15::float8[], $16::text[], $17::text[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[],
			$22::bigint[], $23::bigint[], $24::bigint[], $25::text[], $26::text[], $27::timestamptz[], $28::bigint[],
			$30::bigint[], $31::bigint[], $32::bigint[], $33::bigint[])
			WITH ORDINALITY AS u (event_id, request_id, account_id, api_key_id, offering_id, provider_account_id,
				tier, model, input_tokens, output_tokens, reported_input_tokens, reported_output_tokens, ttft_ms,
				duration_ms, energy_j, energy_source, status, price_id, input_price, output_price, ask_input_price,
				ask_output_price, charge_pico, payable_pico, flag, flag_reason, occurred_at, stream_seq,
				cached_input_tokens, reported_cached_input_tokens, cached_input_price, ask_cached_input_price, n))`
	usageInsert = `
		INSERT INTO usage_events (` + usageColumnList + `)
		SELECT event_id, request_id, account_id, api_key_id, offering_id, provider_account_id,
			tier, model, input_tokens, output_tokens, reported_input_tokens, reported_output_tokens, ttft_ms,
			duration_ms, energy_j, energy_source, status, price_id, input_price, output_price, ask_input_price,
			ask_output_price, charge_pico, payable_pico, flag, flag_reason, occurred_at, $29, stream_seq,
			cached_input_tokens, reported_cached_input_tokens, cached_input_price, ask_cached_input_price`
	// usageKeysInsert writes the incoming rows' keys (docs/usage-storage.md, "One event id, one
	// request id, over all months").
	usageKeysInsert = `
		INSERT INTO usage_event_keys (event_id, request_id, occurred_at, stream_seq)
		SELECT event_id, request_id, occurred_at, stream_seq FROM incoming ORDER BY n`
	usageColumnList = `event_id, request_id, account_id, api_key_id, offering_id, provider_account_id,
		tier, model, input_tokens, output_tokens, reported_input_tokens, reported_output_tokens, ttft_ms,
		duration_ms, energy_j, energy_source, status, price_id, input_price, output_price, ask_input_price,
		ask_output_price, charge_pico, payable_pico, flag, flag_reason, occurred_at, metered_at, stream_seq,
		cached_input_tokens, reported_cached_input_tokens, cached_input_price, ask_cached_input_price`
)

// usageRollup adds the usage rows of the CTE named rows to the hourly rollups: per hour,
// account, offering, tier, model, price version and asks, as rollUp sums them.
func usageRollup(rows string) string {
	return `rollup AS (
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price,
			ask_output_price, provider_account_id, requests, input_tokens, output_tokens, uncharged_requests,
			uncharged_input_tokens, uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j,
			energy_simulated_j, busy_ms, cached_input_tokens, uncharged_cached_input_tokens, ask_cached_input_price)
		SELECT date_trunc('hour', occurred_at), account_id, offering_id, tier, model, price_id, ask_input_price,
			ask_output_price, provider_account_id, count(*), sum(input_tokens), sum(output_tokens),
			count(*) FILTER (WHERE charge_pico = 0), coalesce(sum(input_tokens) FILTER (WHERE charge_pico = 0), 0),
			coalesce(sum(output_tokens) FILTER (WHERE charge_pico = 0), 0), sum(charge_pico), sum(payable_pico),
			sum(energy_j), coalesce(sum(energy_j) FILTER (WHERE energy_source = 'measured'), 0),
			coalesce(sum(energy_j) FILTER (WHERE energy_source = 'simulated'), 0), sum(duration_ms),
			sum(cached_input_tokens), coalesce(sum(cached_input_tokens) FILTER (WHERE charge_pico = 0), 0),
			max(ask_cached_input_price)
		FROM ` + rows + `
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9
		ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
		` + addToRollup + `)`
}

// addToRollup adds the incoming sums to a usage_hourly row that is there already.
const addToRollup = `ON CONFLICT (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price)
	DO UPDATE SET
	requests = usage_hourly.requests + EXCLUDED.requests,
	input_tokens = usage_hourly.input_tokens + EXCLUDED.input_tokens,
	output_tokens = usage_hourly.output_tokens + EXCLUDED.output_tokens,
	uncharged_requests = usage_hourly.uncharged_requests + EXCLUDED.uncharged_requests,
	uncharged_input_tokens = usage_hourly.uncharged_input_tokens + EXCLUDED.uncharged_input_tokens,
	uncharged_output_tokens = usage_hourly.uncharged_output_tokens + EXCLUDED.uncharged_output_tokens,
	charge_pico = usage_hourly.charge_pico + EXCLUDED.charge_pico,
	payable_pico = usage_hourly.payable_pico + EXCLUDED.payable_pico,
	energy_j = usage_hourly.energy_j + EXCLUDED.energy_j,
	energy_measured_j = usage_hourly.energy_measured_j + EXCLUDED.energy_measured_j,
	energy_simulated_j = usage_hourly.energy_simulated_j + EXCLUDED.energy_simulated_j,
	busy_ms = usage_hourly.busy_ms + EXCLUDED.busy_ms,
	cached_input_tokens = usage_hourly.cached_input_tokens + EXCLUDED.cached_input_tokens,
	uncharged_cached_input_tokens = usage_hourly.uncharged_cached_input_tokens + EXCLUDED.uncharged_cached_input_tokens,
	ask_cached_input_price = coalesce(usage_hourly.ask_cached_input_price, EXCLUDED.ask_cached_input_price)`

// keySpend adds the usage rows of the CTE named rows to their API keys' monthly spend.
func keySpend(rows string) string {
	return `spend AS (
		INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico)
		SELECT api_key_id, date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*), sum(charge_pico)
		FROM ` + rows + `
		WHERE api_key_id <> ''
		GROUP BY 1, 2
		ORDER BY 1, 2
		` + addToKeySpend + `)`
}

// keySpendDays adds the usage rows of the CTE named rows to their API keys' daily spend.
func keySpendDays(rows string) string {
	return `spend_days AS (
		INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico)
		SELECT api_key_id, (occurred_at AT TIME ZONE 'UTC')::date, count(*), sum(charge_pico)
		FROM ` + rows + `
		WHERE api_key_id <> ''
		GROUP BY 1, 2
		ORDER BY 1, 2
		` + addToKeySpendDays + `)`
}

// addToKeySpendDays adds the incoming sums to an api_key_spend_days row that is there already.
const addToKeySpendDays = `ON CONFLICT (api_key_id, day) DO UPDATE SET
	requests = api_key_spend_days.requests + EXCLUDED.requests,
	charge_pico = api_key_spend_days.charge_pico + EXCLUDED.charge_pico`

// addToKeySpend adds the incoming sums to an api_key_spend row that is there already.
const addToKeySpend = `ON CONFLICT (api_key_id, month) DO UPDATE SET
	requests = api_key_spend.requests + EXCLUDED.requests,
	charge_pico = api_key_spend.charge_pico + EXCLUDED.charge_pico`

// usageArrays are the arguments of the usage statements: the priced events' columns in event id order, and
// the metering time.
func usageArrays(priced []pricedEvent, now time.Time) []any {
	order := byEventID(priced)
	n := len(priced)
	var (
		eventID, requestID, accountID, apiKeyID = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		offeringID, providerID, tier, model     = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		energySource, status                    = make([]string, n), make([]string, n)
		inputTokens, outputTokens               = make([]int64, n), make([]int64, n)
		reportedIn, reportedOut                 = make([]int64, n), make([]int64, n)
		ttftMs                                  = make([]*float64, n) // NULL: no first-token time
		duration, energy                        = make([]float64, n), make([]float64, n)
		priceID, inputPrice, outputPrice        = make([]int64, n), make([]int64, n), make([]int64, n)
		askIn, askOut                           = make([]int64, n), make([]int64, n)
		charge, payable, seq                    = make([]int64, n), make([]int64, n), make([]int64, n)
		flag, flagReason                        = make([]pgtype.Text, n), make([]pgtype.Text, n)
		occurred                                = make([]time.Time, n)
		cached, reportedCached                  = make([]int64, n), make([]int64, n)
		cachedPrice, askCached                  = make([]int64, n), make([]int64, n)
	)
	for i, j := range order {
		pe := &priced[j]
		c, u := pe.c, &pe.c.ev.Data
		eventID[i], requestID[i], accountID[i], apiKeyID[i] = c.ev.ID, u.RequestID, c.claims.AccountID, c.claims.APIKeyID
		offeringID[i], providerID[i], tier[i], model[i] = u.OfferingID, pe.provider, c.claims.Tier, u.Model
		inputTokens[i], outputTokens[i], reportedIn[i], reportedOut[i] = pe.in, pe.out, u.InputTokens, u.OutputTokens
		if u.TTFTMillis > 0 {
			ttftMs[i] = &u.TTFTMillis
		}
		duration[i], energy[i] = u.DurationMillis, u.EnergyJoules
		energySource[i], status[i] = string(u.EnergySource), string(u.Status)
		priceID[i], inputPrice[i], outputPrice[i] = pe.t.price.id, pe.t.price.input, pe.t.price.outp
		askIn[i], askOut[i] = pe.t.askIn, pe.t.askOut
		charge[i], payable[i] = int64(pe.charge), int64(pe.payable)
		flag[i], flagReason[i] = pe.flagText()
		occurred[i], seq[i] = c.ev.Time, int64(c.msg.Seq)
		cached[i], reportedCached[i] = pe.cached, u.CachedInputTokens
		cachedPrice[i], askCached[i] = pe.t.price.cached, pe.t.askCached
	}
	return []any{eventID, requestID, accountID, apiKeyID, offeringID, providerID, tier, model, inputTokens,
		outputTokens, reportedIn, reportedOut, ttftMs, duration, energy, energySource, status, priceID, inputPrice,
		outputPrice, askIn, askOut, charge, payable, flag, flagReason, occurred, seq, now,
		cached, reportedCached, cachedPrice, askCached}
}

// flagText is the event's flag and its reason as the usage row stores them: NULL when unflagged.
func (pe *pricedEvent) flagText() (flag, reason pgtype.Text) {
	if pe.flag == "" {
		return pgtype.Text{}, pgtype.Text{}
	}
	return pgtype.Text{String: string(pe.flag), Valid: true}, pgtype.Text{String: truncate(pe.flagReason, 1000), Valid: true}
}

// eventDataError wraps err as found in an event's data (eventError).
func eventDataError(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(errEventData, err)
}
