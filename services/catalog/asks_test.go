package catalog

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

// fields returns the field errors of an invalid *services.Error, failing the test otherwise.
func fields(t *testing.T, err error) map[string]string {
	t.Helper()
	var ae *services.Error
	if !errors.As(err, &ae) || ae.Code != services.CodeInvalid {
		t.Fatalf("err = %v, want invalid with field errors", err)
	}
	return ae.Fields
}

// TestAnAskAboveItsTiersPriceIsRefused: at the default prices (realtime $0.30 in and $0.60 out,
// standard $0.15 and $0.30, batch $0.08 and $0.16), a listing may ask up to its tier's price for each
// kind of token and no more, so that no request pays its provider more than its customer paid.
func TestAnAskAboveItsTiersPriceIsRefused(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	listing := func(askIn, askOut money.MicroUSD, p99 *float64) ListingInput {
		in := rig("m", 0, p99)
		in.AskInput, in.AskOutput = askIn, askOut
		return in
	}
	cases := []struct {
		name          string
		in            ListingInput
		wantIn, wantO string // the field errors expected; "" for none
	}{
		{name: "standard at its price", in: listing(150_000, 300_000, f(300))},
		{name: "realtime at its price", in: listing(300_000, 600_000, f(40))},
		{name: "batch at its price", in: listing(80_000, 160_000, nil)},
		{name: "standard, output a micro-dollar over", in: listing(150_000, 300_001, f(300)),
			wantO: "Your ask for output tokens, $0.300001 per million, is above the standard tier's price of $0.30: customers would pay less than you are paid. Ask at most $0.30."},
		{name: "standard, output $0.40", in: listing(100_000, 400_000, f(300)),
			wantO: "Your ask for output tokens, $0.40 per million, is above the standard tier's price of $0.30: customers would pay less than you are paid. Ask at most $0.30."},
		// Under the blended price ($0.12) but above the input price: a request of input tokens only
		// would pay the provider more than the customer.
		{name: "batch, input over, blend under", in: listing(90_000, 100_000, nil),
			wantIn: "Your ask for input tokens, $0.09 per million, is above the batch tier's price of $0.08: customers would pay less than you are paid. Ask at most $0.08."},
		{name: "both over", in: listing(400_000, 700_000, f(40)),
			wantIn: "Your ask for input tokens, $0.40 per million, is above the realtime tier's price of $0.30: customers would pay less than you are paid. Ask at most $0.30.",
			wantO:  "Your ask for output tokens, $0.70 per million, is above the realtime tier's price of $0.60: customers would pay less than you are paid. Ask at most $0.60."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := s.Create(ctx, p, c.in)
			if c.wantIn == "" && c.wantO == "" {
				if err != nil || o.AskInput != c.in.AskInput || o.AskOutput != c.in.AskOutput {
					t.Fatalf("Create = %+v, %v; want listed at its asks", o, err)
				}
				return
			}
			fe := fields(t, err)
			if fe[FieldAskInput] != c.wantIn || fe[FieldAskOutput] != c.wantO {
				t.Fatalf("field errors %q; want input %q, output %q", fe, c.wantIn, c.wantO)
			}
		})
	}
	own, err := s.ListOwn(ctx, p)
	if err != nil || len(own) != 3 {
		t.Fatalf("%d offerings saved, %v; want only the three within their tier's price", len(own), err)
	}
}

// TestAnEditIsCheckedAgainstTheTierItLeadsTo: a provider who removes its P99 claim moves its rig to
// batch, whose price is lower; the standard asks it kept are refused there, and the rig is unchanged.
func TestAnEditIsCheckedAgainstTheTierItLeadsTo(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	o, err := s.Create(ctx, p, rig("m", 100_000, f(300))) // standard: $0.10 and $0.20
	if err != nil {
		t.Fatal(err)
	}
	fe := fields(t, func() error { _, err := s.Update(ctx, p, o.ID, rig("m", 100_000, nil)); return err }())
	if !strings.HasPrefix(fe[FieldAskInput], "Your ask for input tokens, $0.10 per million, is above the batch tier's price of $0.08") ||
		!strings.HasPrefix(fe[FieldAskOutput], "Your ask for output tokens, $0.20 per million, is above the batch tier's price of $0.16") {
		t.Fatalf("field errors %q", fe)
	}
	got, err := s.Own(ctx, p, o.ID)
	if err != nil || got.Tier != TierStandard || got.ClaimedTTFTP99Ms == nil || *got.ClaimedTTFTP99Ms != 300 {
		t.Fatalf("the refused edit changed the rig: %+v, %v", got, err)
	}
	// At batch's prices the edit goes through.
	up, err := s.Update(ctx, p, o.ID, rig("m", 80_000, nil))
	if err != nil || up.Tier != TierBatch || up.AskInput != 80_000 || up.AskOutput != 160_000 {
		t.Fatalf("Update = %+v, %v", up, err)
	}
}

