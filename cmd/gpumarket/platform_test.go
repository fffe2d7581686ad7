package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
)

// TestPlatformServesAndShutsDown starts the whole platform as `serve` does, on port 0 with an
// embedded NATS, seeds the demo, checks health, readiness and the catalog, then stops it the
// way SIGTERM does.
func TestPlatformServesAndShutsDown(t *testing.T) {
	_, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0,
		Payments: PaymentsTest, StripeMockBin: stripemocktest.Bin(t),
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_platform"},
		Roles: Roles{Web: true, Gateway: true, Meter: true}, TicketKey: []byte(strings.Repeat("t", 32)),
		RigKey: []byte(strings.Repeat("r", 32))}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Open(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	get := func(path string) (int, map[string]any) {
		t.Helper()
		res, err := http.Get(p.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	// Readiness waits for the routing table: the demo's rigs are not running here, so none answers the heartbeat
	// request and routing is ready two seconds after it.
	var code int
	var body map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, body = get("/readyz"); code == http.StatusOK || time.Now().After(deadline) {
			break
		}
		if checks, _ := body["checks"].(map[string]any); checks["routing"] == nil || checks["routing"] == "ok" {
			t.Fatalf("/readyz not ready without naming routing: %v", body)
		}
	}
	checks, _ := body["checks"].(map[string]any)
	if code != http.StatusOK || checks["postgres"] != "ok" || checks["nats"] != "ok" || checks["routing"] != "ok" {
		t.Fatalf("/readyz: %d %v", code, body)
	}
	// Neither GPUMARKET_METRICS_TOKEN nor GPUMARKET_METRICS_ADDR: /metrics is not served.
	if code, _ := get("/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics without a token or an address of its own: %d, want 404", code)
	}
	// The demo's rigs are not running here: every listing is pending, and the public catalog shows none of them.
	if code, body := get("/api/offerings"); code != http.StatusOK || body["count"] != float64(0) {
		t.Errorf("with no rig running, the catalog lists %v offerings (%d); want none", body["count"], code)
	}
	// Once their rigs qualify (here marked so, rather than through probes), it shows each tier's.
	rows, err := p.pool.Query(ctx, `SELECT id::text FROM offerings WHERE status = 'active'`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		t.Fatalf("the demo's listings: %d, %v", len(ids), err)
	}
	for _, id := range ids {
		if err := p.catalog.MarkQualified(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, tier := range []string{"realtime", "standard", "batch"} {
		code, body := get("/api/offerings?tier=" + tier)
		if n, _ := body["count"].(float64); code != http.StatusOK || n == 0 {
			t.Errorf("no %s offerings: %d %v", tier, code, body["count"])
		}
	}

	// A demo developer starts a purchase: the platform's own stripe-mock answers.
	var login struct {
		Token string `json:"token"`
	}
	res, err := http.Post(p.URL()+"/api/auth/login", "application/json",
		strings.NewReader(`{"email": "developer@example.com", "password": "gpumarket-demo"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&login)
	res.Body.Close()
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/api/credits/checkout", strings.NewReader(`{"amount_usd": "20"}`))
	req.Header.Set("Authorization", "Bearer "+login.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var checkout map[string]any
	_ = json.NewDecoder(res.Body).Decode(&checkout)
	res.Body.Close()
	if url, _ := checkout["url"].(string); res.StatusCode != http.StatusCreated || !strings.Contains(url, "/credits/test-pay/") {
		t.Fatalf("checkout: %d %v", res.StatusCode, checkout)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after shutdown: %v", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the platform did not shut down")
	}
	if _, err := http.Get(p.URL() + "/healthz"); err == nil {
		t.Fatal("the platform still answers after shutdown")
	}
}

func TestServeRefusesWithoutItsSecrets(t *testing.T) {
	err := serve(context.Background(), Config{Roles: Roles{Web: true, Gateway: true, Meter: true}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "GPUMARKET_SESSION_KEY") {
		t.Fatalf("serve without configuration: %v", err)
	}
}
