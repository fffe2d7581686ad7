package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// A client written before limits had periods sends and reads monthly_limit_usd: it sets the
// same limit as limit_usd with limit_period month, and reads it back while the period is a
// month.
func TestAPIKeysMonthlyLimitAlias(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev := e.token(t, "developer@example.com", demo.Password)

	type oldKey struct {
		ID              string           `json:"id"`
		Key             string           `json:"key"`
		LimitUSD        *string          `json:"limit_usd"`
		LimitPeriod     string           `json:"limit_period"`
		MonthlyLimitUSD *json.RawMessage `json:"monthly_limit_usd"`
	}
	stored := func(secret string) (*money.Pico, periods.Period) {
		t.Helper()
		k, err := e.accounts.KeyBySecret(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		return k.Limit, k.LimitPeriod
	}
	var old, current oldKey
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "old client", "monthly_limit_usd": "25"}, &old),
		http.StatusCreated)
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys",
		map[string]any{"name": "new client", "limit_usd": "25", "limit_period": "month"}, &current), http.StatusCreated)
	oldLimit, oldPeriod := stored(old.Key)
	newLimit, newPeriod := stored(current.Key)
	if oldLimit == nil || newLimit == nil || *oldLimit != *newLimit || *oldLimit != 25*money.PicoPerUSD ||
		oldPeriod != periods.Month || newPeriod != periods.Month {
		t.Fatalf("monthly_limit_usd stored %v per %s; limit_usd %v per %s; want $25 per month both", oldLimit, oldPeriod, newLimit, newPeriod)
	}
	for _, k := range []oldKey{old, current} {
		if k.MonthlyLimitUSD == nil || string(*k.MonthlyLimitUSD) != `"25.00"` || k.LimitUSD == nil || *k.LimitUSD != "25.00" {
			t.Fatalf("key %s answers monthly_limit_usd %s, limit_usd %v; want both 25.00", k.ID, raw(k.MonthlyLimitUSD), k.LimitUSD)
		}
	}

	// PATCH with the old field, as a number; then null removes the limit, and the old field reads null.
	var got oldKey
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+old.ID, map[string]any{"monthly_limit_usd": 7.5}, &got), http.StatusOK)
	if l, p := stored(old.Key); l == nil || *l != 750*money.PicoPerCent || p != periods.Month || string(*got.MonthlyLimitUSD) != `"7.50"` {
		t.Fatalf("after PATCH monthly_limit_usd 7.5: stored %v per %s, answered %s", l, p, raw(got.MonthlyLimitUSD))
	}
	// A daily limit set by a new client leaves the old field out: it is no monthly limit.
	var rawAnswer map[string]json.RawMessage
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+old.ID, map[string]any{"limit_usd": "2", "limit_period": "day"}, &rawAnswer),
		http.StatusOK)
	if _, ok := rawAnswer["monthly_limit_usd"]; ok {
		t.Fatalf("a daily limit answers monthly_limit_usd %s", rawAnswer["monthly_limit_usd"])
	}
	list, _ := e.keys(t, dev)
	if list.Count != 2 {
		t.Fatalf("%d keys", list.Count)
	}
	// The old field sets a month again.
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+old.ID, map[string]any{"monthly_limit_usd": "3"}, &got), http.StatusOK)
	if l, p := stored(old.Key); l == nil || *l != 3*money.PicoPerUSD || p != periods.Month {
		t.Fatalf("monthly_limit_usd after a daily limit: %v per %s, want $3 per month", l, p)
	}
	rawAnswer = nil
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+old.ID, map[string]any{"monthly_limit_usd": nil}, &rawAnswer), http.StatusOK)
	if l, _ := stored(old.Key); l != nil || string(rawAnswer["monthly_limit_usd"]) != "null" {
		t.Fatalf("after null: stored %v, answered %s; want no limit and null", l, rawAnswer["monthly_limit_usd"])
	}

	// Both fields at once, or the old one with another period, are refused beside it.
	for name, body := range map[string]map[string]any{
		"both":           {"monthly_limit_usd": "5", "limit_usd": "5"},
		"another period": {"monthly_limit_usd": "5", "limit_period": "week"},
	} {
		var out apiErrorJSON
		res := e.call(t, dev, http.MethodPatch, "/api/keys/"+old.ID, body, &out)
		if res.StatusCode != http.StatusUnprocessableEntity || out.Error.Fields["monthly_limit_usd"] == "" {
			t.Errorf("%s: %d %+v, want 422 beside monthly_limit_usd", name, res.StatusCode, out.Error)
		}
	}
}

func raw(m *json.RawMessage) string {
	if m == nil {
		return "(absent)"
	}
	return string(*m)
}
