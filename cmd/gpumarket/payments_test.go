package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"

	"github.com/gpumarket/gpumarket/db/dbtest"
)

// stripeMockOnPath puts a stripe-mock on the PATH, as an operator's machine may have one, and
// returns a function that says how many times it was started. STRIPE_MOCK_BIN is unset, so
// the PATH is where the platform would find it.
func stripeMockOnPath(t *testing.T) (starts func() int) {
	t.Helper()
	real := stripemocktest.Bin(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "started")
	script := fmt.Sprintf("#!/bin/sh\necho started >> %q\nexec %q \"$@\"\n", record, real)
	if err := os.WriteFile(filepath.Join(dir, "stripe-mock"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRIPE_MOCK_BIN", "")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() int {
		b, _ := os.ReadFile(record)
		return strings.Count(string(b), "started")
	}
}

// serveEnv sets everything `gpumarket serve` needs but payments.
func serveEnv(t *testing.T) (addr string) {
	t.Helper()
	_, dbURL := dbtest.NewWithURL(t)
	addr = freeAddr(t)
	for k, v := range map[string]string{
		"DATABASE_URL": dbURL, "GPUMARKET_ADDR": addr, "GPUMARKET_DATA_DIR": t.TempDir(), "GPUMARKET_NATS_PORT": "0",
		"GPUMARKET_SESSION_KEY": strings.Repeat("s", 32), "GPUMARKET_TICKET_KEY": strings.Repeat("t", 32),
		"GPUMARKET_RIG_KEY": strings.Repeat("r", 32), "STRIPE_WEBHOOK_SECRET": "whsec_test_payments",
		"STRIPE_SECRET_KEY": "", "GPUMARKET_PAYMENTS": "", "NATS_URL": "", "GPUMARKET_ROLES": "",
		"GPUMARKET_METRICS_TOKEN": "", "GPUMARKET_METRICS_ADDR": "", "GPUMARKET_TRUSTED_PROXIES": "",
	} {
		t.Setenv(k, v)
	}
	return addr
}

// The attack: `gpumarket serve` in production with a stripe-mock on the PATH and no Stripe
// key, and a $10,000 checkout against it. The platform does not start at all: it says why in
// one line, never starts the stripe-mock, and nothing listens for the checkout. Asked for test
// payments in so many words, the same start runs them, marked as a test.
func TestServeWithoutAStripeKeyDoesNotStart(t *testing.T) {
	starts := stripeMockOnPath(t)
	addr := serveEnv(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	checkout := func() (*http.Response, error) {
		return http.Post("http://"+addr+"/api/credits/checkout", "application/json", strings.NewReader(`{"amount_usd": "10000"}`))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"serve"}, log)
	if err == nil {
		t.Fatal("serve started without STRIPE_SECRET_KEY or GPUMARKET_PAYMENTS=test")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "STRIPE_SECRET_KEY") || !strings.Contains(msg, "GPUMARKET_PAYMENTS=test") {
		t.Fatalf("serve refused with %q; want one line naming STRIPE_SECRET_KEY and GPUMARKET_PAYMENTS=test", msg)
	}
	t.Logf("gpumarket: %s", msg)
	if n := starts(); n != 0 {
		t.Fatalf("the stripe-mock on the PATH was started %d times", n)
	}
	if res, err := checkout(); err == nil {
		res.Body.Close()
		t.Fatalf("a $10,000 checkout was answered %d: something listens on %s", res.StatusCode, addr)
	}

	// Any other value of GPUMARKET_PAYMENTS is refused at start.
	for _, v := range []string{"live", "TEST", "true", "stripe-mock"} {
		t.Setenv("GPUMARKET_PAYMENTS", v)
		if err := run(ctx, []string{"serve"}, log); err == nil || !strings.Contains(err.Error(), "GPUMARKET_PAYMENTS") {
			t.Errorf("GPUMARKET_PAYMENTS=%s: %v, want a refusal naming it", v, err)
		}
	}
	// Test payments with a Stripe key as well: which one is meant is unclear, so neither runs.
	t.Setenv("GPUMARKET_PAYMENTS", "test")
	t.Setenv("STRIPE_SECRET_KEY", "sk_live_example")
	if err := run(ctx, []string{"serve"}, log); err == nil || !strings.Contains(err.Error(), "both set") {
		t.Errorf("GPUMARKET_PAYMENTS=test with a Stripe key: %v, want a refusal", err)
	}
	if n := starts(); n != 0 {
		t.Fatalf("the stripe-mock on the PATH was started %d times", n)
	}

	// Asked for: test payments run on that stripe-mock, and say so.
	t.Setenv("STRIPE_SECRET_KEY", "")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, log) }()
	var res *http.Response
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if res, err = http.Get("http://" + addr + "/login"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve with GPUMARKET_PAYMENTS=test did not start: %v", err)
		}
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `data-testid="test-mode-banner"`) {
		t.Error("the login page does not say payments are a test")
	}
	if n := starts(); n != 1 {
		t.Errorf("stripe-mock was started %d times, want once", n)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve: %v", err)
	}
}

// Open, which tests and `dev` call without serve's checks, refuses the same configuration.
func TestOpenRefusesPaymentsWithoutAKeyOrTestMode(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0,
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_open"},
		Roles: Roles{Web: true, Gateway: true, Meter: true}, TicketKey: []byte(strings.Repeat("t", 32)), RigKey: []byte(strings.Repeat("r", 32))}
	p, err := Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		p.Close()
		t.Fatal("Open took payments without a Stripe key or GPUMARKET_PAYMENTS=test")
	}
	if !strings.Contains(err.Error(), "GPUMARKET_PAYMENTS=test") {
		t.Fatalf("Open: %v", err)
	}
}

func TestPaymentsMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		payments, key string
		test          bool
		refused       string
	}{
		{"", "sk_live_x", false, ""},
		{"test", "", true, ""},
		{"", "", false, "no STRIPE_SECRET_KEY"},
		{"test", "sk_live_x", false, "both set"},
	} {
		test, err := Config{Payments: c.payments, StripeSecretKey: c.key}.paymentsMode()
		switch {
		case c.refused == "" && (err != nil || test != c.test):
			t.Errorf("GPUMARKET_PAYMENTS=%q, key %q: test %v, %v; want test %v", c.payments, c.key, test, err, c.test)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("GPUMARKET_PAYMENTS=%q, key %q: %v; want a refusal with %q", c.payments, c.key, err, c.refused)
		}
	}
}
