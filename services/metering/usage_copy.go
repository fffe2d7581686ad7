package metering

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The fast way a batch of new events is written: its keys and usage rows by COPY, which costs
// the database about two thirds of what an INSERT of the same rows from arrays costs, and its
// rollups summed here and upserted in one statement of a few rows. It is taken when every
// event is taken for new; a stored one fails the COPY of the keys with a unique violation, as
// it fails insertNewUsage, and the batch goes the careful way (insertUsageOnce).

var usageColumns = []string{"event_id", "request_id", "account_id", "api_key_id", "offering_id", "provider_account_id",
	"tier", "model", "input_tokens", "output_tokens", "reported_input_tokens", "reported_output_tokens", "ttft_ms",
	"duration_ms", "energy_j", "energy_source", "status", "price_id", "input_price", "output_price", "ask_input_price",
	"ask_output_price", "charge_pico", "payable_pico", "flag", "flag_reason", "occurred_at", "metered_at", "stream_seq",
	"cached_input_tokens", "reported_cached_input_tokens", "cached_input_price", "ask_cached_input_price"}

// usageKeyColumns are a usage row's keys, which usage_event_keys holds once over all months
// (docs/usage-storage.md, "One event id, one request id, over all months").
var usageKeyColumns = []string{"event_id", "request_id", "occurred_at", "stream_seq"}

// copyNewUsage writes the priced events' usage rows, in event id order (so that meters racing
// on the same events take the unique indexes' locks in one order), and adds them to the
// hourly rollups and to their API keys' monthly spend. ok is false, with nothing written, when a rollup's sums would not fit the
// 64-bit integers they are summed in here; the caller then writes the batch with
// insertNewUsage, which sums in NUMERIC.
func copyNewUsage(ctx context.Context, tx pgx.Tx, priced []pricedEvent, now time.Time) (ok bool, err error) {
	rollups, ok := rollUp(priced)
	if !ok {
		return false, nil
	}
	spend, ok := sumKeySpend(priced, monthOf)
	if !ok {
		return false, nil
	}
	spendDays, ok := sumKeySpend(priced, dayOf)
	if !ok {
		return false, nil
	}
	order := byEventID(priced)
	keys := newCopyRows(len(usageKeyColumns))
	defer keys.release()
	for _, j := range order {
		c := priced[j].c
		keys.row()
		keys.text(c.ev.ID)
		keys.text(c.ev.Data.RequestID)
		keys.timestamptz(c.ev.Time)
		keys.int8(int64(c.msg.Seq))
	}
	if err := copyIn(ctx, tx, "usage_event_keys", usageKeyColumns, keys); err != nil {
		return true, err
	}
	rows, err := usageRows(priced, order, now)
	if rows != nil {
		defer rows.release()
	}
	if err != nil {
		return true, err
	}
	if err := copyIn(ctx, tx, "usage_events", usageColumns, rows); err != nil {
		return true, err
	}
	b := &pgx.Batch{}
	b.Queue(upsertRollups, rollups.arrays()...)
	if spend.keys != nil {
		b.Queue(upsertKeySpend, spend.arrays()...)
		b.Queue(upsertKeySpendDays, spendDays.arrays()...)
	}
	return true, tx.SendBatch(ctx, b).Close()
}

// byEventID is the order of the priced events by event id.
func byEventID(priced []pricedEvent) []int {
	order := make([]int, len(priced))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(priced[a].c.ev.ID, priced[b].c.ev.ID) })
	return order
}

// copyIn writes rows into table's columns by COPY, in the batch's transaction.
func copyIn(ctx context.Context, tx pgx.Tx, table string, columns []string, rows *copyRows) error {
	_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(rows.bytes()),
		"COPY "+pgx.Identifier{table}.Sanitize()+" ("+strings.Join(columns, ", ")+") FROM STDIN BINARY")
	return err
}

