package catalog

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

// A price change is in the finance audit log with who scheduled it, the price it supersedes
// from that moment and the new one; a refused change records nothing.
func TestPriceChangesAreRecordedInTheAuditLog(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	log := audit.New(pool, clock)
	s := NewService(pool, Config{Now: clock, Audit: log})
	if err := s.EnsureDefaultPrices(ctx, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	finance := fixtures.User(t, pool, fixtures.Account(t, pool, "ops"), "fin@example.com", "finance")
	from := now.AddDate(0, 0, 1)
	change, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 70_000, Output: 140_000, EffectiveFrom: from})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 1, Output: 1, EffectiveFrom: from}); err == nil {
		t.Fatal("a second change at the same moment was scheduled")
	}
	page, err := log.List(ctx, audit.Filter{Action: audit.ActionPriceChange})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 {
		t.Fatalf("%d price changes in the audit log, want 1", len(page.Entries))
	}
	e := page.Entries[0]
	var before, after struct {
		Tier  Tier           `json:"tier"`
		Input money.MicroUSD `json:"input_usd_per_mtok"`
	}
	if json.Unmarshal(e.Before, &before) != nil || json.Unmarshal(e.After, &after) != nil {
		t.Fatalf("before %s after %s", e.Before, e.After)
	}
	if e.ActorID != finance || e.SubjectID != strconv.FormatInt(change.ID, 10) || before.Tier != TierBatch ||
		before.Input != DefaultPrices[2].Input || after.Input != 70_000 {
		t.Errorf("entry %+v: before %+v, after %+v", e, before, after)
	}
}
