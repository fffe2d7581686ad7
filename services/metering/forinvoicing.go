package metering

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services/money"
)

// The rollups and usage rows as package invoicing reads them into documents: who the close lists, what each chunk
// of its accounts computes its drafts from, and the exact check of an invoice against its usage rows. Each read is
// queued on the caller's batch, so that the close reads them in a chunk's transaction and in the round trip that
// reads its own tables. The requests flagged with an excess are read by ReportedAboveBilled and BilledAboveResponse.

// RollupSums are sums of the rollups' counts and amounts.
type RollupSums struct {
	Requests                   int64
	InputTokens, OutputTokens  int64
	UnchargedRequests          int64 // of Requests, charged nothing
	UnchargedInputTokens       int64 // of InputTokens
	UnchargedOutputTokens      int64 // of OutputTokens
	CachedInputTokens          int64 // of InputTokens
	UnchargedCachedInputTokens int64 // of UnchargedInputTokens
	Charge, Payable            money.BigPico
}

// rollupSumColumns sum the rollups' columns in the order targets scans them.
const rollupSumColumns = `sum(requests)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint,
	sum(uncharged_requests)::bigint, sum(uncharged_input_tokens)::bigint, sum(uncharged_output_tokens)::bigint,
	sum(charge_pico), sum(payable_pico), sum(cached_input_tokens)::bigint, sum(uncharged_cached_input_tokens)::bigint`

func (s *RollupSums) targets() []any {
	return []any{&s.Requests, &s.InputTokens, &s.OutputTokens, &s.UnchargedRequests, &s.UnchargedInputTokens,
		&s.UnchargedOutputTokens, &s.Charge, &s.Payable, &s.CachedInputTokens, &s.UnchargedCachedInputTokens}
}

// QueueFirstRollupHour queues on b the read of the earliest hour any rollup holds; found is false while there is
// none.
func QueueFirstRollupHour(b *pgx.Batch, first *time.Time, found *bool) {
	b.Queue(`SELECT min(hour) FROM usage_hourly`).QueryRow(func(row pgx.Row) error {
		var t pgtype.Timestamptz
		if err := row.Scan(&t); err != nil {
			return fmt.Errorf("metering: the first hour of usage: %w", err)
		}
		*first, *found = t.Time, t.Valid
		return nil
	})
}

// QueueRolledUpCustomers queues on b the read of the customer accounts with rollups in the hours [from, to), in
// no order, into ids.
func QueueRolledUpCustomers(b *pgx.Batch, from, to time.Time, ids *[]string) {
	queueDistinct(b, `SELECT DISTINCT account_id::text FROM usage_hourly WHERE hour >= $1 AND hour < $2`, from, to, ids)
}

// QueueRolledUpProviders is QueueRolledUpCustomers for the providers whose offerings served the rollups.
func QueueRolledUpProviders(b *pgx.Batch, from, to time.Time, ids *[]string) {
	queueDistinct(b, `SELECT DISTINCT provider_account_id::text FROM usage_hourly WHERE hour >= $1 AND hour < $2`,
		from, to, ids)
}

func queueDistinct(b *pgx.Batch, sql string, from, to time.Time, ids *[]string) {
	b.Queue(sql, from, to).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("metering: the accounts with usage from %s: %w", from.Format(time.RFC3339), err)
		}
		*ids = list
		return nil
	})
}

// CustomerRollup is a customer's rollups over the hours before the window's split (Current false) or from it on
// (Current true), either of one tier, model and price version (ByProvider false), or of one provider's offerings
// (ByProvider true, ProviderID set, the line's fields empty).
type CustomerRollup struct {
	AccountID   string
	Current     bool
	ByProvider  bool
	Tier, Model string
	PriceID     int64
	ProviderID  string
	Sums        RollupSums
}

