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
		ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, agent_url, tier, status, created_at, updated_at)
		VALUES ($1, 'rtx-4090', 4, 'eu', 'm', 99333, 198667, 'http://x', 'standard', 'active', now(), now())`, accountID); err != nil {
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
