package metering

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Accounts' hourly rollups summed by period, as the savings and carbon reports and the close's summaries read
// them: through usage_hourly_account_idx (account, hour), never usage_events.

// RollupWindow is what the account reads sum: the accounts' rollups of the hours [From, To), by period of Unit
// (PostgreSQL's date_trunc unit in UTC: "day" or "month").
type RollupWindow struct {
	AccountIDs []string
	From, To   time.Time
	Unit       string
}

// ChargeLine is the rollups of one account, period, tier, model and price version, within one span between
// Breaks (ChargeLines): the grain at which a price in force over the whole span prices its tokens.
type ChargeLine struct {
	AccountID   string
	Period      time.Time
	Tier, Model string
	PriceID     int64
	// Span is the span of the breaks its hours fall in: 0 before breaks[0], i from breaks[i-1] (included) to
	// breaks[i] (or on, for the last).
	Span                       int
	Requests                   int64
	InputTokens, OutputTokens  int64
	CachedInputTokens          int64 // of InputTokens
	UnchargedInputTokens       int64 // of InputTokens, charged nothing
	UnchargedOutputTokens      int64
	UnchargedCachedInputTokens int64 // of CachedInputTokens
	Charge                     money.BigPico
}

// chargeLinesQuery: $1 the accounts, $2 from, $3 to, $4 the date_trunc unit, $5 the breaks, ascending.
const chargeLinesQuery = `
	SELECT h.account_id::text, date_trunc($4, h.hour, 'UTC') AS period, h.tier, h.model, h.price_id,
		width_bucket(h.hour, $5::timestamptz[]) AS span,
		sum(h.requests)::bigint, sum(h.input_tokens)::bigint, sum(h.output_tokens)::bigint,
		sum(h.cached_input_tokens)::bigint, sum(h.uncharged_input_tokens)::bigint,
		sum(h.uncharged_output_tokens)::bigint, sum(h.uncharged_cached_input_tokens)::bigint, sum(h.charge_pico)
	FROM usage_hourly h
	WHERE h.account_id = ANY ($1::text[]::uuid[]) AND h.hour >= $2 AND h.hour < $3
	GROUP BY 1, 2, 3, 4, 5, 6`

// ChargeLines sums the window's rollups by account, period, tier, model, price version and span between breaks
// (ascending instants: the caller's price changes, so that one price is in force over each line's hours).
func ChargeLines(ctx context.Context, q Querier, w RollupWindow, breaks []time.Time) (_ []ChargeLine, err error) {
	defer services.Wrap(&err, "metering.ChargeLines")
	rows, err := q.Query(ctx, chargeLinesQuery, w.AccountIDs, w.From, w.To, w.Unit, breaksArg(breaks))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ChargeLine, error) {
		var l ChargeLine
		err := row.Scan(&l.AccountID, &l.Period, &l.Tier, &l.Model, &l.PriceID, &l.Span, &l.Requests, &l.InputTokens,
			&l.OutputTokens, &l.CachedInputTokens, &l.UnchargedInputTokens, &l.UnchargedOutputTokens,
			&l.UnchargedCachedInputTokens, &l.Charge)
		l.Period = l.Period.UTC()
		return l, err
	})
}

// EnergyLine is the rollups of one account, period, tier and model on one offering: the grain at which the
// offering's rig and site meet its energy.
type EnergyLine struct {
	AccountID   string
	Period      time.Time
	Tier, Model string
	OfferingID  string
	Requests    int64
	Tokens      int64 // input and output
	EnergyJ     float64
	MeasuredJ   float64 // of EnergyJ
	SimulatedJ  float64 // of EnergyJ
	BusyMs      float64
}

// energyLinesQuery: $1 the accounts, $2 from, $3 to, $4 the date_trunc unit.
const energyLinesQuery = `
	SELECT h.account_id::text, date_trunc($4, h.hour, 'UTC') AS period, h.tier, h.model, h.offering_id::text,
		sum(h.requests)::bigint, sum(h.input_tokens + h.output_tokens)::bigint,
		sum(h.energy_j), sum(h.energy_measured_j), sum(h.energy_simulated_j), sum(h.busy_ms)
	FROM usage_hourly h
	WHERE h.account_id = ANY ($1::text[]::uuid[]) AND h.hour >= $2 AND h.hour < $3
	GROUP BY 1, 2, 3, 4, 5`

// EnergyLines sums the window's rollups by account, period, tier, model and offering.
func EnergyLines(ctx context.Context, q Querier, w RollupWindow) (_ []EnergyLine, err error) {
	defer services.Wrap(&err, "metering.EnergyLines")
	rows, err := q.Query(ctx, energyLinesQuery, w.AccountIDs, w.From, w.To, w.Unit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (EnergyLine, error) {
		var l EnergyLine
		err := row.Scan(&l.AccountID, &l.Period, &l.Tier, &l.Model, &l.OfferingID, &l.Requests, &l.Tokens, &l.EnergyJ,
			&l.MeasuredJ, &l.SimulatedJ, &l.BusyMs)
		l.Period = l.Period.UTC()
		return l, err
	})
}

// AccountRollupPlans are PostgreSQL's plans of ChargeLines' and EnergyLines' queries over w, by "charges" and
// "energy": how a benchmark or an operator checks that they read the rollups through usage_hourly_account_idx
// and never scan the table.
func AccountRollupPlans(ctx context.Context, q Querier, w RollupWindow) (_ map[string]string, err error) {
	defer services.Wrap(&err, "metering.AccountRollupPlans")
	out := map[string]string{}
	for name, explain := range map[string]struct {
		sql  string
		args []any
	}{
		"charges": {chargeLinesQuery, []any{w.AccountIDs, w.From, w.To, w.Unit, breaksArg(nil)}},
		"energy":  {energyLinesQuery, []any{w.AccountIDs, w.From, w.To, w.Unit}},
	} {
		rows, err := q.Query(ctx, "EXPLAIN "+explain.sql, explain.args...)
		if err != nil {
			return nil, err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		out[name] = strings.Join(lines, "\n")
	}
	return out, nil
}

// breaksArg is the breaks as the query's array: never NULL, so that width_bucket has thresholds to count.
func breaksArg(breaks []time.Time) []time.Time {
	if breaks == nil {
		return []time.Time{}
	}
	return breaks
}