// usageRows are the priced events' usage rows, in the given order, in usageColumns' order.
// An account, offering or provider id that is no uuid is an error of the event's data.
func usageRows(priced []pricedEvent, order []int, now time.Time) (*copyRows, error) {
	rows := newCopyRows(len(usageColumns))
	uuids := map[string]pgtype.UUID{} // the batch's account and offering ids, parsed once
	var bad error
	uuid := func(id string) [16]byte {
		u, ok := uuids[id]
		if !ok {
			if err := u.Scan(id); err != nil && bad == nil {
				bad = eventDataError(fmt.Errorf("metering: %q is no uuid: %w", id, err))
			}
			uuids[id] = u
		}
		return u.Bytes
	}
	for _, j := range order {
		pe := &priced[j]
		c, u := pe.c, &pe.c.ev.Data
		flag, reason := pe.flagText()
		rows.row()
		rows.text(c.ev.ID)
		rows.text(u.RequestID)
		rows.uuid(uuid(c.claims.AccountID))
		rows.text(c.claims.APIKeyID)
		rows.uuid(uuid(u.OfferingID))
		rows.uuid(uuid(pe.provider))
		rows.text(c.claims.Tier)
		rows.text(u.Model)
		rows.int8(pe.in)
		rows.int8(pe.out)
		rows.int8(u.InputTokens)
		rows.int8(u.OutputTokens)
		rows.nullableFloat8(u.TTFTMillis, u.TTFTMillis > 0)
		rows.float8(u.DurationMillis)
		rows.float8(u.EnergyJoules)
		rows.text(string(u.EnergySource))
		rows.text(string(u.Status))
		rows.int8(pe.t.price.id)
		rows.int8(pe.t.price.input)
		rows.int8(pe.t.price.outp)
		rows.int8(pe.t.askIn)
		rows.int8(pe.t.askOut)
		rows.numeric(int64(pe.charge))
		rows.numeric(int64(pe.payable))
		rows.nullableText(flag.String, flag.Valid)
		rows.nullableText(reason.String, reason.Valid)
		rows.timestamptz(c.ev.Time)
		rows.timestamptz(now)
		rows.int8(int64(c.msg.Seq))
		rows.int8(pe.cached)
		rows.int8(u.CachedInputTokens)
		rows.int8(pe.t.price.cached)
		rows.int8(pe.t.askCached)
	}
	return rows, bad
}

// rollupKey is a row of usage_hourly: an hour, account, offering, tier and model at one price
// version and one pair of asks, so that invoices and statements price their lines exactly
// from the rollups (see docs/invoicing.md, "Rollups").
type rollupKey struct {
	hour                           time.Time
	account, offering, tier, model string
	priceID, askIn, askOut         int64
	provider                       string
	// askCached is fixed by the price version and askIn (cachedAsk), so it splits no row: it
	// is kept with the row, not a part of the table's key.
	askCached int64
}

// rollupSums are a rollup row's sums. The uncharged ones count the requests charged nothing
// (no output token, a failed embedding) and their tokens.
type rollupSums struct {
	requests, input, output, charge, payable int64
	cached                                   int64 // of input, the cached input tokens
	unchargedRequests                        int64
	unchargedInput, unchargedOutput          int64
	unchargedCached                          int64
	energy, energyMeasured, energySimulated  float64
	busyMs                                   float64
}

type rollups struct {
	keys []rollupKey
	sums map[rollupKey]*rollupSums
}

// rollUp sums the priced events per hour, account, offering, tier and model. ok is false
// when a sum would overflow.
func rollUp(priced []pricedEvent) (r rollups, ok bool) {
	r.sums = make(map[rollupKey]*rollupSums)
	for i := range priced {
		pe := &priced[i]
		u := &pe.c.ev.Data
		k := rollupKey{hour: pe.c.ev.Time.UTC().Truncate(time.Hour), account: pe.account, offering: u.OfferingID,
			tier: pe.c.claims.Tier, model: u.Model, priceID: pe.t.price.id, askIn: pe.t.askIn, askOut: pe.t.askOut,
			provider: pe.provider, askCached: pe.t.askCached}
		s := r.sums[k]
		if s == nil {
			s = &rollupSums{}
			r.sums[k] = s
			r.keys = append(r.keys, k)
		}
		var o1, o2, o3, o4 bool
		s.requests++
		s.input, o1 = addInt64(s.input, pe.in)
		s.cached += pe.cached // at most pe.in: within the input's sum
		s.output, o2 = addInt64(s.output, pe.out)
		s.charge, o3 = addInt64(s.charge, int64(pe.charge))
		s.payable, o4 = addInt64(s.payable, int64(pe.payable))
		if o1 || o2 || o3 || o4 {
			return rollups{}, false
		}
		if pe.charge == 0 {
			// Within the sums above: these cannot overflow where they did not.
			s.unchargedRequests++
			s.unchargedInput += pe.in
			s.unchargedCached += pe.cached
			s.unchargedOutput += pe.out
		}
		s.energy += u.EnergyJoules
		switch u.EnergySource {
		case usage.EnergyMeasured:
			s.energyMeasured += u.EnergyJoules
		case usage.EnergySimulated:
			s.energySimulated += u.EnergyJoules
		}
		s.busyMs += u.DurationMillis
	}
	// Upserted in key order, as insertNewUsage does, so that committers lock rollup rows in
	// one order.
	slices.SortFunc(r.keys, func(a, b rollupKey) int {
		if c := a.hour.Compare(b.hour); c != 0 {
			return c
		}
		if c := strings.Compare(a.account+"\x00"+a.offering+"\x00"+a.tier+"\x00"+a.model,
			b.account+"\x00"+b.offering+"\x00"+b.tier+"\x00"+b.model); c != 0 {
			return c
		}
		if c := cmp.Compare(a.priceID, b.priceID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.askIn, b.askIn); c != 0 {
			return c
		}
		return cmp.Compare(a.askOut, b.askOut)
	})
	return r, true
}

// addInt64 returns a+b and whether that overflowed.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b)
}

