package usagestore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/usagestore"
)

func month(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }

// insertUsage writes a usage row at occurred (and its key row), as the meter would, and returns
// the partition it went to.
func insertUsage(t *testing.T, pool *pgxpool.Pool, id string, occurred time.Time) string {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
		INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
			input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
		VALUES ($1, $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'standard', 'm', 10, 20, 1, 1, 1, 'estimated', 'ok',
			150000, 300000, 60000, 120000, 7500000, 3000000, $2, $2, 1)`, id, occurred); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO usage_event_keys (event_id, request_id, occurred_at, stream_seq) VALUES ($1, $1, $2, 1)`,
		id, occurred); err != nil {
		t.Fatal(err)
	}
	var part string
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM usage_events WHERE event_id = $1`, id).Scan(&part); err != nil {
		t.Fatal(err)
	}
	return part
}

// EnsureAhead makes the month the oldest event the meter still accepts belongs to, this
// month and the three after it; a second pass changes nothing; and a row of next month goes
// to next month's partition.
func TestEnsureAheadMakesTheMonthsAhead(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Date(2031, 5, 3, 10, 0, 0, 0, time.UTC) // a week ago was April
	s := usagestore.New(usagestore.Config{Pool: pool, AttachMonth: metering.AttachMonth, Now: func() time.Time { return now }})
	before, err := s.Months(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.EnsureAhead(ctx); err != nil {
			t.Fatal(err)
		}
		months, err := s.Months(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var made []time.Time
		for _, m := range months {
			if !slices.Contains(before, m) {
				made = append(made, m)
			}
		}
		want := []time.Time{month(2031, 4), month(2031, 5), month(2031, 6), month(2031, 7), month(2031, 8)}
		if !slices.Equal(made, want) {
			t.Fatalf("months made %v, want %v", made, want)
		}
	}
	if part := insertUsage(t, pool, "evt_june", time.Date(2031, 6, 30, 23, 59, 59, 999_000_000, time.UTC)); part != "usage_events_2031_06" {
		t.Errorf("a row of next month went to %s, want usage_events_2031_06", part)
	}
	if part := insertUsage(t, pool, "evt_july", month(2031, 7)); part != "usage_events_2031_07" {
		t.Errorf("a row of the first instant of July went to %s, want usage_events_2031_07", part)
	}
	// Each partition carries the table's indexes.
	var indexes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'usage_events_2031_06'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if indexes != 4 {
		t.Errorf("the new partition has %d indexes, want usage_events' 4", indexes)
	}
}

// A row written for a month without its partition waits in the DEFAULT partition, and moves
// to its month's partition when that month is made.
func TestAMonthMadeTakesItsRowsFromTheDefaultPartition(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	at := time.Date(2037, 2, 14, 8, 0, 0, 0, time.UTC)
	if part := insertUsage(t, pool, "evt_waiting", at); part != "usage_events_default" {
		t.Fatalf("a row of a month without its partition went to %s", part)
	}
	s := usagestore.New(usagestore.Config{Pool: pool, AttachMonth: metering.AttachMonth, Now: func() time.Time { return at }})
	if err := s.EnsureAhead(ctx); err != nil {
		t.Fatal(err)
	}
	var part string
	var waiting int
	if err := pool.QueryRow(ctx, `SELECT tableoid::regclass::text, (SELECT count(*) FROM usage_events_default)
		FROM usage_events WHERE event_id = 'evt_waiting'`).Scan(&part, &waiting); err != nil {
		t.Fatal(err)
	}
	if part != "usage_events_2037_02" || waiting != 0 {
		t.Errorf("the row is in %s with %d rows left in the default partition, want usage_events_2037_02 and none", part, waiting)
	}
	// MakeMonths, as the meter calls it, makes a month it is handed only once.
	if err := s.MakeMonths(ctx, []time.Time{time.Date(2040, 1, 5, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if err := s.MakeMonths(ctx, []time.Time{time.Date(2040, 1, 20, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	months, err := s.Months(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(months, month(2040, 1)) {
		t.Errorf("January 2040 was not made: %v", months)
	}
}

// retentionWorld is a database with two old months of usage, each rolled up, and a store
// whose clock is in the month three months after the first.
type retentionWorld struct {
	pool *pgxpool.Pool
	s    *usagestore.Store
}

func setupRetention(t *testing.T, retention int) retentionWorld {
	t.Helper()
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Date(2032, 4, 10, 0, 0, 0, 0, time.UTC)
	s := usagestore.New(usagestore.Config{Pool: pool, RetentionMonths: retention, Now: func() time.Time { return now },
		MonthNotFinal: invoicing.MonthNotFinal, RolledUpRequests: metering.RolledUpRequests,
		AttachMonth: metering.AttachMonth, DetachMonth: metering.DetachMonth})
	if err := s.MakeMonths(ctx, []time.Time{month(2032, 1), month(2032, 2)}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []time.Time{month(2032, 1), month(2032, 2)} {
		for i := range 3 {
			insertUsage(t, pool, fmt.Sprintf("evt_%s_%d", m.Format("2006_01"), i), m.Add(time.Duration(i)*time.Hour))
		}
		if _, err := pool.Exec(ctx, `
			INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
				provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
				uncharged_output_tokens, charge_pico, payable_pico, energy_j)
			VALUES ($1, gen_random_uuid(), gen_random_uuid(), 'standard', 'm', 0, 60000, 120000, gen_random_uuid(), 3, 30, 60,
				0, 0, 0, 22500000, 9000000, 3)`, m); err != nil {
			t.Fatal(err)
		}
	}
	return retentionWorld{pool: pool, s: s}
}

// retire runs Retire and returns what it did with 2032's months (the database also holds the
// months made when it was migrated, this year's, which Retire finds unclosed and keeps).
func (w retentionWorld) retire(t *testing.T) []usagestore.Retired {
	t.Helper()
	got, err := w.s.Retire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []usagestore.Retired
	for _, r := range got {
		if r.Month.Year() == 2032 {
			out = append(out, r)
		}
	}
	return out
}

// closeMonth records month's close as run to the end.
func (w retentionWorld) closeMonth(t *testing.T, m time.Time) {
	t.Helper()
	if _, err := w.pool.Exec(context.Background(), `INSERT INTO invoice_closes (period, status, started_at, finished_at, runs)
		VALUES ($1::date, 'done', now(), now(), 1)`, m.Format("2006-01-02")); err != nil {
		t.Fatal(err)
	}
}

func (w retentionWorld) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// With a retention of one month, in April: January and February are past it (March is kept).
// January, closed with every document final, is dropped with its keys and recorded; February,
// never closed, is kept, and Retire says why.
func TestRetentionDropsOnlyInvoicedMonths(t *testing.T) {
	w := setupRetention(t, 1)
	ctx := context.Background()
	w.closeMonth(t, month(2032, 1))
	got := w.retire(t)
	if len(got) != 2 || !got[0].Dropped || got[0].Events != 3 || got[1].Dropped || got[1].Kept == "" {
		t.Fatalf("Retire = %+v, want January dropped (3 events) and February kept", got)
	}
	months, err := w.s.Months(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(months, month(2032, 1)) || !slices.Contains(months, month(2032, 2)) {
		t.Errorf("months after Retire %v: want January gone and February kept", months)
	}
	if n := w.count(t, `SELECT count(*) FROM usage_events WHERE occurred_at < '2032-02-01'`); n != 0 {
		t.Errorf("%d usage rows of January left", n)
	}
	if n := w.count(t, `SELECT count(*) FROM usage_events WHERE occurred_at >= '2032-02-01' AND occurred_at < '2032-03-01'`); n != 3 {
		t.Errorf("%d usage rows of February, want its 3", n)
	}
	if n := w.count(t, `SELECT count(*) FROM usage_event_keys WHERE event_id LIKE 'evt_2032_01_%'`); n != 0 {
		t.Errorf("%d keys of January left", n)
	}
	if n := w.count(t, `SELECT count(*) FROM usage_event_keys WHERE event_id LIKE 'evt_2032_02_%'`); n != 3 {
		t.Errorf("%d keys of February, want its 3", n)
	}
	if n := w.count(t, `SELECT count(*) FROM usage_hourly`); n != 2 {
		t.Errorf("%d rollups, want both months' kept", n)
	}
	if n := w.count(t, `SELECT count(*) FROM usage_months_dropped WHERE month = '2032-01-01 00:00:00+00' AND events = 3`); n != 1 {
		t.Errorf("January's drop is not recorded")
	}
	// A second pass drops nothing more.
	if got := w.retire(t); len(got) != 1 || got[0].Dropped {
		t.Errorf("second Retire = %+v: want February kept again", got)
	}
}

// A closed month with a document still a draft, or whose rollups do not count its rows, is
// kept; so is every month with no retention set.
func TestRetentionKeepsMonthsNotFinal(t *testing.T) {
	ctx := context.Background()
	t.Run("a draft invoice", func(t *testing.T) {
		w := setupRetention(t, 1)
		w.closeMonth(t, month(2032, 1))
		customer := fixtures.Account(t, w.pool, "Acme")
		if _, err := w.pool.Exec(ctx, `INSERT INTO invoices (id, account_id, period, status, total_cents, amount_due_cents,
			opening_balance_pico, purchases_pico, refunds_pico, adjustments_pico, credit_notes_pico, usage_charged_pico,
			closing_balance_pico, computed_at, created_at)
			VALUES (gen_random_uuid(), $1, '2032-01-01', 'draft', 0, 0, 0, 0, 0, 0, 0, 0, 0, now(), now())`, customer); err != nil {
			t.Fatal(err)
		}
		if got := w.retire(t); len(got) != 2 || got[0].Dropped || got[1].Dropped {
			t.Errorf("Retire = %+v, want both months kept", got)
		}
	})
	t.Run("rollups short of the rows", func(t *testing.T) {
		w := setupRetention(t, 1)
		w.closeMonth(t, month(2032, 1))
		if _, err := w.pool.Exec(ctx, `UPDATE usage_hourly SET requests = 2 WHERE hour = '2032-01-01 00:00:00+00'`); err != nil {
			t.Fatal(err)
		}
		if got := w.retire(t); len(got) != 2 || got[0].Dropped {
			t.Errorf("Retire = %+v, want January kept", got)
		}
	})
	t.Run("no retention", func(t *testing.T) {
		w := setupRetention(t, 0)
		w.closeMonth(t, month(2032, 1))
		if got, err := w.s.Retire(ctx); err != nil || len(got) != 0 {
			t.Errorf("Retire = %+v, %v; want nothing looked at", got, err)
		}
		if n := w.count(t, `SELECT count(*) FROM usage_events`); n != 6 {
			t.Errorf("%d usage rows, want all 6", n)
		}
	})
}

// Start runs the pass on its own every Config.Every; Close stops it and waits.
func TestStartMaintainsUntilClose(t *testing.T) {
	pool := dbtest.New(t)
	now := time.Date(2045, 9, 20, 0, 0, 0, 0, time.UTC)
	s := usagestore.New(usagestore.Config{Pool: pool, Every: 20 * time.Millisecond, AttachMonth: metering.AttachMonth,
		Now: func() time.Time { return now }})
	s.Start(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for {
		months, err := s.Months(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(months, month(2045, 12)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop made no month ahead")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Close()
}
