package metering

import (
	"context"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Bulk loads and checks: what the benchmarks (cmd/meterbench, cmd/closebench, cmd/reportsbench and the gateway's
// bench-gateway) and data loads use to write usage by the million without the meter, and to check what was stored.
// A load writes its rows as given, by COPY: it neither prices nor checks them, and writes nothing the meter would
// write with them (a usage row's keys, its rollup, its key's spend) unless it says so.

// Loader is what a bulk load writes through: the pool, or a caller's transaction.
type Loader interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

var (
	_ Loader = (*pgxpool.Pool)(nil)
	_ Loader = (pgx.Tx)(nil)
)

// HourlyRow is a row of the hourly rollups: the requests of an account at an offering in an hour, at one price
// and one pair of asks, summed.
type HourlyRow struct {
	Hour                                                           time.Time
	AccountID, OfferingID, ProviderAccountID                       string
	Tier, Model                                                    string
	PriceID, AskInputPrice, AskOutputPrice                         int64
	Requests, InputTokens, OutputTokens                            int64
	UnchargedRequests, UnchargedInputTokens, UnchargedOutputTokens int64
	Charge, Payable                                                money.Pico
	EnergyJ, EnergyMeasuredJ, BusyMs                               float64
}

var hourlyRowColumns = []string{"hour", "account_id", "offering_id", "provider_account_id", "tier", "model", "price_id",
	"ask_input_price", "ask_output_price", "requests", "input_tokens", "output_tokens", "uncharged_requests",
	"uncharged_input_tokens", "uncharged_output_tokens", "charge_pico", "payable_pico", "energy_j", "energy_measured_j",
	"busy_ms"}

func (h *HourlyRow) values() []any {
	return []any{h.Hour, h.AccountID, h.OfferingID, h.ProviderAccountID, h.Tier, h.Model, h.PriceID, h.AskInputPrice,
		h.AskOutputPrice, h.Requests, h.InputTokens, h.OutputTokens, h.UnchargedRequests, h.UnchargedInputTokens,
		h.UnchargedOutputTokens, int64(h.Charge), int64(h.Payable), h.EnergyJ, h.EnergyMeasuredJ, h.BusyMs}
}

// CopyHourly writes rows into the hourly rollups by one COPY, as they come, and returns how many it wrote. No row
// may have the key of one stored (its hour, account, offering, tier, model, price and asks).
func CopyHourly(ctx context.Context, db Loader, rows iter.Seq[HourlyRow]) (_ int64, err error) {
	defer services.Wrap(&err, "metering.CopyHourly")
	return copySeq(ctx, db, "usage_hourly", hourlyRowColumns, rows, (*HourlyRow).values)
}

// UsageRow is a usage row as plain Go values: the columns the meter writes for a request, but its cached input
// tokens and their prices. Nil is NULL.
type UsageRow struct {
	EventID, RequestID                                              string
	AccountID, APIKeyID, OfferingID, ProviderAccountID              string
	Tier, Model                                                     string
	InputTokens, OutputTokens                                       int64
	ReportedInputTokens, ReportedOutputTokens                       *int64
	TTFTMs                                                          *float64
	DurationMs, EnergyJ                                             float64
	EnergySource, Status                                            string
	PriceID, InputPrice, OutputPrice, AskInputPrice, AskOutputPrice int64
	Charge, Payable                                                 money.Pico
	Flag, FlagReason                                                *string
	OccurredAt, MeteredAt                                           time.Time
	StreamSeq                                                       int64
}

var usageRowColumns = []string{"event_id", "request_id", "account_id", "api_key_id", "offering_id",
	"provider_account_id", "tier", "model", "input_tokens", "output_tokens", "reported_input_tokens",
	"reported_output_tokens", "ttft_ms", "duration_ms", "energy_j", "energy_source", "status", "price_id", "input_price",
	"output_price", "ask_input_price", "ask_output_price", "charge_pico", "payable_pico", "flag", "flag_reason",
	"occurred_at", "metered_at", "stream_seq"}

func (u *UsageRow) values() []any {
	return []any{u.EventID, u.RequestID, u.AccountID, u.APIKeyID, u.OfferingID, u.ProviderAccountID, u.Tier, u.Model,
		u.InputTokens, u.OutputTokens, u.ReportedInputTokens, u.ReportedOutputTokens, u.TTFTMs, u.DurationMs, u.EnergyJ,
		u.EnergySource, u.Status, u.PriceID, u.InputPrice, u.OutputPrice, u.AskInputPrice, u.AskOutputPrice,
		int64(u.Charge), int64(u.Payable), u.Flag, u.FlagReason, u.OccurredAt, u.MeteredAt, u.StreamSeq}
}

// CopyUsage writes rows into usage_events by one COPY, as they come, and returns how many it wrote: the rows
// alone, for reading, without their keys in usage_event_keys (so that the meter would take the same events again)
// and without their rollups (RollUpCopiedUsage writes them). Each row's month must have its partition.
func CopyUsage(ctx context.Context, db Loader, rows iter.Seq[UsageRow]) (_ int64, err error) {
	defer services.Wrap(&err, "metering.CopyUsage")
	return copySeq(ctx, db, "usage_events", usageRowColumns, rows, (*UsageRow).values)
}

// RollUpCopiedUsage writes the hourly rollups of every usage row, as the meter would have kept them, into rollups
// that hold none of their hours yet: for usage written by CopyUsage. Every row counts as charged (the uncharged
// requests and tokens are zero). It returns how many rollup rows it wrote.
func RollUpCopiedUsage(ctx context.Context, db Loader) (_ int64, err error) {
	defer services.Wrap(&err, "metering.RollUpCopiedUsage")
	tag, err := db.Exec(ctx, `
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
			provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
			uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, busy_ms)
		SELECT date_trunc('hour', occurred_at, 'UTC'), account_id, offering_id, tier, model, price_id, ask_input_price,
			ask_output_price, provider_account_id, count(*), sum(input_tokens), sum(output_tokens), 0, 0, 0,
			sum(charge_pico), sum(payable_pico), sum(energy_j), coalesce(sum(energy_j) FILTER (WHERE energy_source = 'measured'), 0),
			sum(duration_ms)
		FROM usage_events
		GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9`)
	return tag.RowsAffected(), err
}

// copySeq writes rows into table's columns by one COPY, each row's values in columns' order.
func copySeq[R any](ctx context.Context, db Loader, table string, columns []string, rows iter.Seq[R], values func(*R) []any) (int64, error) {
	next, stop := iter.Pull(rows)
	defer stop()
	return db.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromFunc(func() ([]any, error) {
		r, ok := next()
		if !ok {
			return nil, nil
		}
		return values(&r), nil
	}))
}

// ReadUsageRows reads the usage rows of the events taken from the stream after its message afterSeq, in the
// stream's order.
func ReadUsageRows(ctx context.Context, q Querier, afterSeq int64) (_ []UsageRow, err error) {
	defer services.Wrap(&err, "metering.ReadUsageRows")
	rows, err := q.Query(ctx, `SELECT event_id, request_id, account_id::text, api_key_id, offering_id::text,
		provider_account_id::text, tier, model, input_tokens, output_tokens, reported_input_tokens, reported_output_tokens,
		ttft_ms, duration_ms, energy_j, energy_source, status, price_id, input_price, output_price, ask_input_price,
		ask_output_price, charge_pico::bigint, payable_pico::bigint, flag, flag_reason, occurred_at, metered_at, stream_seq
		FROM usage_events WHERE stream_seq > $1 ORDER BY stream_seq`, afterSeq)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (u UsageRow, err error) {
		err = r.Scan(&u.EventID, &u.RequestID, &u.AccountID, &u.APIKeyID, &u.OfferingID, &u.ProviderAccountID, &u.Tier,
			&u.Model, &u.InputTokens, &u.OutputTokens, &u.ReportedInputTokens, &u.ReportedOutputTokens, &u.TTFTMs,
			&u.DurationMs, &u.EnergyJ, &u.EnergySource, &u.Status, &u.PriceID, &u.InputPrice, &u.OutputPrice,
			&u.AskInputPrice, &u.AskOutputPrice, (*int64)(&u.Charge), (*int64)(&u.Payable), &u.Flag, &u.FlagReason,
			&u.OccurredAt, &u.MeteredAt, &u.StreamSeq)
		return u, err
	})
}

