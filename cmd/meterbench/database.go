package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/db/dbtest"
)

// scratchDatabase is a fresh, migrated database of its own on the tests' PostgreSQL server
// (dbtest.AdminURL), for one run.
type scratchDatabase struct {
	name string
	Pool *pgxpool.Pool
}

// createDatabase creates and migrates a database named for this run.
func createDatabase(ctx context.Context) (*scratchDatabase, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	d := &scratchDatabase{name: "gpumarket_bench_" + hex.EncodeToString(b)}
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w (is PostgreSQL running? `go run ./cmd/gpumarket dev postgres` starts it)", dbtest.AdminURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+d.name); err != nil {
		return nil, fmt.Errorf("create the scratch database: %w", err)
	}
	u, err := url.Parse(dbtest.AdminURL())
	if err != nil {
		d.drop()
		return nil, err
	}
	u.Path = "/" + d.name
	if d.Pool, err = db.Open(ctx, u.String()); err != nil {
		d.drop()
		return nil, err
	}
	if err := db.Migrate(ctx, d.Pool, nil); err != nil {
		d.drop()
		return nil, err
	}
	return d, nil
}

// drop closes the pool and drops the database, whatever state the run left it in.
func (d *scratchDatabase) drop() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		progress("could not drop database %s: %v", d.name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)"); err != nil {
		progress("could not drop database %s: %v", d.name, err)
	}
}

// seed writes the workload's customers, providers, offerings and price book, and returns the
// workload over them (without its NATS URL and ticket key).
func seed(ctx context.Context, pool *pgxpool.Pool, events int) (workload, error) {
	const customers, providers, offeringsPerProvider = 20, 4, 2
	now := time.Now()
	w := workload{Events: events, IDsFrom: now.UnixMilli()}
	account := func(name string) (string, error) {
		var id string
		err := pool.QueryRow(ctx, `INSERT INTO accounts (name, created_at) VALUES ($1, $2) RETURNING id::text`, name, now).Scan(&id)
		return id, err
	}
	for i := range customers {
		id, err := account(fmt.Sprintf("Customer %d", i))
		if err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
		w.Customers = append(w.Customers, id)
	}
	tiers := []string{"realtime", "standard", "batch"}
	for p := range providers {
		provider, err := account(fmt.Sprintf("Provider %d", p))
		if err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
		for o := range offeringsPerProvider {
			off := offering{Provider: provider, Tier: tiers[len(w.Offerings)%len(tiers)],
				Model: fmt.Sprintf("bench/model-%d", o), Ask: int64(10_000 + 5_000*len(w.Offerings))}
			if err := pool.QueryRow(ctx, `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
				ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, agent_url, tier, status, created_at, updated_at)
				VALUES ($1, 'rtx-4090', 4, 'eu', $2, $3, $3, 'http://bench', $4, 'active', $5, $5) RETURNING id::text`,
				provider, off.Model, off.Ask, off.Tier, now).Scan(&off.ID); err != nil {
				return w, fmt.Errorf("seed: %w", err)
			}
			w.Offerings = append(w.Offerings, off)
		}
	}
	for tier, p := range tierPrices {
		if _, err := pool.Exec(ctx, `INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok,
			effective_from, created_at) VALUES ($1, $2, $3, $4, $5)`, tier, p.in, p.out, now.AddDate(0, -1, 0), now); err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
	}
	return w, nil
}
