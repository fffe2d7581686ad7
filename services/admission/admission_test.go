package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/money"
)

// fixedPrices is a price book that never changes.
type fixedPrices map[catalog.Tier]catalog.Price

func (p fixedPrices) CurrentPrices(context.Context) (map[catalog.Tier]catalog.Price, error) {
	return p, nil
}

// Credits bought a moment ago let the very next request through: figures that would refuse
// a request are read again first (when they are not brand new), rather than refusing until
// the background refresh has run.
func TestAdmissionRereadsFiguresBeforeRefusing(t *testing.T) {
	t.Parallel()
	s := setupShop(t)
	ctx := context.Background()
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")
	a := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now, BalanceTTL: time.Minute,
		Prices: fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}})
	in := admission.AdmitInput{AccountID: s.org, APIKeyID: "key-1", Tier: catalog.TierStandard, MaxInputTokens: 100, MaxOutputTokens: 16}

	if _, err := a.Admit(ctx, in); !errors.Is(err, admission.ErrCreditSpent) {
		t.Fatalf("Admit with no credit = %v, want ErrCreditSpent", err)
	}
	if _, err := s.credits.Adjust(ctx, credits.AdjustInput{AccountID: s.org, Amount: 5 * money.PicoPerUSD, Reason: "welcome credit", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	// Within the same instant the figures are not read again: a client looping on a spent
	// balance does not cost a read per request.
	if _, err := a.Admit(ctx, in); !errors.Is(err, admission.ErrCreditSpent) {
		t.Fatalf("Admit again at once = %v, want ErrCreditSpent from the figures just read", err)
	}
	s.clock.Advance(300 * time.Millisecond)
	r, err := a.Admit(ctx, in)
	if err != nil {
		t.Fatalf("Admit after the credit, long before the figures' TTL = %v, want admitted", err)
	}
	r.Settle(admission.Settlement{})
}

// Balances past the range of money.Pico decide admission as any balance beyond the bound
// does: one at minus $20 million refuses, one at plus $20 million admits, and neither fails.
func TestAdmissionReadsBalancesPastTheRangeOfPico(t *testing.T) {
	t.Parallel()
	s := setupShop(t)
	ctx := context.Background()
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")
	rich := newOrg(t, s.pool, "Rich")
	a := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now, BalanceTTL: time.Minute,
		Prices: fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}})
	five := 5_000_000 * money.PicoPerUSD
	for range 4 {
		for _, adj := range []credits.AdjustInput{{AccountID: s.org, Amount: -five}, {AccountID: rich, Amount: five}} {
			adj.Reason, adj.ByUserID = "test", finance
			if _, err := s.credits.Adjust(ctx, adj); err != nil {
				t.Fatal(err)
			}
		}
	}
	if b, err := s.credits.Balance(ctx, s.org); err != nil || b.USD != "-20000000.00" || !b.Negative {
		t.Fatalf("Balance = %+v, %v; want -20000000.00", b, err)
	}
	in := admission.AdmitInput{AccountID: s.org, APIKeyID: "key-1", Tier: catalog.TierStandard, MaxInputTokens: 100, MaxOutputTokens: 16}
	if _, err := a.Admit(ctx, in); !errors.Is(err, admission.ErrCreditSpent) {
		t.Fatalf("Admit at -$20M = %v, want ErrCreditSpent", err)
	}
	in.AccountID = rich
	r, err := a.Admit(ctx, in)
	if err != nil {
		t.Fatalf("Admit at +$20M = %v, want admitted", err)
	}
	r.Settle(admission.Settlement{})
}

// Close waits for the figures being reread in the background, and no reread starts after it: a request then
// rereads on its own path once the figures are stale.
func TestAdmissionCloseWaitsForItsRereads(t *testing.T) {
	t.Parallel()
	s := setupShop(t)
	ctx := context.Background()
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")
	if _, err := s.credits.Adjust(ctx, credits.AdjustInput{AccountID: s.org, Amount: 5 * money.PicoPerUSD, Reason: "welcome credit", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	a := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now, BalanceTTL: time.Second,
		Prices: fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}})
	in := admission.AdmitInput{AccountID: s.org, APIKeyID: "key-1", Tier: catalog.TierStandard, MaxInputTokens: 100, MaxOutputTokens: 16}
	refreshing := func() bool { return a.Refreshing(s.org) }
	admit := func() {
		t.Helper()
		r, err := a.Admit(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(admission.Settlement{})
	}
	admit()
	s.clock.Advance(2 * time.Second)
	admit() // past BalanceTTL: a reread starts in the background
	if !refreshing() {
		t.Fatal("no reread started in the background")
	}
	a.Close()
	if refreshing() {
		t.Fatal("Close returned while a reread was under way")
	}
	s.clock.Advance(2 * time.Second)
	admit()
	if refreshing() {
		t.Fatal("a reread started in the background after Close")
	}
	s.clock.Advance(admission.MaxStale + time.Second)
	admit() // stale: read on the request path
}