// TestATierWithNoPriceTakesNoListing: without a price nobody could be paid for the rig's traffic.
func TestATierWithNoPriceTakesNoListing(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	if _, err := s.pool.Exec(ctx, `DELETE FROM prices WHERE tier = 'batch'`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Create(ctx, newAccount("Fjord"), rig("m", 10_000, nil))
	if fe := fields(t, err); fe[FieldAskInput] != "The batch tier has no price yet, so no rig in it can be paid; list it once the platform has priced the tier." {
		t.Fatalf("field errors %q", fe)
	}
}

// TestAPriceCutTakesAnOfferingOutOfTheCatalog: a listing within its tier's price when it was saved is
// left above it by a price change: the public catalog no longer shows it, routing's list still holds
// it (routing applies the price itself), and its provider is told why.
func TestAPriceCutTakesAnOfferingOutOfTheCatalog(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	p := newAccount("Fjord")
	dear, err := s.Create(ctx, p, rig("m", 140_000, f(300))) // $0.14 and $0.28
	if err != nil {
		t.Fatal(err)
	}
	cheap, err := s.Create(ctx, p, rig("m", 100_000, f(300)))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Offering{dear, cheap} {
		if err := s.MarkQualified(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
	}
	listedIDs := func() []string {
		l, err := s.List(ctx, ListInput{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range l {
			out = append(out, o.ID)
		}
		return out
	}
	if got := listedIDs(); len(got) != 2 || got[0] != cheap.ID {
		t.Fatalf("listed %v before the change", got)
	}
	// From now on, standard is $0.12 in and $0.25 out.
	fixtures.Price(t, s.pool, "standard", s.now(), 120000, 250000, fixtures.PriceCreatedAt(s.now()))
	if got := listedIDs(); len(got) != 1 || got[0] != cheap.ID {
		t.Fatalf("listed %v after the change; want only the offering within the new price", got)
	}
	if models, err := s.Models(ctx); err != nil || len(models) != 1 || models[0] != "m" {
		t.Fatalf("Models = %v, %v", models, err)
	}
	active, err := s.ListActive(ctx)
	if err != nil || len(active) != 2 {
		t.Fatalf("ListActive = %d offerings, %v; want both", len(active), err)
	}
	prices, err := s.CurrentPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own, err := s.Own(ctx, p, dear.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "Not routed and not in the public catalog. " +
		"Your ask for input tokens, $0.14 per million, is above the standard tier's price of $0.12: customers would pay less than you are paid. Ask at most $0.12. " +
		"Your ask for output tokens, $0.28 per million, is above the standard tier's price of $0.25: customers would pay less than you are paid. Ask at most $0.25."
	if got := own.NotRoutedBecause(prices); got != want || own.Priced(prices) {
		t.Fatalf("NotRoutedBecause = %q\nwant %q", got, want)
	}
	if got := cheap.NotRoutedBecause(prices); got != "" || !cheap.Priced(prices) {
		t.Fatalf("the offering within the price: %q", got)
	}
}

func TestPriceCoversBothKindsOfToken(t *testing.T) {
	t.Parallel()
	p := Price{Input: 150_000, Output: 300_000}
	cases := []struct {
		in, out money.MicroUSD
		want    bool
	}{{150_000, 300_000, true}, {1, 1, true}, {150_001, 1, false}, {1, 300_001, false}, {200_000, 250_000, false}}
	for _, c := range cases {
		if got := p.Covers(c.in, c.out); got != c.want {
			t.Errorf("Covers(%d, %d) = %v, want %v", c.in, c.out, got, c.want)
		}
	}
}

func TestBlendedAskIsRoundedUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, out, want money.MicroUSD }{{100_000, 200_000, 150_000}, {60_000, 120_001, 90_001}, {1, 1, 1}, {1, 2, 2}} {
		if got := (Offering{AskInput: c.in, AskOutput: c.out}).BlendedAsk(); got != c.want {
			t.Errorf("BlendedAsk(%d, %d) = %d, want %d", c.in, c.out, got, c.want)
		}
	}
}

func TestPriceBookAtAnInstant(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	book := PriceBook{TierStandard: {{ID: 1, Tier: TierStandard, Input: 150_000, EffectiveFrom: day(1)},
		{ID: 7, Tier: TierStandard, Input: 120_000, EffectiveFrom: day(15)}}}
	cases := []struct {
		at     time.Time
		tier   Tier
		wantID int64
	}{{day(1).Add(-time.Nanosecond), TierStandard, 0}, {day(1), TierStandard, 1}, {day(15).Add(-time.Nanosecond), TierStandard, 1},
		{day(15), TierStandard, 7}, {day(30), TierStandard, 7}, {day(30), TierBatch, 0}}
	for _, c := range cases {
		p, ok := book.At(c.tier, "", c.at)
		if p.ID != c.wantID || ok != (c.wantID != 0) {
			t.Errorf("At(%s, %s) = %d, %v; want %d", c.tier, c.at, p.ID, ok, c.wantID)
		}
	}
}

// TestPriceBookHoldsScheduledRows: the rows not yet in force are in the book too, with their ids.
func TestPriceBookHoldsScheduledRows(t *testing.T) {
	t.Parallel()
	s, ctx, _ := setup(t)
	id := fixtures.Price(t, s.pool, "standard", s.now().Add(time.Hour), 1, 2, fixtures.PriceCreatedAt(s.now()))
	book, err := s.PriceBook(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := book.At(TierStandard, "", s.now())
	later, _ := book.At(TierStandard, "", s.now().Add(time.Hour))
	current, _ := s.CurrentPrices(ctx)
	if len(book[TierStandard]) != 2 || now.Input != 150_000 || now.ID != current[TierStandard].ID || later.ID != id || later.Output != 2 {
		t.Fatalf("book %+v", book)
	}
}