// UsageTablesLike are two scratch tables shaped like usage_events and usage_event_keys, with their columns,
// constraints and indexes but no foreign keys, the first partitioned by month as usage_events is (one DEFAULT
// partition takes every month): what a benchmark copies usage rows into to measure what the COPYs alone cost.
type UsageTablesLike struct {
	usage, keys string
}

// CreateUsageTablesLike creates the tables usage and keys (and usage's partition, usage_months), empty.
func CreateUsageTablesLike(ctx context.Context, db Loader, usage, keys string) (_ UsageTablesLike, err error) {
	defer services.Wrap(&err, "metering.CreateUsageTablesLike")
	u := pgx.Identifier{usage}.Sanitize()
	_, err = db.Exec(ctx, `CREATE TABLE `+u+` (LIKE usage_events INCLUDING ALL) PARTITION BY RANGE (occurred_at);
		CREATE TABLE `+pgx.Identifier{usage + "_months"}.Sanitize()+` PARTITION OF `+u+` DEFAULT;
		CREATE TABLE `+pgx.Identifier{keys}.Sanitize()+` (LIKE usage_event_keys INCLUDING ALL)`)
	return UsageTablesLike{usage: usage, keys: keys}, err
}

// Copy writes rows into the tables as a batch of the meter writes them at the least: each row's keys by one COPY,
// then the rows by another.
func (t UsageTablesLike) Copy(ctx context.Context, db Loader, rows []UsageRow) (err error) {
	defer services.Wrap(&err, "metering.UsageTablesLike.Copy")
	keys := make([][]any, len(rows))
	for i, u := range rows {
		keys[i] = []any{u.EventID, u.RequestID, u.OccurredAt, u.StreamSeq}
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{t.keys}, usageKeyColumns, pgx.CopyFromRows(keys)); err != nil {
		return err
	}
	_, err = db.CopyFrom(ctx, pgx.Identifier{t.usage}, usageRowColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		return rows[i].values(), nil
	}))
	return err
}

