package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/fixtures"
)

// Loaded prices and offerings read back as the catalog's: the price book with its default cached input prices,
// the rigs with their site and stated PUE.
func TestBulkLoads(t *testing.T) {
	dbtest.SkipShort(t)
	pool := dbtest.New(t)
	ctx := context.Background()
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := CopyPrices(ctx, pool, []LoadedPrice{
		{Tier: TierRealtime, Input: 300000, Output: 600000, EffectiveFrom: since, CreatedAt: since},
		{Tier: TierRealtime, Input: 330000, Output: 660000, EffectiveFrom: since.AddDate(0, 1, 0), CreatedAt: since},
	}); err != nil {
		t.Fatal(err)
	}
	book, err := ReadPriceBook(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := book.At(TierRealtime, "", since.AddDate(0, 1, 1))
	if !ok || p.Input != 330000 || p.Output != 660000 || p.CachedInput != 82500 || p.ID == 0 {
		t.Fatalf("the price in force: %+v, %v", p, ok)
	}

	provider := fixtures.Account(t, pool, "Provider 0")
	home, dc := mustUUID(t), mustUUID(t)
	pue := 1.15
	if _, err := CopyOfferings(ctx, pool, []LoadedOffering{
		{ID: home, ProviderAccountID: provider, GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: "m", AskInput: 20000,
			AskOutput: 40000, Tier: TierStandard, Status: StatusActive, CreatedAt: since, UpdatedAt: since},
		{ID: dc, ProviderAccountID: provider, GPU: "h100-pcie", GPUCount: 1, Region: "no", Model: "m", AskInput: 60000,
			AskOutput: 120000, Tier: TierRealtime, Status: StatusActive, SeedKey: "bench-1", Site: carbon.SiteDatacentre,
			StatedPUE: &pue, CreatedAt: since, UpdatedAt: since},
	}); err != nil {
		t.Fatal(err)
	}
	rigs, err := RigsByID(ctx, pool, []string{home, dc})
	if err != nil {
		t.Fatal(err)
	}
	if r := rigs[home]; r.Site != carbon.SiteHome || r.StatedPUE != nil || r.GPUCount != 4 {
		t.Fatalf("the rig at home: %+v", r)
	}
	if r := rigs[dc]; r.Site != carbon.SiteDatacentre || r.StatedPUE == nil || *r.StatedPUE != 1.15 || r.Region != "no" {
		t.Fatalf("the rig in a data centre: %+v", r)
	}
}

func mustUUID(t *testing.T) string {
	t.Helper()
	id, err := services.NewUUID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}
