package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
)

// The whole platform (every role, embedded NATS, the demo's simulated rigs) opened, run, answering and stopped
// lifecycleRounds times on one database; then no goroutine of any round is left (docs/lifecycle.md).
const lifecycleRounds = 40

func TestPlatformStopsEverythingItStarts(t *testing.T) {
	cfg := testConfig(t, Roles{Web: true, Gateway: true, Meter: true})
	cfg.MetricsAddr = "127.0.0.1:0"
	// One stripe-mock for every round (a process of its own, slow to start); the rounds' platforms use it as
	// they would STRIPE_API_URL.
	cfg.StripeAPIURL = stripemocktest.Start(t)
	// The database is migrated and seeded once, before the count starts.
	call := seedPlatform(t, cfg)
	before := goleak.IgnoreCurrent()

	began := time.Now()
	for round := range lifecycleRounds {
		lifecycleRound(t, cfg, call, round)
		// Each round's goroutines are gone once Close has returned, give or take goleak's retries (about half a
		// second): not merely by the end of the test.
		if err := goleak.Find(before); err != nil {
			t.Fatalf("round %d left goroutines behind: %v", round, err)
		}
	}
	took := time.Since(began)
	t.Logf("%d rounds of open, run, serve and stop in %s (%s each)", lifecycleRounds, took.Round(time.Millisecond),
		(took / lifecycleRounds).Round(time.Millisecond))
	goleak.VerifyNone(t, before)
}

// lifecycleCall is the gateway request each round makes: a customer's key, and a model and tier one of the
// demo's simulated rigs serves, the one that claims the quickest first token.
type lifecycleCall struct{ secret, model string }

// seedPlatform migrates cfg's database and seeds the demo, with a platform that is not run; it gives a customer
// credit and a key, for the rounds' requests.
func seedPlatform(t *testing.T, cfg Config) lifecycleCall {
	t.Helper()
	ctx := context.Background()
	p, err := Open(ctx, cfg, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	admin, err := p.accounts.EnsureUser(ctx, "admin@lifecycle.example.com", demo.Password, accounts.RoleAdmin, "Lifecycle Ops")
	if err != nil {
		t.Fatal(err)
	}
	customer, err := p.accounts.EnsureUser(ctx, "customer@lifecycle.example.com", demo.Password, accounts.RoleDeveloper, "Lifecycle")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := credits.NewCredits(p.pool, ledger.NewLedger(p.pool, nil), nil, nil).Adjust(ctx, credits.AdjustInput{
		AccountID: customer.AccountID, Amount: 10 * money.PicoPerUSD, Reason: "lifecycle test", ByUserID: admin.ID}); err != nil {
		t.Fatal(err)
	}
	var call lifecycleCall
	if _, call.secret, err = p.accounts.CreateKey(ctx, customer, accounts.NewKeyInput{Name: "lifecycle"}); err != nil {
		t.Fatal(err)
	}
	var tier string
	if err := p.pool.QueryRow(ctx, `SELECT model, tier FROM offerings WHERE seed_key IS NOT NULL AND status = 'active'
		ORDER BY claimed_ttft_p50_ms, seed_key LIMIT 1`).Scan(&call.model, &tier); err != nil {
		t.Fatal(err)
	}
	call.model += ":" + tier
	return call
}

// lifecycleRound opens the platform, starts the demo's rigs, runs it until its pages, its metrics and its
// gateway answer, and stops it all as `gpumarket dev` does.
func lifecycleRound(t *testing.T, cfg Config, call lifecycleCall, round int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Open(ctx, cfg, discardLog())
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	defer p.Close()
	rigs, err := p.startSimulatedRigs(ctx)
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	defer func() {
		for _, r := range rigs {
			r.stop()
		}
	}()
	if len(rigs) == 0 {
		t.Fatalf("round %d: no simulated rig started", round)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	for _, url := range []string{p.URL() + "/healthz", p.MetricsURL()} {
		waitForStatus(t, client, url, round, done)
	}
	// A completion through the gateway: admission, routing, a rig, the request log, the key's last use and the
	// meter all have work in hand when the platform stops.
	waitForCompletion(t, client, p.URL(), call, round, done)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("round %d: Run returned %v after its context ended", round, err)
	}
}

// waitForStatus waits until url answers with a status below 500, or fails.
func waitForStatus(t *testing.T, client *http.Client, url string, round int, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := client.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode < 500 {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("round %d: Run returned %v before %s answered", round, err, url)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: %s did not answer: %v", round, url, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitForCompletion sends a chat completion until one is answered 200 (the router knows the rig once its
// heartbeat is in, and routes it once its probes have qualified it: in the first round), or fails.
func waitForCompletion(t *testing.T, client *http.Client, baseURL string, call lifecycleCall, round int, done <-chan error) {
	t.Helper()
	body := `{"model":"` + call.model + `","max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`
	deadline := time.Now().Add(10*time.Second + catalog.ProbesToQualify*routing.ProbeEvery)
	for {
		req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+call.secret)
		req.Header.Set("Content-Type", "application/json")
		status, answer := 0, ""
		if res, err := client.Do(req); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			status, answer = res.StatusCode, string(b)
		}
		select {
		case err := <-done:
			t.Fatalf("round %d: Run returned %v before a completion was answered", round, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: no completion answered: last %d %s", round, status, answer)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
