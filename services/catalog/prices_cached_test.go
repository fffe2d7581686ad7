package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

// Every row of the price book has a cached input price: the one a change names, or a quarter of
// its input price rounded down; the defaults' and any row inserted without one (as the
// migration backfills) the same. A cached price above the input price is refused.
func TestPricesCarryACachedInputPrice(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := NewService(pool, Config{Now: func() time.Time { return now }})
	if err := s.EnsureDefaultPrices(ctx, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	finance := fixtures.User(t, pool, fixtures.Account(t, pool, "ops"), "fin@example.com", "finance")
	current, err := s.CurrentPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := current[TierStandard]; p.Input != 150_000 || p.CachedInput != 37_500 {
		t.Errorf("standard's default %+v, want $0.0375 cached input", p)
	}

	// A change without a cached price: a quarter of 70,001, rounded down.
	quarter, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 70_001, Output: 140_000, EffectiveFrom: now.AddDate(0, 0, 1)})
	if err != nil || quarter.CachedInput != 17_500 {
		t.Fatalf("scheduled %+v, %v; want $0.0175 cached input", quarter, err)
	}
	named := money.MicroUSD(50_000)
	half, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 100_000, Output: 140_000,
		CachedInput: &named, EffectiveFrom: now.AddDate(0, 0, 2)})
	if err != nil || half.CachedInput != 50_000 {
		t.Fatalf("scheduled %+v, %v; want the $0.05 named", half, err)
	}
	book, err := s.PriceBook(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := book.At(TierBatch, "", now.AddDate(0, 0, 1)); p.CachedInput != 17_500 {
		t.Errorf("the price book holds %+v tomorrow", p)
	}
	if p, _ := book.At(TierBatch, "", now.AddDate(0, 0, 3)); p.CachedInput != 50_000 {
		t.Errorf("the price book holds %+v the day after", p)
	}
	history, err := s.PriceHistory(ctx)
	if err != nil || len(history) != 5 || history[0].CachedInput != 50_000 {
		t.Errorf("history %+v, %v", history, err)
	}

	// A row inserted without one, as every row before the column was, takes a quarter of its input.
	var cached int64
	if err := pool.QueryRow(ctx, `INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
		VALUES ('realtime', 300003, 600000, $1, now()) RETURNING cached_input_micro_usd_per_mtok`, now.AddDate(0, 1, 0)).Scan(&cached); err != nil ||
		cached != 75_000 {
		t.Errorf("a row without a cached price got %d, %v; want 75000", cached, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at,
		cached_input_micro_usd_per_mtok) VALUES ('realtime', 100, 100, $1, now(), 101)`, now.AddDate(0, 2, 0)); err == nil {
		t.Error("the price book took a cached price above the input price")
	}

	above := money.MicroUSD(100_001)
	_, err = s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 100_000, Output: 140_000, CachedInput: &above,
		EffectiveFrom: now.AddDate(0, 0, 5)})
	var ae *services.Error
	if !errors.As(err, &ae) || ae.Fields["cached_input_usd_per_mtok"] == "" {
		t.Errorf("a cached price above the input price: %v", err)
	}
}
