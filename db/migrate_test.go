package db_test

import (
	"context"
	"testing"

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
		ask_micro_usd_per_mtok, agent_url, tier, status, created_at, updated_at)
		VALUES ($1, 'rtx-4090', 4, 'eu', 'm', 149000, 'http://x', 'standard', 'active', now(), now())`, accountID); err != nil {
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
