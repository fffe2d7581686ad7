package admission_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// budgetShop is an account with $100 of credit, two people and a key each, and an admission on
// the test's clock.
type budgetShop struct {
	shop
	a              *admission.Admission
	alice, bob     string // users
	aliceK, bobKey string // their keys
}

// standardPrices are the standard tier's $0.15 and $0.30 per million input and output tokens.
var standardPrices = fixedPrices{catalog.TierStandard: {Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}}

func setupBudgetShop(t *testing.T) budgetShop {
	t.Helper()
	s := setupShop(t)
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")
	if _, err := s.credits.Adjust(context.Background(), credits.AdjustInput{AccountID: s.org, Amount: 100 * money.PicoPerUSD,
		Reason: "credit", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	b := budgetShop{shop: s, alice: newUser(t, s.pool, s.org, "alice@acme.test"), bob: newUser(t, s.pool, s.org, "bob@acme.test")}
	b.aliceK = fixtures.APIKey(t, s.pool, s.org, b.alice, "alice's")
	b.bobKey = fixtures.APIKey(t, s.pool, s.org, b.bob, "bob's")
	b.a = newAdmission(admission.AdmissionConfig{Pool: s.pool, Now: s.clock.Now, BalanceTTL: time.Hour, Prices: standardPrices})
	t.Cleanup(b.a.Close)
	return b
}

// spend records what the meter would have billed a key on a day, in both of its sums.
func (b budgetShop) spend(t *testing.T, key string, day time.Time, amount money.Pico) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico) VALUES ($1, $2::date, 1, $3)
		ON CONFLICT (api_key_id, day) DO UPDATE SET charge_pico = api_key_spend_days.charge_pico + EXCLUDED.charge_pico`,
		key, day.Format("2006-01-02"), int64(amount)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico) VALUES ($1, $2, 1, $3)
		ON CONFLICT (api_key_id, month) DO UPDATE SET charge_pico = api_key_spend.charge_pico + EXCLUDED.charge_pico`,
		key, periods.Month.Start(day), int64(amount)); err != nil {
		t.Fatal(err)
	}
}

func (b budgetShop) admit(key, by string, limit *money.Pico, p periods.Period) error {
	r, err := b.a.Admit(context.Background(), admission.AdmitInput{AccountID: b.org, APIKeyID: key, KeyLimit: limit, KeyPeriod: p, CreatedBy: by,
		Tier: catalog.TierStandard, MaxInputTokens: 100, MaxOutputTokens: 16})
	if err == nil {
		r.Settle(admission.Settlement{})
	}
	return err
}

// A daily limit reached at 23:59 UTC admits again at 00:00 UTC; a weekly one on Monday; a monthly
// one on the first. The refusal names the limit and the reset.
func TestKeyLimitsResetWithTheirPeriod(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p      periods.Period
		now    time.Time // when the limit is spent
		before time.Time // a moment later, still in the period
		after  time.Time // the next period's first moment
		resets string
	}{
		{periods.Day, time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 14, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC), "00:00 UTC on Sunday 15 March 2026"},
		{periods.Week, time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 15, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC), "00:00 UTC on Monday 16 March 2026"},
		{periods.Month, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), "00:00 UTC on Wednesday 1 April 2026"},
	} {
		t.Run(string(c.p), func(t *testing.T) {
			t.Parallel()
			b := setupBudgetShop(t)
			b.clock.now = c.now
			limit := money.PicoPerUSD
			b.spend(t, b.aliceK, c.now, limit)
			b.clock.now = c.before
			err := b.admit(b.aliceK, b.alice, &limit, c.p)
			var se *services.Error
			if !errors.Is(err, admission.ErrKeyLimitReached) || !errors.As(err, &se) || !strings.Contains(se.Message, c.resets) ||
				!strings.Contains(se.Message, c.p.Adjective()) {
				t.Fatalf("at %s: %v; want the %s limit refused until %s", c.before, err, c.p, c.resets)
			}
			b.clock.now = c.after
			if err := b.admit(b.aliceK, b.alice, &limit, c.p); err != nil {
				t.Fatalf("at %s, the next period: %v; want admitted", c.after, err)
			}
		})
	}
}