// QueueCustomerRollups queues on b the read of the customers' rollups of the hours [from, to), split at split, by
// line and by provider in one pass over their rows (usage_hourly_account_idx), and calls each with every row as
// the batch is read.
func QueueCustomerRollups(b *pgx.Batch, accountIDs []string, from, split, to time.Time, each func(CustomerRollup)) {
	b.Queue(`
		SELECT account_id::text, current, GROUPING(provider_account_id) = 1, tier, model, price_id,
			coalesce(provider_account_id::text, ''), `+rollupSumColumns+`
		FROM (SELECT *, hour >= $2 AS current FROM usage_hourly
			WHERE account_id = ANY ($4::text[]::uuid[]) AND hour >= $1 AND hour < $3) h
		GROUP BY GROUPING SETS ((account_id, current, tier, model, price_id), (account_id, current, provider_account_id))`,
		from, split, to, accountIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r CustomerRollup
			var isLine bool // GROUPING(provider_account_id) = 1: a row of the lines' grouping set
			var tier, model pgtype.Text
			var priceID pgtype.Int8
			if err := rows.Scan(append([]any{&r.AccountID, &r.Current, &isLine, &tier, &model, &priceID, &r.ProviderID},
				r.Sums.targets()...)...); err != nil {
				return err
			}
			r.ByProvider = !isLine
			r.Tier, r.Model, r.PriceID = tier.String, model.String, priceID.Int64
			each(r)
		}
		return rows.Err()
	})
}

// ProviderRollup is a provider's rollups over the hours before the window's split (Current false) or from it on,
// of one offering, model and the asks its requests were routed at.
type ProviderRollup struct {
	ProviderID string
	Current    bool
	OfferingID string
	Model      string
	// AskInput, AskOutput and AskCachedInput are the asks in micro-dollars per million tokens; the cached input
	// ask is the input ask in rows made before cached input had an ask of its own.
	AskInput, AskOutput, AskCachedInput int64
	Sums                                RollupSums
}

// QueueProviderRollups queues on b the read of the providers' rollups of the hours [from, to), split at split,
// through usage_hourly_provider_idx, and calls each with every row as the batch is read.
func QueueProviderRollups(b *pgx.Batch, providerIDs []string, from, split, to time.Time, each func(ProviderRollup)) {
	b.Queue(`
		SELECT provider_account_id::text, hour >= $2, offering_id::text, model, ask_input_price, ask_output_price,
			coalesce(ask_cached_input_price, ask_input_price), `+rollupSumColumns+`
		FROM usage_hourly
		WHERE provider_account_id = ANY ($4::text[]::uuid[]) AND hour >= $1 AND hour < $3
		GROUP BY 1, 2, 3, 4, 5, 6, 7`, from, split, to, providerIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r ProviderRollup
			if err := rows.Scan(append([]any{&r.ProviderID, &r.Current, &r.OfferingID, &r.Model, &r.AskInput, &r.AskOutput,
				&r.AskCachedInput}, r.Sums.targets()...)...); err != nil {
				return err
			}
			each(r)
		}
		return rows.Err()
	})
}

// LineTotals are an account's usage of one tier, model and price version (0 where the rows name none), summed.
type LineTotals struct {
	Tier, Model               string
	PriceID                   int64
	Requests                  int64
	InputTokens, OutputTokens int64
	CachedInputTokens         int64 // of InputTokens
	Charge, Payable           money.BigPico
}

// QueueRollupLines queues on b the read of the account's rollups of the hours [from, to) by line, and calls each
// with every line as the batch is read: one side of the exact check of an invoice (QueueUsageLines the other).
func QueueRollupLines(b *pgx.Batch, accountID string, from, to time.Time, each func(LineTotals)) {
	queueLines(b, `
		SELECT tier, model, price_id, sum(requests)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint,
			sum(charge_pico), sum(payable_pico), sum(cached_input_tokens)::bigint
		FROM usage_hourly WHERE account_id = $1 AND hour >= $2 AND hour < $3
		GROUP BY 1, 2, 3`, accountID, from, to, each)
}

// QueueUsageLines is QueueRollupLines over the usage rows the rollups sum (usage_events), one request a row.
func QueueUsageLines(b *pgx.Batch, accountID string, from, to time.Time, each func(LineTotals)) {
	queueLines(b, `
		SELECT tier, model, coalesce(price_id, 0), count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
			sum(charge_pico), sum(payable_pico), sum(cached_input_tokens)::bigint
		FROM usage_events WHERE account_id = $1 AND occurred_at >= $2 AND occurred_at < $3
		GROUP BY 1, 2, 3`, accountID, from, to, each)
}

func queueLines(b *pgx.Batch, sql, accountID string, from, to time.Time, each func(LineTotals)) {
	b.Queue(sql, accountID, from, to).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var l LineTotals
			if err := rows.Scan(&l.Tier, &l.Model, &l.PriceID, &l.Requests, &l.InputTokens, &l.OutputTokens, &l.Charge,
				&l.Payable, &l.CachedInputTokens); err != nil {
				return err
			}
			each(l)
		}
		return rows.Err()
	})
}
