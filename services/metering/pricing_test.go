package metering

import (
	"errors"
	"math"
	"testing"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
)

func TestTermsCharges(t *testing.T) {
	standard := priceRow{id: 1, tier: "standard", input: 150_000, outp: 300_000}
	gen := terms{price: standard, askIn: 60_000, askOut: 120_000}
	emb := terms{price: standard, askIn: 60_000, askOut: 120_000, kind: ticket.KindEmbedding, embeddingValid: true}
	cases := []struct {
		name            string
		t               terms
		in, out         int64
		charge, payable money.Pico
		overflow        bool
	}{
		{"input and output at their own prices and asks", gen, 1000, 500, 300_000_000, 120_000_000, false},
		{"a generation without output costs nothing", gen, 2000, 0, 0, 0, false},
		{"an embedding is charged its input", emb, 4000, 7, 600_000_000, 240_000_000, false},
		{"a failed embedding costs nothing", terms{price: standard, kind: ticket.KindEmbedding}, 4000, 0, 0, 0, false},
		{"ten million tokens each way at $1,000,000 per million overflow one charge",
			terms{price: priceRow{input: 1_000_000_000_000, outp: 1_000_000_000_000}}, 10_000_000, 10_000_000, 0, 0, true},
	}
	for _, c := range cases {
		charge, payable, err := c.t.charges(c.in, 0, c.out)
		if c.overflow {
			if !errors.Is(err, money.ErrOverflow) {
				t.Errorf("%s: %s, %s, %v; want ErrOverflow", c.name, charge, payable, err)
			}
			continue
		}
		if err != nil || charge != c.charge || payable != c.payable {
			t.Errorf("%s: charged %s, payable %s, %v; want %s and %s", c.name, charge, payable, err, c.charge, c.payable)
		}
	}
}

func TestKeepFlag(t *testing.T) {
	cases := []struct {
		flag             Flag
		reported, billed money.Pico
		overflow         bool
		want             bool
	}{
		{"", 100, 10, false, false},
		{FlagClipped, 100, 10, false, true},
		{FlagClipped, 10, 10, false, false}, // an embedding's output tokens, which cost nothing
		{FlagClipped, 0, 0, true, true},     // a report too large to price
		{FlagFailedAttempt, 100, 0, false, true},
		{FlagFailedAttempt, 0, 0, false, false}, // a failed attempt reported as such
		{FlagIncomplete, 50, 50, false, true},
		{FlagIncomplete, 0, 0, false, false},
		{FlagNoGatewayRecord, 50, 50, false, true},
		{FlagNoGatewayRecord, 0, 0, false, false},
	}
	for _, c := range cases {
		if got := keepFlag(c.flag, c.reported, c.overflow, c.billed); got != c.want {
			t.Errorf("keepFlag(%q, reported %s, overflow %v, billed %s) = %v", c.flag, c.reported, c.overflow, c.billed, got)
		}
	}
}

// A batch's sums stay within a ledger posting: the event that would take one past it is
// refused and leaves the sums as they were; the next event that fits is admitted.
func TestBatchSumsAdmit(t *testing.T) {
	s := batchSums{}
	big := money.Pico(4_000_000_000_000_000_000) // $4 million
	for i := range 2 {
		if err := s.admit("acme", "fjord", big, big/2); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := s.admit("acme", "fjord", big, big/2); !errors.Is(err, money.ErrOverflow) {
		t.Fatalf("third $4M charge to one account: %v, want ErrOverflow", err)
	}
	if s["acme"].charge != 2*big || s["acme"].providers["fjord"] != big {
		t.Errorf("sums after the refusal: %s, %s", s["acme"].charge, s["acme"].providers["fjord"])
	}
	if err := s.admit("acme", "fjord", math.MaxInt64-2*big, 0); err != nil {
		t.Errorf("the charge that fills the sum exactly: %v", err)
	}
	if err := s.admit("globex", "fjord", big, big); err != nil {
		t.Errorf("another account's sums are its own: %v", err)
	}
	// A provider's payables overflow on their own.
	p := batchSums{}
	if err := p.admit("acme", "fjord", 0, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if err := p.admit("acme", "fjord", 0, 1); !errors.Is(err, money.ErrOverflow) {
		t.Errorf("payable past the range: %v", err)
	}
	if err := p.admit("acme", "north", 0, 1); err != nil {
		t.Errorf("another provider's payable: %v", err)
	}
}

// Cached input tokens at the cached price, and at the input ask scaled by the cached price's
// ratio to the input price, rounded down: $0.070001 x 33,333 / 100,000 is $0.023333 per million.
func TestTermsChargeCachedInput(t *testing.T) {
	p := priceRow{id: 1, tier: "standard", input: 100_000, outp: 200_000, cached: 33_333}
	tm := newTerms(p, 70_001, 100_000, ticket.KindGeneration, false)
	if tm.askCached != 23_333 {
		t.Fatalf("cached ask %d, want 23333", tm.askCached)
	}
	charge, payable, err := tm.charges(1000, 999, 10)
	// 1 x 100,000 + 999 x 33,333 + 10 x 200,000 and 1 x 70,001 + 999 x 23,333 + 10 x 100,000 picodollars.
	if err != nil || charge != 35_399_667 || payable != 24_379_668 {
		t.Fatalf("charged %d, payable %d, %v; want 35399667 and 24379668", charge, payable, err)
	}
	// More cached than input is taken as all the input cached.
	if c, p, _ := tm.charges(10, 50, 1); c != 10*33_333+200_000 || p != 10*23_333+100_000 {
		t.Fatalf("50 cached of 10 input: charged %d, payable %d", c, p)
	}
	for _, c := range []struct {
		name  string
		askIn int64
		p     priceRow
		want  int64
	}{
		{"a quarter", 60_000, priceRow{input: 150_000, cached: 37_500}, 15_000},
		{"no discount", 60_000, priceRow{input: 150_000, cached: 150_000}, 60_000},
		{"free cached tokens", 60_000, priceRow{input: 150_000, cached: 0}, 0},
		{"a free input price: no ratio, no change to pay", 60_000, priceRow{input: 0, cached: 0}, 60_000},
		{"the largest asks and prices", math.MaxInt64, priceRow{input: math.MaxInt64, cached: math.MaxInt64 - 1}, math.MaxInt64 - 1},
	} {
		if got := cachedAsk(c.askIn, c.p); got != c.want {
			t.Errorf("%s: cached ask %d, want %d", c.name, got, c.want)
		}
	}
}
