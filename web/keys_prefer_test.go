package web_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/services/demo"
)

// A key can ask for carbon-aware routing; the gateway reads it from the key (KeyBySecret).
func TestAPIKeyPrefersCarbon(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dev := e.token(t, "developer@example.com", demo.Password)
	var green, plain struct {
		ID, Key, Prefer string
	}
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "green", "prefer": "carbon"}, &green), http.StatusCreated)
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "plain"}, &plain), http.StatusCreated)
	if green.Prefer != "carbon" || plain.Prefer != "price" {
		t.Fatalf("prefer %q and %q, want carbon and price", green.Prefer, plain.Prefer)
	}
	for secret, want := range map[string]bool{green.Key: true, plain.Key: false} {
		if k, err := e.accounts.KeyBySecret(context.Background(), secret); err != nil || k.PreferCarbon != want {
			t.Errorf("KeyBySecret = %+v, %v; want prefer carbon %v", k, err, want)
		}
	}
	var out apiErrorJSON
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "fast", "prefer": "speed"}, &out), http.StatusUnprocessableEntity)
	wantFields(t, out, "prefer")
}
