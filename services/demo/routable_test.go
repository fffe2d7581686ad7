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

// TestEveryBenchmarkConfigurationIsListed: the public catalog lists one demo offering for every GPU configuration
// and model of the benchmark file, each at asks within the price in force for its model in its tier, and the
// six the tiers' defaults cannot pay for at their model's own price.
func TestEveryBenchmarkConfigurationIsListed(t *testing.T) {
	s := seedDB(t)
	ctx := context.Background()
	rows, err := Rows()
	if err != nil {
		t.Fatal(err)
	}
	listed, err := s.cat.List(ctx, catalog.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	ownPrice := map[string]bool{}
	for _, p := range ModelPrices {
		ownPrice[p.Subject()] = true
	}
	byKey := map[string]catalog.Offering{}
	for _, o := range listed {
		byKey[fmt.Sprintf("benchmark:%s:%dx%s", o.Model, o.GPUCount, o.GPU)] = o
	}
	book, err := s.cat.PriceBook(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		o, ok := byKey[r.SeedKey()]
		if !ok {
			t.Errorf("%s is not in the catalog", r.SeedKey())
			continue
		}
		p, _ := book.At(o.Tier, o.Model, s.now)
		if o.Tier != r.Tier() || !p.Covers(o.AskInput, o.AskOutput) || o.AskInput+o.AskOutput != 2*r.Cost() {
			t.Errorf("%s listed in %s asking %d and %d against %+v", r.SeedKey(), o.Tier, o.AskInput, o.AskOutput, p)
		}
		// The six are listed at their model's own price; so is any other configuration of those models in
		// the tier (the 14B model on four RTX 4090s); every other at the tier's default.
		_, over := overpriced[r.SeedKey()]
		_, own := ownPrice[string(o.Tier)+" "+o.Model]
		if (over && !own) || own != (p.Model == o.Model) {
			t.Errorf("%s is listed at %+v; overpriced at the defaults %v", r.SeedKey(), p, over)
		}
	}
	if len(listed) != len(rows) || len(rows) != 24 {
		t.Fatalf("%d offerings listed for %d configurations, want 24", len(listed), len(rows))
	}
}

// TestEveryListedDemoOfferingIsRoutable: the catalog lists the 24 demo offerings, and a router over the seeded
// database, with a heartbeat from each rig, routes a request pinned to each one in its tier, at the price of its
// model in the tier (its own row, else the tier's default), with its asks within it.
func TestEveryListedDemoOfferingIsRoutable(t *testing.T) {
	s := seedDB(t)
	ctx := context.Background()
	listed, err := s.cat.List(ctx, catalog.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 24 {
		t.Fatalf("%d demo offerings listed, want 24", len(listed))
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
	for _, o := range listed {
		cs, err := r.Pick(routing.Request{Model: o.Model, Tier: o.Tier, Offering: o.ID})
		if err != nil || len(cs) != 1 {
			t.Errorf("%s on %dx %s (%s): Pick = %v", o.Model, o.GPUCount, o.GPU, o.Tier, err)
			continue
		}
		prices, err := s.cat.CurrentModelPrices(ctx, o.Model)
		if err != nil {
			t.Fatal(err)
		}
		p := prices[o.Tier]
		if c := cs[0]; c.AskInput != o.AskInput || c.AskOutput != o.AskOutput || c.PriceID != p.ID ||
			c.AskInput > c.PriceInput || c.AskOutput > c.PriceOutput {
			t.Errorf("%s (%s): candidate %+v against price %+v", o.Model, o.Tier, c, p)
		}
		if _, over := overpriced[fmt.Sprintf("benchmark:%s:%dx%s", o.Model, o.GPUCount, o.GPU)]; over && p.Model != o.Model {
			t.Errorf("%s (%s) is routed at %+v, not its model's own price", o.Model, o.Tier, p)
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

// TestAPriceCutBelowASeededOfferingsAsksPausesIt: finance cuts the 70B model's batch price below what its demo
// rig asks; the next seed pauses that offering, which takes it out of the catalog, and a third seed changes nothing.
func TestAPriceCutBelowASeededOfferingsAsksPausesIt(t *testing.T) {
	s := seedDB(t)
	ctx := context.Background()
	const model = "meta-llama/Meta-Llama-3-70B-Instruct"
	var finance string
	if err := s.pool.QueryRow(ctx, `SELECT id FROM users WHERE email = 'finance@example.com'`).Scan(&finance); err != nil {
		t.Fatal(err)
	}
	cut := time.Now().Add(time.Second)
	if _, err := s.cat.SchedulePrice(ctx, finance, catalog.ScheduleInput{Tier: catalog.TierBatch, Model: model,
		Input: 100_000, Output: 200_000, EffectiveFrom: cut}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := Seed(ctx, s.acc, s.cat, cut.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		var paused []string
		if err := s.pool.QueryRow(ctx, `SELECT array_agg(model) FROM offerings WHERE status = 'paused'`).Scan(&paused); err != nil {
			t.Fatal(err)
		}
		if len(paused) != 1 || paused[0] != model {
			t.Fatalf("paused %v, want the 70B rig", paused)
		}
	}
	for time.Now().Before(cut) {
		time.Sleep(10 * time.Millisecond)
	}
	listed, err := s.cat.List(ctx, catalog.ListInput{})
	if err != nil || len(listed) != 23 {
		t.Fatalf("%d listed, %v; want 23", len(listed), err)
	}
}
