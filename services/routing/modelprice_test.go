package routing

import (
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// TestAModelIsRoutedAtItsOwnPrice: batch pays $0.08 in and $0.16 out by default; the 70B model has a batch price of
// its own, $0.90 and $1.80. A 70B rig asking $0.80 and $1.60, far above the default, is offered and its candidate
// carries the model's row; an 8B rig is priced by the default; an 8B rig at the 70B's asks is not offered, since
// its model has no price that covers them. A second 70B price scheduled for 13:00 takes effect at 13:00, not before.
func TestAModelIsRoutedAtItsOwnPrice(t *testing.T) {
	t.Parallel()
	const big, small = "meta-llama/Meta-Llama-3-70B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct"
	b := setup(t)
	b.cat.book[ba] = append(b.cat.book[ba],
		catalog.Price{ID: 10, Tier: ba, Model: big, Input: 900_000, Output: 1_800_000, EffectiveFrom: b.clock.Now().Add(-time.Hour)},
		catalog.Price{ID: 11, Tier: ba, Model: big, Input: 850_000, Output: 1_700_000, EffectiveFrom: b.clock.Now().Add(time.Hour)})
	seventy, eight, dear8 := asking("70b", big, ba, 800_000, 1_600_000), asking("8b", small, ba, 50_000, 100_000),
		asking("dear8b", small, ba, 800_000, 1_600_000)
	b.cat.add(seventy, eight, dear8)
	if err := b.r.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	beat := func() {
		for _, o := range []catalog.Offering{seventy, eight, dear8} {
			b.beat(o, 0, 8)
		}
	}
	beat()
	cs := mustPick(t, b.r, Request{Model: big, Tier: ba})
	if len(cs) != 1 || cs[0].OfferingID != "70b" || cs[0].PriceID != 10 || cs[0].PriceInput != 900_000 || cs[0].PriceOutput != 1_800_000 {
		t.Fatalf("70B candidates %+v, want the 70B rig at row 10", cs)
	}
	cs = mustPick(t, b.r, Request{Model: small, Tier: ba})
	if got := ids(cs); !slices.Equal(got, []string{"8b"}) || cs[0].PriceID != 3 || cs[0].PriceInput != 80_000 || cs[0].PriceOutput != 160_000 {
		t.Fatalf("8B candidates %+v, want only the 8B rig at the batch default, row 3", cs)
	}
	wantPickError(t, b.r, Request{Model: small, Offering: "dear8b"}, ErrUnknownOffering, services.CodeNotFound)
	models := b.r.Models()
	if len(models) != 2 || models[0].Model != big || !slices.Equal(models[0].Tiers, []catalog.Tier{ba}) {
		t.Fatalf("Models = %+v", models)
	}

	b.clock.Advance(time.Hour - time.Nanosecond)
	beat()
	if cs := mustPick(t, b.r, Request{Model: big, Tier: ba}); cs[0].PriceID != 10 {
		t.Fatalf("a nanosecond before the 70B's new price: %+v", cs[0])
	}
	b.clock.Advance(time.Nanosecond)
	beat()
	if cs := mustPick(t, b.r, Request{Model: big, Tier: ba}); cs[0].PriceID != 11 || cs[0].PriceInput != 850_000 || cs[0].PriceOutput != 1_700_000 {
		t.Fatalf("at the 70B's new price: %+v", cs[0])
	}
}
