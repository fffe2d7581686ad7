package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/db/dbtest"
)

// TestMigrationsUpDownUp applies every migration, stores data, reverts everything, and applies
// them again: each down undoes its up, and a database can always be rebuilt from nothing.
func TestMigrationsUpDownUp(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.NewEmpty(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	if err := db.Migrate(ctx, pool, nil); err != nil {
		t.Fatalf("up: %v", err)
	}
	newest, err := db.Version(ctx, pool)
	if err != nil || newest < 2 {
		t.Fatalf("version after up = %d, %v", newest, err)
	}
	var accountID string
	if err := pool.QueryRow(ctx, `INSERT INTO accounts (name, created_at) VALUES ('Fjord', now()) RETURNING id`).Scan(&accountID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
		ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, tier, status, created_at, updated_at)
		VALUES ($1, 'rtx-4090', 4, 'eu', 'm', 99333, 198667, 'standard', 'active', now(), now())`, accountID); err != nil {
		t.Fatal(err)
	}
	// A second Migrate changes nothing.
	if err := db.Migrate(ctx, pool, nil); err != nil {
		t.Fatalf("up again: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM offerings`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("offerings after a second up = %d, %v", n, err)
	}

	if err := db.MigrateDownAll(ctx, pool); err != nil {
		t.Fatalf("down: %v", err)
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name <> 'goose_db_version'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables left after migrating down", tables)
	}

	if err := db.Migrate(ctx, pool, nil); err != nil {
		t.Fatalf("up after down: %v", err)
	}
	if v, _ := db.Version(ctx, pool); v != newest {
		t.Fatalf("version after up, down, up = %d, want %d", v, newest)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM offerings`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("offerings after rebuild = %d, %v", n, err)
	}
}

// TestAsksAreSplitByTheirTiersPrices: migration 12 turns each offering's single ask A into an
// input and an output ask in the ratio of its tier's prices in force, A at half input and half
// output; a tier with no price keeps A for both; and the way down gives A back.
func TestAsksAreSplitByTheirTiersPrices(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.NewEmpty(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.MigrateTo(ctx, pool, 11); err != nil {
		t.Fatal(err)
	}
	var provider string
	if err := pool.QueryRow(ctx, `INSERT INTO accounts (name, created_at) VALUES ('Fjord', now()) RETURNING id`).Scan(&provider); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	// Standard: $0.15 in, $0.30 out in force, and a later change not yet in force. Realtime: $0.30 and
	// $0.60, superseded by $0.40 and $0.40. Batch has no price.
	for _, p := range []struct {
		tier    string
		in, out int64
		from    time.Time
	}{
		{"standard", 150_000, 300_000, now.AddDate(0, -1, 0)},
		{"standard", 1, 1_000_000, now.AddDate(0, 1, 0)},
		{"realtime", 300_000, 600_000, now.AddDate(0, -2, 0)},
		{"realtime", 400_000, 400_000, now.AddDate(0, -1, 0)},
	} {
		if _, err := pool.Exec(ctx, `INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
			VALUES ($1, $2, $3, $4, now())`, p.tier, p.in, p.out, p.from); err != nil {
			t.Fatal(err)
		}
	}
	old := func(model, tier string, ask int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
			ask_micro_usd_per_mtok, agent_url, tier, status, created_at, updated_at)
			VALUES ($1, 'rtx-4090', 4, 'eu', $2, $3, 'http://x', $4, 'active', now(), now())`, provider, model, ask, tier); err != nil {
			t.Fatal(err)
		}
	}
	old("std", "standard", 149_458)      // 2A x 1/3 = 99,638.67
	old("std-over", "standard", 300_343) // above standard's blended $0.225
	old("rt", "realtime", 202_453)       // 1:1
	old("batch", "batch", 112_371)       // no price
	old("tiny", "standard", 1)           // 2/3 rounds to 1, which leaves 1
	if err := db.Migrate(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{
		"std": {99_639, 199_277}, "std-over": {200_229, 400_457}, "rt": {202_453, 202_453},
		"batch": {112_371, 112_371}, "tiny": {1, 1},
	}
	rows, err := pool.Query(ctx, `SELECT model, ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, reported_requests FROM offerings`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var model string
		var in, out, reported int64
		if err := rows.Scan(&model, &in, &out, &reported); err != nil {
			t.Fatal(err)
		}
		if got := [2]int64{in, out}; got != want[model] || reported != 0 {
			t.Errorf("%s: asks %v, %d reported requests; want %v and none", model, got, reported, want[model])
		}
		n++
	}
	if rows.Err() != nil || n != len(want) {
		t.Fatalf("%d offerings after the migration, %v", n, rows.Err())
	}
	// The standard offering that was routable at the blended price is within both prices; the one
	// above it is above both.
	if s, o := want["std"], want["std-over"]; s[0] > 150_000 || s[1] > 300_000 || o[0] <= 150_000 || o[1] <= 300_000 {
		t.Fatalf("the split changed what is routable: %v, %v", s, o)
	}

	// The way down gives each offering the value of its asks at half input and half output, rounded up.
	if err := db.MigrateTo(ctx, pool, 11); err != nil {
		t.Fatal(err)
	}
	wantOld := map[string]int64{"std": 149_458, "std-over": 300_343, "rt": 202_453, "batch": 112_371, "tiny": 1}
	rows, err = pool.Query(ctx, `SELECT model, ask_micro_usd_per_mtok FROM offerings`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for rows.Next() {
		var model string
		var ask int64
		if err := rows.Scan(&model, &ask); err != nil {
			t.Fatal(err)
		}
		got[model] = ask
	}
	if rows.Err() != nil || len(got) != len(wantOld) {
		t.Fatalf("offerings after the way down: %v, %v", got, rows.Err())
	}
	for model, ask := range wantOld {
		if got[model] != ask {
			t.Errorf("%s: ask %d after the way down, want %d", model, got[model], ask)
		}
	}
}

// TestRollupsAreRebuiltPerPriceAndAsk: migration 14 rebuilds the hourly rollups from the usage
// rows per price version and asks (price version 0 for rows metered before tickets carried
// it), counting the requests charged nothing apart; the way down sums them back per hour,
// account, offering, tier and model.
func TestRollupsAreRebuiltPerPriceAndAsk(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.NewEmpty(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.MigrateTo(ctx, pool, 13); err != nil {
		t.Fatal(err)
	}
	var customer, provider, offering string
	if err := pool.QueryRow(ctx, `INSERT INTO accounts (name, created_at) VALUES ('Acme', now()) RETURNING id`).Scan(&customer); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO accounts (name, created_at) VALUES ('Fjord', now()) RETURNING id`).Scan(&provider); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
		ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, agent_url, tier, status, created_at, updated_at)
		VALUES ($1, 'rtx-4090', 4, 'eu', 'm', 60000, 120000, 'http://x', 'standard', 'active', now(), now()) RETURNING id`,
		provider).Scan(&offering); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 10, 12, 15, 0, 0, time.UTC)
	// price version, asks, tokens, charge, payable
	for i, r := range []struct {
		price           any
		askIn, askOut   int64
		in, out         int64
		charge, payable int64
	}{
		{int64(1), 60000, 120000, 1000, 100, 180_000_000, 72_000_000},
		{int64(1), 60000, 120000, 500, 0, 0, 0}, // no output: not charged
		{int64(2), 60000, 120000, 1000, 100, 240_000_000, 72_000_000},
		{int64(1), 30000, 60000, 1000, 100, 180_000_000, 36_000_000},
		{nil, 60000, 60000, 1000, 100, 180_000_000, 66_000_000},
	} {
		if _, err := pool.Exec(ctx, `INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id,
			tier, model, input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status, input_price,
			output_price, ask_input_price, ask_output_price, price_id, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
			VALUES ($1, $1, $2, $3, $4, 'standard', 'm', $5, $6, 1, 1, 2, 'estimated', 'ok', 150000, 300000, $7, $8, $9, $10, $11,
				$12, $12, $13)`, "e"+string(rune('a'+i)), customer, offering, provider, r.in, r.out, r.askIn, r.askOut, r.price,
			r.charge, r.payable, at, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	type row struct{ price, askIn, requests, in, out, unReq, unIn, charge, payable int64 }
	read := func(sql string) []row {
		t.Helper()
		rows, err := pool.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		var out []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.price, &r.askIn, &r.requests, &r.in, &r.out, &r.unReq, &r.unIn, &r.charge, &r.payable); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	got := read(`SELECT price_id, ask_input_price, requests, input_tokens, output_tokens, uncharged_requests,
		uncharged_input_tokens, charge_pico::bigint, payable_pico::bigint FROM usage_hourly ORDER BY price_id, ask_input_price`)
	want := []row{
		{0, 60000, 1, 1000, 100, 0, 0, 180_000_000, 66_000_000},
		{1, 30000, 1, 1000, 100, 0, 0, 180_000_000, 36_000_000},
		{1, 60000, 2, 1500, 100, 1, 500, 180_000_000, 72_000_000},
		{2, 60000, 1, 1000, 100, 0, 0, 240_000_000, 72_000_000},
	}
	if len(got) != len(want) {
		t.Fatalf("rollups after migration 14: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rollup %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := db.MigrateTo(ctx, pool, 13); err != nil {
		t.Fatal(err)
	}
	back := read(`SELECT 0, 0, requests, input_tokens, output_tokens, 0, 0, charge_pico::bigint, payable_pico::bigint FROM usage_hourly`)
	if len(back) != 1 || back[0] != (row{0, 0, 5, 4500, 400, 0, 0, 780_000_000, 246_000_000}) {
		t.Errorf("rollups after the way down: %+v", back)
	}
}

// Migration 00026 moves the usage rows into one partition per month of their occurred_at, with
// a key row each that keeps event ids and request ids unique over all months; the way down
// makes one table again with its unique keys.
func TestUsageMovesIntoMonthlyPartitions(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.NewEmpty(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := db.MigrateTo(ctx, pool, 25); err != nil {
		t.Fatal(err)
	}
	insert := func(id string, at time.Time) error {
		_, err := pool.Exec(ctx, `INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id,
			tier, model, input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status, input_price,
			output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
			VALUES ($1, $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'standard', 'm', 10, 20, 1, 1, 2,
				'estimated', 'ok', 150000, 300000, 60000, 120000, 7500000, 3000000, $2, $2, 7)`, id, at)
		return err
	}
	rows := map[string]time.Time{
		"evt_a": time.Date(2025, 1, 31, 23, 59, 59, 999_000_000, time.UTC),
		"evt_b": time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC),
		"evt_c": time.Date(2025, 3, 15, 0, 0, 0, 0, time.UTC),
	}
	for id, at := range rows {
		if err := insert(id, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.MigrateTo(ctx, pool, 26); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"evt_a": "usage_events_2025_01", "evt_b": "usage_events_2025_02", "evt_c": "usage_events_2025_03"} {
		var part string
		var keys int
		if err := pool.QueryRow(ctx, `SELECT u.tableoid::regclass::text, (SELECT count(*) FROM usage_event_keys k
			WHERE k.event_id = u.event_id AND k.request_id = u.request_id AND k.occurred_at = u.occurred_at AND k.stream_seq = 7)
			FROM usage_events u WHERE u.event_id = $1`, id).Scan(&part, &keys); err != nil {
			t.Fatal(err)
		}
		if part != want || keys != 1 {
			t.Errorf("%s is in %s with %d key rows, want %s and 1", id, part, keys, want)
		}
	}
	// Every month from the oldest row's to three months after this one has its partition.
	var months int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'usage_events'::regclass`).Scan(&months); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if want := (now.Year()-2025)*12 + int(now.Month()) - 1 + 3 + 1 + 1; months != want {
		t.Errorf("%d partitions, want %d (January 2025 to three months ahead, and the default)", months, want)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO usage_event_keys (event_id, request_id, occurred_at, stream_seq)
		VALUES ('evt_a', 'req_new', '2025-03-01', 8)`); err == nil {
		t.Error("a second key row for an event id of another month was taken")
	}

	if err := db.MigrateTo(ctx, pool, 25); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM usage_events`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d usage rows after the way down, %v; want 3", n, err)
	}
	if err := insert("evt_a", time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("after the way down, a second row for an event id was taken")
	}
}
