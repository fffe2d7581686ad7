package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events/natstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/routing"
)

type seeded struct {
	pool *pgxpool.Pool
	acc  *accounts.Service
	cat  *catalog.Service
	now  time.Time
}

func seedDB(t *testing.T) seeded {
	t.Helper()
	pool := dbtest.New(t)
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: accounts.PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := seeded{pool: pool, acc: acc, cat: catalog.NewService(pool, catalog.Config{}),
		now: time.Now().UTC()}
	if err := Seed(context.Background(), acc, s.cat, s.now); err != nil {
		t.Fatal(err)
	}
	qualifySeeded(t, s.cat)
	return s
}

// TestEveryListedDemoOfferingIsRoutable: the catalog lists 18 demo offerings, none of the six that cost more than
// their tier pays, and a router over the seeded database, with a heartbeat from each rig, routes a request pinned
// to each one in its tier, with its asks within the tier's price.
func TestEveryListedDemoOfferingIsRoutable(t *testing.T) {
	s := seedDB(t)
	ctx := context.Background()
	listed, err := s.cat.List(ctx, catalog.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 18 {
		t.Fatalf("%d demo offerings listed, want 18", len(listed))
	}
	var stored int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM offerings`).Scan(&stored); err != nil || stored != 18 {
		t.Fatalf("%d offerings stored, %v; want the 18 listed and none of the six", stored, err)
	}
	for _, o := range listed {
		if key := fmt.Sprintf("benchmark:%s:%dx%s", o.Model, o.GPUCount, o.GPU); overpriced[key] != 0 {
			t.Errorf("the overpriced %s is listed", key)
		}
	}

	nc := natstest.Connect(t, natstest.Start(t, natsserver.EmbeddedOptions{}))
	r := routing.New(routing.Config{Pool: s.pool, NATS: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := r.Start(rctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range listed {
		body, _ := json.Marshal(routing.Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID, Capacity: 8, At: time.Now()})
		if err := nc.Publish(events.HeartbeatSubject(o.ProviderAccountID, o.ID), body); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); r.Ready(ctx) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the router is not ready: %v", r.Ready(ctx))
		}
	}
	prices, err := s.cat.CurrentPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range listed {
		cs, err := r.Pick(routing.Request{Model: o.Model, Tier: o.Tier, Offering: o.ID})
		if err != nil || len(cs) != 1 {
			t.Errorf("%s on %dx %s (%s): Pick = %v", o.Model, o.GPUCount, o.GPU, o.Tier, err)
			continue
		}
		p := prices[o.Tier]
		if c := cs[0]; c.AskInput != o.AskInput || c.AskOutput != o.AskOutput || c.PriceID != p.ID ||
			c.AskInput > c.PriceInput || c.AskOutput > c.PriceOutput {
			t.Errorf("%s (%s): candidate %+v against price %+v", o.Model, o.Tier, c, p)
		}
	}
	// Every model the catalog lists is on offer, in the tiers it lists it in.
	onOffer := map[string]map[catalog.Tier]bool{}
	for _, m := range r.Models() {
		onOffer[m.Model] = map[catalog.Tier]bool{}
		for _, tier := range m.Tiers {
			onOffer[m.Model][tier] = true
		}
	}
	for _, o := range listed {
		if !onOffer[o.Model][o.Tier] {
			t.Errorf("%s is listed in %s but not on offer there: %v", o.Model, o.Tier, onOffer[o.Model])
		}
	}
}

// TestAnEarlierSeedsOverpricedOfferingsArePaused: a database seeded before holds the six as active offerings,
// their asks split as the migration to per-kind asks split them; seeding again pauses them, which takes them out
// of the catalog, and a third seed changes nothing.
func TestAnEarlierSeedsOverpricedOfferingsArePaused(t *testing.T) {
	s := seedDB(t)
	ctx := context.Background()
	rows, err := Rows()
	if err != nil {
		t.Fatal(err)
	}
	prices, err := s.cat.CurrentPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var provider string
	if err := s.pool.QueryRow(ctx, `SELECT id FROM accounts WHERE name = 'Northwind Compute'`).Scan(&provider); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, over := overpriced[r.SeedKey()]; !over {
			continue
		}
		in, out := r.Asks(prices[r.Tier()])
		if _, err := s.pool.Exec(ctx, `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
			ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, tier, status, seed_key, created_at, updated_at)
			VALUES ($1, $2, $3, 'us', $4, $5, $6, $7, 'active', $8, now(), now())`,
			provider, r.GPU, r.GPUCount, r.Model, int64(in), int64(out), string(r.Tier()), r.SeedKey()); err != nil {
			t.Fatal(err)
		}
	}
	status := func() map[string]int {
		out := map[string]int{}
		rs, err := s.pool.Query(ctx, `SELECT status, count(*) FROM offerings GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		for rs.Next() {
			var st string
			var n int
			if err := rs.Scan(&st, &n); err != nil {
				t.Fatal(err)
			}
			out[st] = n
		}
		return out
	}
	if got := status(); got["active"] != 24 {
		t.Fatalf("statuses before the seed %v, want 24 active", got)
	}
	for range 2 {
		if err := Seed(ctx, s.acc, s.cat, s.now); err != nil {
			t.Fatal(err)
		}
		qualifySeeded(t, s.cat)
		if got := status(); got["active"] != 18 || got["paused"] != 6 {
			t.Fatalf("statuses after the seed %v, want 18 active and the six paused", got)
		}
	}
	listed, err := s.cat.List(ctx, catalog.ListInput{})
	if err != nil || len(listed) != 18 {
		t.Fatalf("%d listed, %v; want 18", len(listed), err)
	}
}