// A request reserves its route ticket's bound, and its answer leaves held the bound on what was
// relayed, whatever usage the answer claimed: kept in the process until the gateway's record
// carries it to admission_holds, where every replica reads it, until the meter bills it.
func TestAdmissionHoldsTheBoundNotTheClaim(t *testing.T) {
	t.Parallel()
	s := setupShop(t)
	ctx := context.Background()
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")
	// $0.03 of credit; $0.15 and $0.30 per million input and output tokens.
	if _, err := s.credits.Adjust(ctx, credits.AdjustInput{AccountID: s.org, Amount: 3 * money.PicoPerCent, Reason: "welcome credit", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	prices := fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}
	a := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now, Prices: prices})
	replica := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now, Prices: prices})
	in := admission.AdmitInput{AccountID: s.org, APIKeyID: "key-1", Tier: catalog.TierStandard, MaxInputTokens: 712, MaxOutputTokens: 131_072}

	r, err := a.Admit(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Amount() != 712*150_000+131_072*300_000 { // $0.0394284
		t.Fatalf("reservation %d; want the ticket's bound", r.Amount())
	}
	hold := r.Settle(admission.SettlementOf(admission.Ending{RequestID: "req_1", Answered: true, HTTPStatus: 200, RelayedBytes: 60_000, RelayedChunks: 600}))
	if hold.Amount != 712*150_000+60_608*300_000 { // $0.0182892
		t.Fatalf("hold %d; want the bound on 60,000 bytes in 600 chunks", hold.Amount)
	}
	if want := s.clock.Now().Add(admission.DefaultHoldFor); !hold.Until.Equal(want) || admission.DefaultHoldFor < 8*24*time.Hour {
		t.Errorf("held until %s; want %s, past the meter's last day for the request", hold.Until, want)
	}
	if again := r.Settle(admission.SettlementOf(admission.Ending{RequestID: "req_1", Answered: true, HTTPStatus: 200})); again != (admission.Hold{}) {
		t.Errorf("settled twice: %+v", again)
	}
	// $0.03 - $0.0182892 leaves room for one more request here; after it, none.
	r2, err := a.Admit(ctx, in)
	if err != nil {
		t.Fatalf("second request: %v", err)
	}
	r2.Settle(admission.SettlementOf(admission.Ending{RequestID: "req_2", Answered: true, HTTPStatus: 200, RelayedBytes: 60_000, RelayedChunks: 600}))
	s.clock.Advance(time.Second)
	if _, err := a.Admit(ctx, in); !errors.Is(err, admission.ErrCreditSpent) {
		t.Fatalf("third request with $0.0365784 held of $0.03: %v; want ErrCreditSpent", err)
	}
	// The other replica reads the holds the records carried to PostgreSQL.
	if _, err := s.pool.Exec(ctx, `INSERT INTO admission_holds (request_id, account_id, api_key_id, amount_pico, held_at, expires_at)
		VALUES ('req_1', $1, 'key-1', $2, $3, $4), ('req_2', $1, 'key-1', $2, $3, $4)`,
		s.org, int64(hold.Amount), s.clock.Now(), hold.Until); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Admit(ctx, in); !errors.Is(err, admission.ErrCreditSpent) {
		t.Fatalf("another replica: %v; want ErrCreditSpent from the recorded holds", err)
	}
	// Recorded, they leave the process's own keeping and are counted once: still refused.
	s.clock.Advance(admission.MaxStale + time.Second)
	if _, err := a.Admit(ctx, in); !errors.Is(err, admission.ErrCreditSpent) {
		t.Fatalf("once recorded: %v; want ErrCreditSpent", err)
	}
	// A hold past its expiry, when the meter bills the request no more, counts for nothing.
	s.clock.Advance(admission.DefaultHoldFor)
	r3, err := replica.Admit(ctx, in)
	if err != nil {
		t.Fatalf("after the holds expired: %v", err)
	}
	r3.Settle(admission.Settlement{})
}

// A request routed at its model's own price is held at that price, not at its tier's default: the 70B model's
// $0.90 and $1.80 per million input and output tokens against standard's $0.15 and $0.30.
func TestAdmissionHoldsAtTheModelsPrice(t *testing.T) {
	t.Parallel()
	s := setupShop(t)
	ctx := context.Background()
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")
	if _, err := s.credits.Adjust(ctx, credits.AdjustInput{AccountID: s.org, Amount: money.PicoPerUSD, Reason: "welcome credit", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	a := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now,
		Prices: fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}})
	in := admission.AdmitInput{AccountID: s.org, APIKeyID: "key-1", Tier: catalog.TierStandard, MaxInputTokens: 1000, MaxOutputTokens: 500,
		Price: &catalog.Price{ID: 9, Tier: catalog.TierStandard, Model: "meta-llama/Meta-Llama-3-70B-Instruct", Input: 900_000, Output: 1_800_000}}
	r, err := a.Admit(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Amount() != 1000*900_000+500*1_800_000 {
		t.Fatalf("reservation %d; want the bound at the model's price", r.Amount())
	}
	r.Settle(admission.Settlement{})
	in.Price = nil
	r, err = a.Admit(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Amount() != 1000*150_000+500*300_000 {
		t.Fatalf("reservation %d; want the bound at the tier's default", r.Amount())
	}
	r.Settle(admission.Settlement{})
}
