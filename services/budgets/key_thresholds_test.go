package budgets

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

func TestValidateKeyThresholds(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want []int // nil: refused
	}{
		{nil, []int{50, 80, 100}},
		{[]int{80, 85, 95}, []int{80, 85, 95}},
		{[]int{95, 80, 85}, []int{80, 85, 95}},
		{[]int{1, 100}, []int{1, 100}},
		{[]int{10, 20, 30, 40, 50}, []int{10, 20, 30, 40, 50}},
		{[]int{0, 50}, nil},
		{[]int{50, 101}, nil},
		{[]int{80, 80, 95}, nil},
		{[]int{10, 20, 30, 40, 50, 60}, nil},
		{[]int{-5}, nil},
	} {
		got, err := ValidateKeyThresholds(tc.in)
		if tc.want == nil {
			var se *services.Error
			if !errors.As(err, &se) || se.Code != services.CodeInvalid || se.Fields["key_thresholds"] == "" {
				t.Errorf("%v: %v, %v; want refused beside key_thresholds", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// An account's own thresholds for its keys replace 50, 80 and 100 % in the alerts worker, each
// firing once in its period; a key with thresholds of its own keeps them, and another account
// keeps the default.
func TestAccountKeyThresholdsDriveTheAlerts(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(pool, acc, clock)
	limited := func(org, name string) string {
		dev := fixtures.User(t, pool, org, name+"@"+name+".test", "developer")
		key := fixtures.APIKey(t, pool, org, dev, name)
		if _, err := pool.Exec(ctx, `UPDATE api_keys SET limit_pico = $2, limit_period = 'day' WHERE id = $1`, key, int64(money.PicoPerUSD)); err != nil {
			t.Fatal(err)
		}
		return key
	}
	spendTo := func(key string, cents int64) {
		if _, err := pool.Exec(ctx, `INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico) VALUES ($1, $2::date, 1, $3)
			ON CONFLICT (api_key_id, day) DO UPDATE SET charge_pico = EXCLUDED.charge_pico`,
			key, now.Format("2006-01-02"), cents*int64(money.PicoPerCent)); err != nil {
			t.Fatal(err)
		}
	}
	acme := fixtures.Account(t, pool, "Acme")
	acmeKey := limited(acme, "acme")
	other := fixtures.Account(t, pool, "Other")
	otherKey := limited(other, "other")

	if got, err := svc.KeyThresholds(ctx, acme); err != nil || !slices.Equal(got, DefaultThresholds) {
		t.Fatalf("before any setting: %v, %v; want the default", got, err)
	}
	if err := svc.SetKeyThresholds(ctx, acme, []int{95, 80, 85}); err != nil {
		t.Fatal(err)
	}
	if got, _ := svc.KeyThresholds(ctx, acme); !slices.Equal(got, []int{80, 85, 95}) {
		t.Fatalf("stored %v, want 80, 85, 95", got)
	}
	if err := svc.SetKeyThresholds(ctx, acme, []int{80, 80}); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("repeated thresholds: %v, want invalid", err)
	}

	rec := &recorder{}
	a := NewAlerts(AlertsConfig{Pool: pool, Accounts: acc, Mail: rec, Events: rec, Now: clock})
	fired := func() []string {
		t.Helper()
		if _, err := a.Evaluate(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := pool.Query(ctx, `SELECT rule || '@' || threshold::text FROM alert_firings ORDER BY rule, threshold`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	spendTo(acmeKey, 60)
	spendTo(otherKey, 60)
	if got := fired(); !slices.Equal(got, []string{"key:" + otherKey + "@50"}) {
		t.Fatalf("at 60 %% fired %v; want only the other account's 50 %%", got)
	}
	spendTo(acmeKey, 90)
	if got := fired(); !slices.Contains(got, "key:"+acmeKey+"@80") || !slices.Contains(got, "key:"+acmeKey+"@85") ||
		slices.Contains(got, "key:"+acmeKey+"@50") || slices.Contains(got, "key:"+acmeKey+"@95") {
		t.Fatalf("at 90 %% fired %v; want Acme's 80 and 85 %%", got)
	}
	spendTo(acmeKey, 99)
	before := len(rec.events)
	fired()
	if got := fired(); len(rec.events) != before+1 || !slices.Contains(got, "key:"+acmeKey+"@95") {
		t.Fatalf("at 99 %%: %d new events, firings %v; want 95 %% once", len(rec.events)-before, got)
	}

	// A key's own row wins over its account's.
	if _, err := pool.Exec(ctx, `INSERT INTO alert_rules (account_id, kind, subject, thresholds, updated_at)
		VALUES ($1, 'key', $2, '{99}', now())`, acme, acmeKey); err != nil {
		t.Fatal(err)
	}
	if got := fired(); !slices.Contains(got, "key:"+acmeKey+"@99") {
		t.Fatalf("with the key's own 99 %%: %v", got)
	}
	// Back to the default: nothing stored for the account.
	if err := svc.SetKeyThresholds(ctx, acme, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := svc.KeyThresholds(ctx, acme); !slices.Equal(got, DefaultThresholds) {
		t.Fatalf("after clearing: %v", got)
	}
}
