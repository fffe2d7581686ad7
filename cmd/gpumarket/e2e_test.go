package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// TestRequestsThroughASimulatedRigAreMeteredOnce is metering end to end: a developer buys
// credits, sends requests through the gateway to a simulated rig (gpuagent in front of
// simbackend), and finds each on the usage page once, with its cost, while the balance falls
// by exactly their sum.
func TestRequestsThroughASimulatedRigAreMeteredOnce(t *testing.T) {
	_, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0,
		Payments: PaymentsTest, StripeMockBin: stripemocktest.Bin(t),
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_e2e"},
		Roles: Roles{Web: true, Gateway: true, Meter: true}, TicketKey: []byte(strings.Repeat("t", 32)), RigKey: []byte(strings.Repeat("r", 32))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	// The demo's rigs, qualified as their probes would: how a rig qualifies is TestAListingEarnsItsPlace's.
	seeded, err := p.catalog.ListActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range seeded {
		if err := p.catalog.MarkQualified(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	api := &apiClient{t: t, base: p.URL()}
	token := api.login("developer@example.com")
	var me struct {
		AccountID string `json:"account_id"`
	}
	api.do(token, http.MethodGet, "/api/me", nil, &me, http.StatusOK)

	// $20 of credits, paid through the real webhook route with a signed event.
	var checkout struct {
		ID string `json:"id"`
	}
	api.do(token, http.MethodPost, "/api/credits/checkout", map[string]any{"amount_usd": "20"}, &checkout, http.StatusCreated)
	purchase, err := credits.NewCredits(p.pool, nil, nil, nil).Purchase(ctx, me.AccountID, checkout.ID)
	if err != nil {
		t.Fatal(err)
	}
	payload := credits.CheckoutEvent("evt_e2e_paid", "checkout.session.completed", purchase, "paid", "pi_e2e", time.Now())
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/webhooks/stripe", bytes.NewReader(payload))
	req.Header.Set("Stripe-Signature", credits.SignEvent(payload, "whsec_test_e2e", time.Now()))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %v %v", res, err)
	}
	startBalance := api.balance(token)
	if startBalance != 20*money.PicoPerUSD {
		t.Fatalf("balance after buying $20: %s", startBalance)
	}

	// One realtime demo offering, served by a simulated rig on a free port.
	var offerings struct {
		Offerings []struct {
			ID, GPU, Model    string
			ProviderAccountID string `json:"provider_account_id"`
			GPUCount          int    `json:"gpu_count"`
		} `json:"offerings"`
	}
	api.do("", http.MethodGet, "/api/offerings?tier=realtime&sort=latency", nil, &offerings, http.StatusOK)
	if len(offerings.Offerings) == 0 {
		t.Fatal("no realtime offering in the demo")
	}
	o := offerings.Offerings[0]
	profile, ok := simulation.Lookup(o.Model, o.GPU, o.GPUCount)
	if !ok {
		t.Fatalf("no profile for %s on %dx %s", o.Model, o.GPUCount, o.GPU)
	}
	rig, err := p.startRig(ctx, o.ID, o.ProviderAccountID, o.GPU, o.GPUCount, profile)
	if err != nil {
		t.Fatal(err)
	}
	defer rig.stop()
	if err := p.router.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, err := p.router.Pick(routing.Request{Model: o.Model, Tier: catalog.TierRealtime, Offering: o.ID}); err != nil; _, err = p.router.Pick(routing.Request{Model: o.Model, Tier: catalog.TierRealtime, Offering: o.ID}) {
		if time.Now().After(deadline) {
			t.Fatalf("the rig is not routable: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Requests through the gateway, pinned to that offering, with an API key made through the API.
	var key struct {
		Secret string `json:"key"`
	}
	api.do(token, http.MethodPost, "/api/keys", map[string]any{"name": "e2e"}, &key, http.StatusCreated)
	const n = 12
	sent := map[string]bool{}
	for i := range n {
		body := fmt.Sprintf(`{"model": %q, "max_tokens": 8, "stream": %t, "gpumarket": {"offering": %q},
			"messages": [{"role": "user", "content": "hello number %d"}]}`, o.Model+":realtime", i%2 == 0, o.ID, i)
		req, _ := http.NewRequest(http.MethodPost, p.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key.Secret)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("request %d through the gateway: %d", i, res.StatusCode)
		}
		sent[res.Header.Get("X-GPUMarket-Request-Id")] = true
	}
	// A request without a ticket is refused by the agent and never billed.
	res := callRig(t, p, o.ProviderAccountID, o.ID, "", `{"model": "x", "messages": []}`)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("request without a ticket: %d", res.StatusCode)
	}

	var usage struct {
		Requests []struct {
			RequestID    string     `json:"request_id"`
			Tier         string     `json:"tier"`
			OfferingID   string     `json:"offering_id"`
			OutputTokens int64      `json:"output_tokens"`
			Cost         money.Pico `json:"cost_pico"`
		} `json:"requests"`
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		api.do(token, http.MethodGet, "/api/usage?limit=100", nil, &usage, http.StatusOK)
		if len(usage.Requests) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(usage.Requests) != n {
		t.Fatalf("usage shows %d requests, want %d", len(usage.Requests), n)
	}
	var total money.Pico
	for _, u := range usage.Requests {
		if !sent[u.RequestID] {
			t.Errorf("usage shows %s, which was not sent, or twice", u.RequestID)
		}
		delete(sent, u.RequestID)
		if u.OfferingID != o.ID || u.Tier != "realtime" || u.OutputTokens != 8 || u.Cost <= 0 {
			t.Errorf("usage row %+v", u)
		}
		total += u.Cost
	}
	if got := api.balance(token); got != startBalance-total {
		t.Fatalf("balance %s after requests costing %s; want %s", got, total, startBalance-total)
	}
}

type apiClient struct {
	t    *testing.T
	base string
}

func (a *apiClient) do(token, method, path string, body, out any, want int) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		a.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

func (a *apiClient) login(email string) string {
	var out struct {
		Token string `json:"token"`
	}
	a.do("", http.MethodPost, "/api/auth/login", map[string]string{"email": email, "password": "gpumarket-demo"}, &out, http.StatusOK)
	return out.Token
}

func (a *apiClient) balance(token string) money.Pico {
	var b struct {
		Pico money.Pico `json:"balance_pico"`
	}
	a.do(token, http.MethodGet, "/api/balance", nil, &b, http.StatusOK)
	return b.Pico
}