func (r rollups) arrays() []any {
	n := len(r.keys)
	hour := make([]time.Time, n)
	account, offering, tier, model, provider := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	priceID, askIn, askOut := make([]int64, n), make([]int64, n), make([]int64, n)
	requests, input, output, charge, payable := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	unchargedRequests, unchargedInput, unchargedOutput := make([]int64, n), make([]int64, n), make([]int64, n)
	energy, energyMeasured, energySimulated, busy := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	cached, unchargedCached, askCached := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, k := range r.keys {
		s := r.sums[k]
		hour[i], account[i], offering[i], tier[i], model[i], provider[i] = k.hour, k.account, k.offering, k.tier, k.model, k.provider
		priceID[i], askIn[i], askOut[i] = k.priceID, k.askIn, k.askOut
		requests[i], input[i], output[i], charge[i], payable[i], energy[i] = s.requests, s.input, s.output, s.charge, s.payable, s.energy
		unchargedRequests[i], unchargedInput[i], unchargedOutput[i] = s.unchargedRequests, s.unchargedInput, s.unchargedOutput
		energyMeasured[i], energySimulated[i], busy[i] = s.energyMeasured, s.energySimulated, s.busyMs
		cached[i], unchargedCached[i], askCached[i] = s.cached, s.unchargedCached, k.askCached
	}
	return []any{hour, account, offering, tier, model, priceID, askIn, askOut, provider, requests, input, output,
		unchargedRequests, unchargedInput, unchargedOutput, charge, payable, energy, energyMeasured, energySimulated, busy,
		cached, unchargedCached, askCached}
}

// upsertRollups adds summed rows to usage_hourly, in the order given.
const upsertRollups = `
	INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
		provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
		uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, energy_simulated_j, busy_ms,
		cached_input_tokens, uncharged_cached_input_tokens, ask_cached_input_price)
	SELECT hour, account_id::uuid, offering_id::uuid, tier, model, price_id, ask_input_price, ask_output_price,
		provider_account_id::uuid, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
		uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, energy_simulated_j, busy_ms,
		cached_input_tokens, uncharged_cached_input_tokens, ask_cached_input_price
	FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[],
		$8::bigint[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[],
		$15::bigint[], $16::bigint[], $17::bigint[], $18::float8[], $19::float8[], $20::float8[], $21::float8[],
		$22::bigint[], $23::bigint[], $24::bigint[])
		WITH ORDINALITY AS r (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
			provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
			uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, energy_simulated_j, busy_ms,
			cached_input_tokens, uncharged_cached_input_tokens, ask_cached_input_price, n)
	ORDER BY n
	` + addToRollup

// keyMonth is a row of api_key_spend, or with a day for month, of api_key_spend_days.
type keyMonth struct {
	key   string
	month time.Time
}

type keySpends struct {
	keys     []keyMonth
	requests map[keyMonth]int64
	charge   map[keyMonth]int64
}

func monthOf(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC) }
func dayOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// sumKeySpend sums the priced events' charges per API key and calendar month (UTC), or day with
// dayOf, as keySpend does. ok is false when a sum would overflow.
func sumKeySpend(priced []pricedEvent, period func(time.Time) time.Time) (k keySpends, ok bool) {
	k.requests, k.charge = map[keyMonth]int64{}, map[keyMonth]int64{}
	for i := range priced {
		pe := &priced[i]
		if pe.c.claims.APIKeyID == "" {
			continue
		}
		t := pe.c.ev.Time.UTC()
		km := keyMonth{key: pe.c.claims.APIKeyID, month: period(t)}
		if _, seen := k.requests[km]; !seen {
			k.keys = append(k.keys, km)
		}
		k.requests[km]++
		var over bool
		if k.charge[km], over = addInt64(k.charge[km], int64(pe.charge)); over {
			return keySpends{}, false
		}
	}
	slices.SortFunc(k.keys, func(a, b keyMonth) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return a.month.Compare(b.month)
	})
	return k, true
}

func (k keySpends) arrays() []any {
	n := len(k.keys)
	keys, months, requests, charge := make([]string, n), make([]time.Time, n), make([]int64, n), make([]int64, n)
	for i, km := range k.keys {
		keys[i], months[i], requests[i], charge[i] = km.key, km.month, k.requests[km], k.charge[km]
	}
	return []any{keys, months, requests, charge}
}

// upsertKeySpendDays adds summed charges to api_key_spend_days, in the order given.
const upsertKeySpendDays = `
	INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico)
	SELECT api_key_id, (day AT TIME ZONE 'UTC')::date, requests, charge_pico
	FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[]) WITH ORDINALITY
		AS s (api_key_id, day, requests, charge_pico, n)
	ORDER BY n
	` + addToKeySpendDays

// upsertKeySpend adds summed charges to api_key_spend, in the order given.
const upsertKeySpend = `
	INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico)
	SELECT api_key_id, month, requests, charge_pico
	FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[]) WITH ORDINALITY
		AS s (api_key_id, month, requests, charge_pico, n)
	ORDER BY n
	` + addToKeySpend
