package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	usageevent "github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/riglimits"
	"github.com/gpumarket/gpumarket/services/rigwire"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// TestStreamLimitsComeFromTheEnvironment: the per-rig limits on the usage stream are read from
// GPUMARKET_STREAM_MAX_PENDING_PER_RIG, GPUMARKET_STREAM_MAX_RATE_PER_RIG and
// GPUMARKET_STREAM_RATE_COOLDOWN; unset keeps the defaults, and a bad value names its variable.
func TestStreamLimitsComeFromTheEnvironment(t *testing.T) {
	load := func(pending, rate, cooldown string) (Config, error) {
		t.Helper()
		t.Setenv("GPUMARKET_STREAM_MAX_PENDING_PER_RIG", pending)
		t.Setenv("GPUMARKET_STREAM_MAX_RATE_PER_RIG", rate)
		t.Setenv("GPUMARKET_STREAM_RATE_COOLDOWN", cooldown)
		return configFromEnv()
	}
	c, err := load("", "", "")
	if err != nil || c.StreamMaxPendingPerRig != 0 || c.StreamMaxRatePerRig != 0 || c.StreamRateCooldown != 0 {
		t.Fatalf("unset: %+v, %v; want zeros, which keep the defaults", c, err)
	}
	if c, err = load(" 2500 ", "150.5", "90s"); err != nil || c.StreamMaxPendingPerRig != 2500 || c.StreamMaxRatePerRig != 150.5 ||
		c.StreamRateCooldown != 90*time.Second {
		t.Fatalf("set: %d, %g, %s, %v; want 2500, 150.5/s, 1m30s", c.StreamMaxPendingPerRig, c.StreamMaxRatePerRig, c.StreamRateCooldown, err)
	}
	for _, bad := range []struct{ pending, rate, cooldown, name string }{
		{"0", "", "", "GPUMARKET_STREAM_MAX_PENDING_PER_RIG"},
		{"-3", "", "", "GPUMARKET_STREAM_MAX_PENDING_PER_RIG"},
		{"1e4", "", "", "GPUMARKET_STREAM_MAX_PENDING_PER_RIG"},
		{"", "0", "", "GPUMARKET_STREAM_MAX_RATE_PER_RIG"},
		{"", "NaN", "", "GPUMARKET_STREAM_MAX_RATE_PER_RIG"},
		{"", "fast", "", "GPUMARKET_STREAM_MAX_RATE_PER_RIG"},
		{"", "", "-1m", "GPUMARKET_STREAM_RATE_COOLDOWN"},
		{"", "", "a while", "GPUMARKET_STREAM_RATE_COOLDOWN"},
	} {
		if _, err := load(bad.pending, bad.rate, bad.cooldown); err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("%+v: error %v, want one naming %s", bad, err, bad.name)
		}
	}
}

// openTestPlatform opens the platform as `dev` does, on a fresh database with the demo seeded, without running it.
func openTestPlatform(t *testing.T, limits Config) (*Platform, context.Context) {
	t.Helper()
	cfg := testConfig(t, Roles{Web: true, Gateway: true, Meter: true})
	cfg.StreamMaxPendingPerRig, cfg.StreamMaxRatePerRig, cfg.StreamRateCooldown =
		limits.StreamMaxPendingPerRig, limits.StreamMaxRatePerRig, limits.StreamRateCooldown
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	return p, ctx
}

