package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
)

func TestDefaultPricesReachBackBeforeALaterBook(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t) // the defaults from 2026-10-01
	earlier := time.Date(2026, 8, 15, 0, 0, 0, 0, time.UTC)
	if err := s.EnsureDefaultPrices(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureDefaultPrices(ctx, earlier.AddDate(0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := countPrices(t, s); got != 6 {
		t.Fatalf("%d rows after reaching back to %s once; want the 3 defaults twice", got, earlier.Format(time.DateOnly))
	}
	at, err := s.PricesAt(ctx, earlier)
	if err != nil || len(at) != 3 || at[TierStandard].Input != DefaultPrices[1].Input {
		t.Fatalf("prices at %s: %+v %v", earlier, at, err)
	}
	if none, _ := s.PricesAt(ctx, earlier.Add(-time.Second)); len(none) != 0 {
		t.Fatalf("prices before the book began: %+v", none)
	}
}

func TestSeedPriceChangeIsRecordedOnceAndNeverBeforeItWasScheduled(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t)
	finance := fixtures.User(t, s.pool, fixtures.Account(t, s.pool, "ops"), "fin@example.com", "finance")
	from := time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)
	change := ScheduleInput{Tier: TierStandard, Input: 120_000, Output: 240_000, EffectiveFrom: from}
	if _, err := s.SeedPriceChange(ctx, finance, change, from.Add(time.Hour)); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("a change scheduled after it took effect: %v", err)
	}
	created, err := s.SeedPriceChange(ctx, finance, change, from.AddDate(0, 0, -14))
	if err != nil || !created {
		t.Fatalf("first seeding: created %v, %v", created, err)
	}
	// Seeded again, even at another instant, the tier holds the change already.
	change.EffectiveFrom = from.AddDate(0, 0, 1)
	if created, err := s.SeedPriceChange(ctx, finance, change, from.AddDate(0, 0, -14)); err != nil || created {
		t.Fatalf("second seeding: created %v, %v", created, err)
	}
	if got := countPrices(t, s); got != 4 {
		t.Fatalf("%d price rows; want the 3 defaults and the change", got)
	}
	before, _ := s.PricesAt(ctx, from.Add(-time.Microsecond))
	after, _ := s.PricesAt(ctx, from)
	if before[TierStandard].Input != DefaultPrices[1].Input || after[TierStandard].Input != 120_000 || after[TierStandard].Output != 240_000 {
		t.Fatalf("standard before %+v, after %+v", before[TierStandard], after[TierStandard])
	}
	hist, err := s.PriceHistory(ctx)
	if err != nil || hist[0].CreatedBy != "fin@example.com" || !hist[0].CreatedAt.Equal(from.AddDate(0, 0, -14)) {
		t.Fatalf("history %+v %v", hist, err)
	}
}

func countPrices(t *testing.T, s *Service) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM prices`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
