package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
)

// GPUMARKET_ROLES takes web, gateway and meter in any combination, any order, with spaces
// around them; anything else is refused, naming the role.
func TestRolesParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Roles
	}{
		{"", Roles{Web: true, Gateway: true, Meter: true}},
		{"  ", Roles{Web: true, Gateway: true, Meter: true}},
		{"web", Roles{Web: true}},
		{"gateway", Roles{Gateway: true}},
		{"meter", Roles{Meter: true}},
		{"web,gateway", Roles{Web: true, Gateway: true}},
		{"gateway,web", Roles{Web: true, Gateway: true}},
		{" gateway , meter ", Roles{Gateway: true, Meter: true}},
		{"web,meter", Roles{Web: true, Meter: true}},
		{"Web,GATEWAY", Roles{Web: true, Gateway: true}},
		{"meter,gateway,web", Roles{Web: true, Gateway: true, Meter: true}},
		{"web,web", Roles{Web: true}},
	} {
		got, err := parseRoles(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseRoles(%q) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"api", "web,", "web;gateway", "web gateway", "gateways"} {
		if _, err := parseRoles(bad); err == nil || !strings.Contains(err.Error(), "GPUMARKET_ROLES") {
			t.Errorf("parseRoles(%q): %v; want an error naming GPUMARKET_ROLES", bad, err)
		}
	}
	if s := (Roles{Web: true, Gateway: true, Meter: true}).String(); s != "web,gateway,meter" {
		t.Errorf("the roles read %q", s)
	}
}

// roleCall is one request to a platform process and what it must answer.
type roleCall struct {
	method, path, bearer string
	want                 int
	code                 string // the OpenAI error code of a /v1 refusal; "" to not check
}

func (c roleCall) check(t *testing.T, base string) {
	t.Helper()
	var body io.Reader
	if c.method == http.MethodPost {
		body = strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	}
	req, err := http.NewRequest(c.method, base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != c.want {
		t.Errorf("%s %s: %d, want %d: %.300s", c.method, c.path, res.StatusCode, c.want, raw)
		return
	}
	if c.code != "" {
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == nil || *e.Error.Code != c.code || e.Error.Message == "" {
			t.Errorf("%s %s: %s; want OpenAI's error shape with code %s", c.method, c.path, raw, c.code)
		}
	}
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, body := httpGet(t, base+"/readyz", "")
		if st == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %s", st, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Each role alone: web serves the pages and the API and answers /v1 that the gateway does not
// run there; the gateway serves /v1, with the batch scheduler, and nothing of the pages; the
// meter serves neither. Every one serves /healthz and /readyz.
func TestEachRoleAlone(t *testing.T) {
	t.Parallel()
	t.Run("web", func(t *testing.T) {
		t.Parallel()
		p := runPlatform(t, testConfig(t, Roles{Web: true}))
		if err := p.Seed(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p.gateway != nil || p.router != nil || p.batchScheduler != nil || p.meter != nil {
			t.Errorf("the web role alone runs the gateway %v, routing %v, the batch scheduler %v or the meter %v",
				p.gateway != nil, p.router != nil, p.batchScheduler != nil, p.meter != nil)
		}
		base := p.URL()
		waitReady(t, base)
		for _, c := range []roleCall{
			{method: http.MethodGet, path: "/healthz", want: http.StatusOK},
			{method: http.MethodGet, path: "/", want: http.StatusOK},
			{method: http.MethodGet, path: "/catalog", want: http.StatusOK},
			{method: http.MethodGet, path: "/api/offerings", want: http.StatusOK},
			{method: http.MethodGet, path: "/api/me", want: http.StatusUnauthorized},
			{method: http.MethodPost, path: "/v1/chat/completions", bearer: "sk-anything", want: http.StatusServiceUnavailable,
				code: "gateway_not_running"},
			{method: http.MethodGet, path: "/v1/models", want: http.StatusServiceUnavailable, code: "gateway_not_running"},
			{method: http.MethodGet, path: "/v1", want: http.StatusServiceUnavailable, code: "gateway_not_running"},
			{method: http.MethodPost, path: "/v1/batches", want: http.StatusServiceUnavailable, code: "gateway_not_running"},
		} {
			c.check(t, base)
		}
	})
	t.Run("gateway", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig(t, Roles{Gateway: true})
		cfg.SessionKey, cfg.StripeWebhookSecrets = nil, nil // the web role's alone
		if err := cfg.requireServe(); err != nil {
			t.Fatalf("the gateway alone would not start without the web role's secrets: %v", err)
		}
		p := runPlatform(t, cfg)
		ctx := context.Background()
		if err := p.Seed(ctx); err != nil {
			t.Fatal(err)
		}
		if p.gateway == nil || p.router == nil || p.batchScheduler == nil || p.meter != nil {
			t.Errorf("the gateway role alone: gateway %v, routing %v, batch scheduler %v, meter %v; want all but the meter",
				p.gateway != nil, p.router != nil, p.batchScheduler != nil, p.meter != nil)
		}
		dev, err := p.accounts.UserByEmail(ctx, "developer@example.com")
		if err != nil {
			t.Fatal(err)
		}
		_, secret, err := p.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "roles"})
		if err != nil {
			t.Fatal(err)
		}
		base := p.URL()
		waitReady(t, base)
		for _, c := range []roleCall{
			{method: http.MethodGet, path: "/healthz", want: http.StatusOK},
			{method: http.MethodGet, path: "/v1/models", bearer: secret, want: http.StatusOK},
			{method: http.MethodGet, path: "/v1/models", want: http.StatusUnauthorized, code: "invalid_api_key"},
			{method: http.MethodPost, path: "/v1/chat/completions", bearer: "sk-not-a-key", want: http.StatusUnauthorized,
				code: "invalid_api_key"},
			{method: http.MethodPost, path: "/v1/chat/completions", bearer: secret, want: http.StatusNotFound,
				code: "model_not_found"},
			{method: http.MethodGet, path: "/v1/batches", bearer: secret, want: http.StatusOK},
			{method: http.MethodGet, path: "/v1/no-such-endpoint", bearer: secret, want: http.StatusNotFound, code: "unknown_url"},
			// Nothing of the web role: no pages, no API, no login.
			{method: http.MethodGet, path: "/", want: http.StatusNotFound},
			{method: http.MethodGet, path: "/login", want: http.StatusNotFound},
			{method: http.MethodGet, path: "/api/offerings", want: http.StatusNotFound},
			{method: http.MethodPost, path: "/api/auth/login", want: http.StatusNotFound},
		} {
			c.check(t, base)
		}
	})
	t.Run("meter", func(t *testing.T) {
		t.Parallel()
		p := runPlatform(t, testConfig(t, Roles{Meter: true}))
		if p.meter == nil || p.gateway != nil || p.router != nil || p.batchScheduler != nil {
			t.Errorf("the meter role alone: meter %v, gateway %v, routing %v, batch scheduler %v; want the meter only",
				p.meter != nil, p.gateway != nil, p.router != nil, p.batchScheduler != nil)
		}
		base := p.URL()
		waitReady(t, base)
		for _, c := range []roleCall{
			{method: http.MethodGet, path: "/healthz", want: http.StatusOK},
			{method: http.MethodGet, path: "/", want: http.StatusNotFound},
			{method: http.MethodGet, path: "/api/offerings", want: http.StatusNotFound},
			{method: http.MethodGet, path: "/v1/models", want: http.StatusServiceUnavailable, code: "gateway_not_running"},
		} {
			c.check(t, base)
		}
	})
}