// Drop drops the tables.
func (t UsageTablesLike) Drop(ctx context.Context, db Loader) (err error) {
	defer services.Wrap(&err, "metering.UsageTablesLike.Drop")
	_, err = db.Exec(ctx, `DROP TABLE `+pgx.Identifier{t.usage}.Sanitize()+`, `+pgx.Identifier{t.keys}.Sanitize())
	return err
}

// StoredSums sums every usage row: how many there are, with how many distinct event and request ids, what they
// charge and owe providers, and how many are flagged; and how many events the meter rejected.
type StoredSums struct {
	UsageRows, EventIDs, RequestIDs int64
	Charge, Payable                 money.BigPico
	Flagged, Rejected               int64
}

// SumStored sums every usage row, and counts the rejected events.
func SumStored(ctx context.Context, q Querier) (_ StoredSums, err error) {
	defer services.Wrap(&err, "metering.SumStored")
	var s StoredSums
	err = scanOne(ctx, q, `SELECT count(*), count(DISTINCT event_id), count(DISTINCT request_id),
		coalesce(sum(charge_pico), 0), coalesce(sum(payable_pico), 0),
		(SELECT coalesce(sum(rejected), 0)::bigint FROM usage_rejection_counts), count(*) FILTER (WHERE flag IS NOT NULL)
		FROM usage_events`, nil, &s.UsageRows, &s.EventIDs, &s.RequestIDs, &s.Charge, &s.Payable, &s.Rejected, &s.Flagged)
	return s, err
}

// CountUsageRows counts every usage row.
func CountUsageRows(ctx context.Context, q Querier) (n int64, err error) {
	defer services.Wrap(&err, "metering.CountUsageRows")
	err = scanOne(ctx, q, `SELECT count(*) FROM usage_events`, nil, &n)
	return n, err
}

// HourlySums sums every rollup row: how many there are, the requests they count, what they charge and owe
// providers.
type HourlySums struct {
	Rows, Requests  int64
	Charge, Payable money.BigPico
}

// SumHourly sums every rollup row.
func SumHourly(ctx context.Context, q Querier) (_ HourlySums, err error) {
	defer services.Wrap(&err, "metering.SumHourly")
	var s HourlySums
	err = scanOne(ctx, q, `SELECT count(*), coalesce(sum(requests), 0)::bigint, coalesce(sum(charge_pico), 0),
		coalesce(sum(payable_pico), 0) FROM usage_hourly`, nil, &s.Rows, &s.Requests, &s.Charge, &s.Payable)
	return s, err
}

// KeySpendSums sums the API keys' monthly spend: the keys with any, their requests and charges.
type KeySpendSums struct {
	Keys, Requests int64
	Charge         money.BigPico
}

// SumKeySpend sums the API keys' monthly spend over every key and month.
func SumKeySpend(ctx context.Context, q Querier) (_ KeySpendSums, err error) {
	defer services.Wrap(&err, "metering.SumKeySpend")
	var s KeySpendSums
	err = scanOne(ctx, q, `SELECT count(DISTINCT api_key_id), coalesce(sum(requests), 0)::bigint,
		coalesce(sum(charge_pico), 0) FROM api_key_spend`, nil, &s.Keys, &s.Requests, &s.Charge)
	return s, err
}

// DurationsOfRequests reads the duration the usage rows of the requests of ids report (the rig's handling, from
// the request's arrival to the answer whole), in milliseconds, by request id. A request without a usage row is
// missing from the map.
func DurationsOfRequests(ctx context.Context, q Querier, ids []string) (_ map[string]float64, err error) {
	defer services.Wrap(&err, "metering.DurationsOfRequests")
	rows, err := q.Query(ctx, `SELECT k.request_id, u.duration_ms FROM usage_event_keys k
		JOIN usage_events u ON u.occurred_at = k.occurred_at AND u.request_id = k.request_id
		WHERE k.request_id = ANY ($1)`, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(ids))
	var id string
	var ms float64
	_, err = pgx.ForEachRow(rows, []any{&id, &ms}, func() error {
		out[id] = ms
		return nil
	})
	return out, err
}

// scanOne reads the one row sql returns into dest.
func scanOne(ctx context.Context, q Querier, sql string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	_, err = pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (struct{}, error) {
		return struct{}{}, r.Scan(dest...)
	})
	return err
}