// A member limit holds the keys the person created together, and no one else's; the account's
// budget holds every key.
func TestMemberLimitAndAccountBudgetRefuse(t *testing.T) {
	t.Parallel()
	b := setupBudgetShop(t)
	ctx := context.Background()
	now := b.clock.Now()
	aliceSecond := fixtures.APIKey(t, b.pool, b.org, b.alice, "alice's second")
	if _, err := b.pool.Exec(ctx, `INSERT INTO member_limits (account_id, user_id, limit_pico, period, updated_at)
		VALUES ($1, $2, $3, 'day', $4)`, b.org, b.alice, int64(2*money.PicoPerUSD), now); err != nil {
		t.Fatal(err)
	}
	b.spend(t, b.aliceK, now, money.PicoPerUSD)
	if err := b.admit(aliceSecond, b.alice, nil, ""); err != nil {
		t.Fatalf("alice under her $2 daily limit: %v", err)
	}
	b.spend(t, aliceSecond, now, money.PicoPerUSD)
	b.clock.Advance(time.Hour) // the figures are reread once stale
	b.a = newAdmission(admission.AdmissionConfig{Pool: b.pool, Now: b.clock.Now, Prices: standardPrices})
	err := b.admit(aliceSecond, b.alice, nil, "")
	var se *services.Error
	if !errors.Is(err, admission.ErrMemberLimitReached) || !errors.As(err, &se) || !strings.Contains(se.Message, "daily spending limit of $2.00") {
		t.Fatalf("alice at her limit over two keys: %v; want ErrMemberLimitReached", err)
	}
	if err := b.admit(b.bobKey, b.bob, nil, ""); err != nil {
		t.Fatalf("bob under no limit of his own: %v", err)
	}

	if _, err := b.pool.Exec(ctx, `INSERT INTO account_budgets (account_id, limit_pico, updated_at) VALUES ($1, $2, $3)`,
		b.org, int64(3*money.PicoPerUSD), now); err != nil {
		t.Fatal(err)
	}
	b.spend(t, b.bobKey, now, money.PicoPerUSD)
	b.a = newAdmission(admission.AdmissionConfig{Pool: b.pool, Now: b.clock.Now, Prices: standardPrices})
	err = b.admit(b.bobKey, b.bob, nil, "")
	if !errors.Is(err, admission.ErrAccountBudgetReached) || !errors.As(err, &se) || !strings.Contains(se.Message, "monthly budget of $3.00") ||
		!strings.Contains(se.Message, "1 April 2026") {
		t.Fatalf("bob with the account at its $3 budget: %v; want ErrAccountBudgetReached", err)
	}
}

// Requests in flight count against a member limit: a burst on two of the person's keys stops
// within one request's bound of it.
func TestMemberLimitHoldsRequestsInFlight(t *testing.T) {
	t.Parallel()
	b := setupBudgetShop(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `INSERT INTO member_limits (account_id, user_id, limit_pico, period, updated_at)
		VALUES ($1, $2, $3, 'week', $4)`, b.org, b.alice, int64(money.PicoPerUSD/100), b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	second := fixtures.APIKey(t, b.pool, b.org, b.alice, "alice's second")
	var admitted []*admission.Reservation
	var held money.Pico
	for i := range 100 {
		key := b.aliceK
		if i%2 == 1 {
			key = second
		}
		r, err := b.a.Admit(ctx, admission.AdmitInput{AccountID: b.org, APIKeyID: key, CreatedBy: b.alice, Tier: catalog.TierStandard,
			MaxInputTokens: 10_000, MaxOutputTokens: 1_000})
		if errors.Is(err, admission.ErrMemberLimitReached) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		admitted = append(admitted, r)
		held += r.Amount()
	}
	bound := admitted[0].Amount()
	if held < money.PicoPerUSD/100 || held >= money.PicoPerUSD/100+bound {
		t.Fatalf("held %s over %d requests; want at least the $0.01 limit and less than it plus one request's %s", held, len(admitted), bound)
	}
}