// TestSimulatedRigsServeOverNATS: every demo offering with a simulation profile gets a simulated rig, which
// listens on no port: a call to the first offering over NATS, as a gateway makes it, reaches its rig.
func TestSimulatedRigsServeOverNATS(t *testing.T) {
	p, ctx := openTestPlatform(t, Config{})
	var first, firstProvider, firstModel string
	if err := p.pool.QueryRow(ctx, `SELECT id::text, provider_account_id::text, model FROM offerings
		WHERE seed_key IS NOT NULL AND status = 'active' ORDER BY seed_key LIMIT 1`).Scan(&first, &firstProvider, &firstModel); err != nil {
		t.Fatalf("the seed listed no offering: %v", err)
	}
	rows, err := p.pool.Query(ctx, `SELECT id::text, model, gpu, gpu_count FROM offerings WHERE seed_key IS NOT NULL AND status = 'active'`)
	if err != nil {
		t.Fatal(err)
	}
	simulated := 0
	for rows.Next() {
		var id, model, gpu string
		var count int
		if err := rows.Scan(&id, &model, &gpu, &count); err != nil {
			t.Fatal(err)
		}
		if _, ok := simulation.Lookup(model, gpu, count); ok {
			simulated++
		}
	}
	rows.Close()

	rigs, err := p.startSimulatedRigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range rigs {
			r.stop()
		}
	})
	if len(rigs) != simulated || simulated == 0 {
		t.Fatalf("%d simulated rigs started, want one for each of the %d demo offerings with a profile", len(rigs), simulated)
	}
	signer, err := ticket.NewSigner(p.cfg.TicketKey)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := signer.Sign(ticket.Claims{RequestID: "req_over_nats", AccountID: "acc", APIKeyID: "key", OfferingID: first,
		Tier: "standard", IssuedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"model": %q, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}`, firstModel)
	var res *http.Response
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		caller, err := rigwire.NewCaller(p.nc, rigwire.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(caller.Close)
		res, err = caller.Call(ctx, firstProvider, first, "/v1/chat/completions",
			http.Header{"Content-Type": {"application/json"}, ticket.Header: {tk}}, []byte(body))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first offering's rig over NATS: %v", err)
		}
	}
	defer res.Body.Close()
	var answer struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil || res.StatusCode != http.StatusOK || answer.Usage.CompletionTokens != 3 {
		t.Errorf("the first offering's rig answered %d (%v) with %d tokens, want 200 with 3", res.StatusCode, err, answer.Usage.CompletionTokens)
	}
}

// TestARigFloodingTheUsageStreamIsShutOutAndShownToAdmins: on the platform as it runs, a demo offering's rig logs in
// with its own credential and publishes 3,000 events as fast as it can, over its limit of 100 a second (1,000
// within ten seconds). It is disconnected and refused for its cooldown, the admins' JSON names its provider and
// offering, and the gauge counts one shut-out.
func TestARigFloodingTheUsageStreamIsShutOutAndShownToAdmins(t *testing.T) {
	p, ctx := openTestPlatform(t, Config{StreamMaxRatePerRig: 100, StreamRateCooldown: 3 * time.Second})
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		p.http.Close()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); p.rigLimits.Load().Report().CheckedAt.IsZero(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher never checked the stream")
		}
	}
	var offering, provider string
	if err := p.pool.QueryRow(ctx, `SELECT id::text, provider_account_id::text FROM offerings WHERE seed_key IS NOT NULL
		ORDER BY seed_key LIMIT 1`).Scan(&offering, &provider); err != nil {
		t.Fatal(err)
	}
	cred, err := p.RigCredentials(ctx, offering)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cred.NATSURL, nats.UserInfo(cred.NATSUser, cred.NATSPassword), nats.CustomInboxPrefix(events.RigInboxPrefix(provider, offering)),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.IgnoreAuthErrorAbort())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subject := events.UsageSubject(provider, offering)
	var futures []jetstream.PubAckFuture
	for i := range 3000 {
		f, err := js.PublishAsync(subject, []byte(`{"not":"an event"}`), jetstream.WithMsgID(fmt.Sprintf("flood-%d", i)))
		if err != nil {
			break // shut out: the connection is gone
		}
		futures = append(futures, f)
	}
	for deadline := time.Now().Add(10 * time.Second); !p.rigRefused(offering); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the rig was not shut out after publishing %d events", len(futures))
		}
	}
	if c, err := nats.Connect(cred.NATSURL, nats.UserInfo(cred.NATSUser, cred.NATSPassword), nats.NoReconnect()); err == nil {
		c.Close()
		t.Error("the rig's credential was accepted during its cooldown")
	}

	var login struct {
		Token string `json:"token"`
	}
	res, err := http.Post(p.URL()+"/api/auth/login", "application/json",
		strings.NewReader(`{"email": "admin@example.com", "password": "gpumarket-demo"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&login)
	res.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, p.URL()+"/api/admin/usage-stream", nil)
	req.Header.Set("Authorization", "Bearer "+login.Token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Watched bool             `json:"watched"`
		Report  riglimits.Report `json:"report"`
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || !out.Watched || !out.Report.Enforced || out.Report.MaxRate != 100 ||
		out.Report.MaxPendingPerRig != usageevent.DefaultMaxPendingPerRig {
		t.Fatalf("admin API: %d %+v (%v); want the watched report with the configured limits", res.StatusCode, out, err)
	}
	var found bool
	for _, r := range out.Report.Rigs {
		if r.OfferingID == offering && r.ProviderID == provider && r.OverRate && r.ShutOutUntil != nil {
			found = true
		}
	}
	if !found {
		t.Errorf("the admins' report %+v does not show offering %s of provider %s shut out", out.Report.Rigs, offering, provider)
	}
	families, err := p.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var shutOuts float64
	for _, f := range families {
		if f.GetName() == "gpumarket_usage_stream_rig_shut_outs_total" {
			shutOuts = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if shutOuts != 1 {
		t.Errorf("gpumarket_usage_stream_rig_shut_outs_total = %g, want 1", shutOuts)
	}
	for deadline := time.Now().Add(10 * time.Second); !nc.IsConnected(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rig did not get back in after its cooldown")
		}
	}
}
