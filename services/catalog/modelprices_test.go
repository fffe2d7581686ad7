package catalog

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
)

const llama70B = "meta-llama/Meta-Llama-3-70B-Instruct"

// TestPriceBookAtPrefersTheModelsRow: a model with a row in force is priced by it; a model without one, and
// the model before its first row takes effect, by the tier's default; a change of the default leaves the
// model's row in force; a later row of the model replaces its earlier one.
func TestPriceBookAtPrefersTheModelsRow(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	book := PriceBook{TierBatch: {
		{ID: 1, Tier: TierBatch, Input: 80_000, EffectiveFrom: day(1)},
		{ID: 2, Tier: TierBatch, Model: llama70B, Input: 900_000, EffectiveFrom: day(10)},
		{ID: 3, Tier: TierBatch, Input: 70_000, EffectiveFrom: day(15)},
		{ID: 4, Tier: TierBatch, Model: llama70B, Input: 800_000, EffectiveFrom: day(20)},
	}}
	cases := []struct {
		model  string
		at     time.Time
		wantID int64
	}{
		{llama70B, day(1).Add(-time.Nanosecond), 0},
		{llama70B, day(1), 1},
		{llama70B, day(10).Add(-time.Nanosecond), 1},
		{llama70B, day(10), 2},
		{llama70B, day(15), 2}, // the default's change does not touch the model's row
		{llama70B, day(20), 4},
		{"", day(12), 1},
		{"", day(20), 3},
		{"google/gemma-2-9b-it", day(12), 1},
		{"google/gemma-2-9b-it", day(20), 3},
	}
	for _, c := range cases {
		p, ok := book.At(TierBatch, c.model, c.at)
		if p.ID != c.wantID || ok != (c.wantID != 0) {
			t.Errorf("At(batch, %q, %s) = %d, %v; want %d", c.model, c.at, p.ID, ok, c.wantID)
		}
	}
	if got := book.ForModel(llama70B, day(16)); got[TierBatch].ID != 2 || len(got) != 1 {
		t.Errorf("ForModel = %+v", got)
	}
	if got := book.ModelsAt(day(21)); len(got[TierBatch]) != 1 || got[TierBatch][llama70B].ID != 4 {
		t.Errorf("ModelsAt = %+v", got)
	}
}

// TestScheduledModelPriceTakesEffectAtItsMoment: a finance user schedules a price for one model; before its
// moment the model pays the tier's default, from it the model's price, and other models the default
// throughout. A second row for the same model and moment is a conflict; a default at that moment is not.
func TestScheduledModelPriceTakesEffectAtItsMoment(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t)
	finance := financeUser(t, s)
	from := s.now().Add(time.Hour)
	change, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Model: llama70B, Input: 900_000, Output: 1_800_000, EffectiveFrom: from})
	if err != nil {
		t.Fatal(err)
	}
	if change.Model != llama70B || change.ID == 0 {
		t.Fatalf("change %+v", change)
	}
	before, _ := s.ModelPricesAt(ctx, llama70B, from.Add(-time.Millisecond))
	after, _ := s.ModelPricesAt(ctx, llama70B, from)
	other, _ := s.ModelPricesAt(ctx, "google/gemma-2-9b-it", from)
	tiers, _ := s.PricesAt(ctx, from)
	if before[TierBatch].Input != 80_000 || before[TierBatch].Model != "" {
		t.Fatalf("before its moment the model pays %+v, want the batch default", before[TierBatch])
	}
	if after[TierBatch].ID != change.ID || after[TierBatch].Output != 1_800_000 {
		t.Fatalf("from its moment the model pays %+v, want row %d", after[TierBatch], change.ID)
	}
	if other[TierBatch].Input != 80_000 || tiers[TierBatch].Input != 80_000 || after[TierStandard].Input != 150_000 {
		t.Fatalf("other model %+v, tier default %+v, standard %+v", other[TierBatch], tiers[TierBatch], after[TierStandard])
	}
	if _, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Model: llama70B, Input: 1, Output: 1, EffectiveFrom: from}); services.ErrorCode(err) != services.CodeConflict {
		t.Fatalf("two changes of one model at one moment: %v", err)
	}
	if _, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Input: 70_000, Output: 140_000, EffectiveFrom: from}); err != nil {
		t.Fatalf("the tier's default at the model's moment: %v", err)
	}
	if _, err := s.SchedulePrice(ctx, finance, ScheduleInput{Tier: TierBatch, Model: llama70B, Input: 1, Output: 2, EffectiveFrom: s.now().Add(-time.Second)}); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("a retroactive model price: %v", err)
	}
	hist, err := s.PriceHistory(ctx)
	if err != nil || len(hist) != 5 || hist[1].Model != llama70B || hist[0].Model != "" {
		t.Fatalf("history %+v %v", hist, err)
	}
}

// TestListingIsCheckedAgainstItsModelsPrice: a 70B rig asking above the batch default is refused until its
// model has a price of its own that covers its asks, and then is listed in the public catalog once qualified;
// a rig of another model at the same asks is still refused.
func TestListingIsCheckedAgainstItsModelsPrice(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	provider := newAccount("Northwind")
	in := rig(llama70B, 400_000, nil) // no claimed P99: batch; asks 400,000 and 800,000
	if _, err := s.Create(ctx, provider, in); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("a 70B rig above the batch default: %v", err)
	}
	if err := s.EnsurePrices(ctx, []Price{{Tier: TierBatch, Model: llama70B, Input: 600_000, Output: 1_200_000}}, s.now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	o, err := s.Create(ctx, provider, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, provider, rig("google/gemma-2-9b-it", 400_000, nil)); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("another model at the 70B's asks: %v", err)
	}
	if err := s.MarkQualified(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, ListInput{})
	if err != nil || len(list) != 1 || list[0].ID != o.ID {
		t.Fatalf("catalog %+v, %v; want the 70B rig", list, err)
	}
}

// TestEnsureModelPriceIsNeverRetroactive: on a book that starts at effectiveFrom a model's row starts there
// too; on a book with older rows it starts now, since the model's requests may have been billed at the
// default before. Running it again adds nothing.
func TestEnsureModelPriceIsNeverRetroactive(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t) // the defaults start on 1 October
	bookStart := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	fresh := []Price{{Tier: TierBatch, Model: llama70B, Input: 900_000, Output: 1_800_000}}
	late := []Price{{Tier: TierStandard, Model: llama70B, Input: 900_000, Output: 1_800_000}}
	for range 2 {
		if err := s.EnsurePrices(ctx, fresh, bookStart); err != nil {
			t.Fatal(err)
		}
		if err := s.EnsurePrices(ctx, late, bookStart.AddDate(0, 0, 10)); err != nil {
			t.Fatal(err)
		}
	}
	book, err := s.PriceBook(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := book.At(TierBatch, llama70B, bookStart); p.Input != 900_000 || len(book[TierBatch]) != 2 {
		t.Fatalf("batch %+v", book[TierBatch])
	}
	if p, _ := book.At(TierStandard, llama70B, s.now().Add(-time.Nanosecond)); p.Model != "" || len(book[TierStandard]) != 2 {
		t.Fatalf("standard %+v", book[TierStandard])
	}
	if p, _ := book.At(TierStandard, llama70B, s.now()); p.Input != 900_000 {
		t.Fatalf("standard from now %+v", p)
	}
}

func financeUser(t *testing.T, s *Service) string {
	t.Helper()
	return fixtures.User(t, s.pool, fixtures.Account(t, s.pool, "ops"), "fin@example.com", "finance")
}
