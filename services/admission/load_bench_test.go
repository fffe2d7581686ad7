package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// BenchmarkAdmitReadingFigures is admission on the request path when it must read an account's
// figures (a new day, stale figures): one batch, in one round trip, for the balance, the holds
// and the limited key's spend.
func BenchmarkAdmitReadingFigures(b *testing.B) {
	s := setupShopB(b)
	ctx := context.Background()
	dev := fixtures.User(b, s.pool, s.org, "dev@acme.test", "developer")
	key := fixtures.APIKey(b, s.pool, s.org, dev, "ci")
	a := newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now,
		Prices: fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}})
	defer a.Close()
	limit := 1000 * money.PicoPerUSD
	in := benchInput(s.org, key, dev, &limit)
	b.ResetTimer()
	for range b.N {
		s.clock.Advance(admission.MaxStale + time.Second)
		r, err := a.Admit(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		r.Settle(admission.Settlement{})
	}
}

func setupShopB(b *testing.B) shop {
	b.Helper()
	pool := dbtest.New(b)
	clk := &clock{now: testNow}
	s := shop{credits: credits.NewCredits(pool, ledger.NewLedger(pool, clk.Now), nil, clk.Now), pool: pool, clock: clk,
		org: newOrg(b, pool, "Acme Labs")}
	finance := fixtures.User(b, pool, newOrg(b, pool, "gpumarket"), "finance@gpumarket.test", "finance")
	if _, err := s.credits.Adjust(context.Background(), credits.AdjustInput{AccountID: s.org, Amount: 100 * money.PicoPerUSD,
		Reason: "credit", ByUserID: finance}); err != nil {
		b.Fatal(err)
	}
	return s
}

func benchInput(org, key, dev string, limit *money.Pico) admission.AdmitInput {
	return admission.AdmitInput{AccountID: org, APIKeyID: key, KeyLimit: limit, CreatedBy: dev, Tier: catalog.TierStandard,
		MaxInputTokens: 100, MaxOutputTokens: 16}
}
