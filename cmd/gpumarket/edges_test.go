package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/testlog"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/gpumarket/gpumarket/cmd/internal/dirlock"
	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
)

func discardLog() *slog.Logger { return testlog.Discard() }

// runPlatform opens the platform on cfg, runs it until the test ends, and returns it.
func runPlatform(t *testing.T, cfg Config) *Platform {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Open(ctx, cfg, discardLog())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		p.Close()
	})
	return p
}

// testConfig is a whole platform on a fresh database with embedded NATS and test payments.
func testConfig(t *testing.T, roles Roles) Config {
	t.Helper()
	_, dbURL := dbtest.NewWithURL(t)
	return Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0, Payments: PaymentsTest,
		StripeMockBin: stripemocktest.Bin(t), SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_edges"},
		Roles: roles, TicketKey: []byte(strings.Repeat("t", 32)), RigKey: []byte(strings.Repeat("r", 32))}
}

func httpGet(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// /metrics is never on the public listener without a token: with GPUMARKET_METRICS_ADDR it is
// on that address alone, with the runtime's profiles; with GPUMARKET_METRICS_TOKEN, for that bearer token alone. Every
// listener has its four timeouts.
func TestMetricsAreOnlyForTheTokenOrTheirOwnAddress(t *testing.T) {
	t.Parallel()
	const token = "a-long-random-metrics-token"
	meter := Roles{Meter: true}

	cfg := testConfig(t, meter)
	cfg.MetricsAddr = "127.0.0.1:0"
	own := runPlatform(t, cfg)
	if st, _ := httpGet(t, own.URL()+"/metrics", ""); st != http.StatusNotFound {
		t.Errorf("/metrics on the public listener with GPUMARKET_METRICS_ADDR set: %d, want 404", st)
	}
	if st, body := httpGet(t, own.MetricsURL(), ""); st != http.StatusOK || !strings.Contains(body, "gpumarket_http_requests_total") {
		t.Errorf("%s: %d, want the metrics", own.MetricsURL(), st)
	}
	// The runtime's profiles are on the metrics address, and never on the public listener.
	profiles := strings.TrimSuffix(own.MetricsURL(), "/metrics") + "/debug/pprof/"
	if st, body := httpGet(t, profiles, ""); st != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("%s: %d, want the index of the runtime's profiles", profiles, st)
	}
	if st, _ := httpGet(t, own.URL()+"/debug/pprof/", ""); st != http.StatusNotFound {
		t.Errorf("/debug/pprof/ on the public listener: %d, want 404", st)
	}
	for name, srv := range map[string]*http.Server{"public": own.http, "metrics": own.metricsHTTP} {
		if srv.ReadHeaderTimeout != 10*time.Second || srv.ReadTimeout != 30*time.Second || srv.WriteTimeout != 60*time.Second ||
			srv.IdleTimeout != 120*time.Second || srv.MaxHeaderBytes != 64<<10 {
			t.Errorf("the %s listener's limits: read header %v, read %v, write %v, idle %v, header bytes %d", name,
				srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
		}
	}

	cfg = testConfig(t, meter)
	cfg.MetricsToken = token
	guarded := runPlatform(t, cfg)
	if guarded.MetricsURL() != "" {
		t.Errorf("a metrics listener without GPUMARKET_METRICS_ADDR: %s", guarded.MetricsURL())
	}
	for _, bearer := range []string{"", "wrong", token[:8]} {
		if st, body := httpGet(t, guarded.URL()+"/metrics", bearer); st != http.StatusUnauthorized || strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics with bearer %q: %d, want 401 and no metrics", bearer, st)
		}
	}
	if st, body := httpGet(t, guarded.URL()+"/metrics", token); st != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics with its token: %d, want the metrics", st)
	}
}

// With an external NATS_URL that holds the platform's user and password, a provider's Connect
// page shows the server without them, and only the rig's own credentials.
func TestConnectPageShowsNoPlatformCredential(t *testing.T) {
	t.Parallel()
	const platformPassword = "pl4tform-s3cret-password"
	rigKey := []byte(strings.Repeat("r", 32))
	ns := natstest.Start(t, natsserver.EmbeddedOptions{Users: []*server.User{natsserver.PlatformUser("gpumarket", platformPassword)}})
	bare := ns.ClientURL()
	external := strings.Replace(bare, "nats://", "nats://gpumarket:"+platformPassword+"@", 1)

	cfg := testConfig(t, Roles{Web: true, Gateway: true, Meter: true})
	cfg.NATSURL, cfg.RigKey = external, rigKey
	p := runPlatform(t, cfg)
	if err := p.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	provider, err := p.accounts.UserByEmail(context.Background(), "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rigs, err := p.catalog.ListOwn(context.Background(), provider.AccountID)
	if err != nil || len(rigs) == 0 {
		t.Fatalf("the demo provider's rigs: %v, %d", err, len(rigs))
	}
	rig := rigs[0]
	sess, err := p.accounts.Login(context.Background(), loginAs("provider@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, p.URL()+"/provider/rigs/"+rig.ID+"/connect", nil)
	req.AddCookie(&http.Cookie{Name: "gpumarket_session", Value: sess.Token})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := string(raw)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the Connect page: %d", res.StatusCode)
	}
	if strings.Contains(page, platformPassword) || strings.Contains(page, "gpumarket:") {
		t.Fatalf("the Connect page shows the platform's NATS credentials:\n%s", page)
	}
	for _, want := range []string{"-nats " + bare, "-nats-user " + events.RigUsername(rig.ID),
		"GPUAGENT_NATS_PASSWORD=" + events.RigPassword(rigKey, rig.ID)} {
		if !strings.Contains(page, want) {
			t.Errorf("the Connect page does not show %q", want)
		}
	}
}

func loginAs(email string) accounts.LoginInput {
	return accounts.LoginInput{Email: email, Password: demo.Password}
}

func TestWithoutUserInfo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nats://gpumarket:secret@nats.internal:4222":                  "nats://nats.internal:4222",
		"nats://s3cr3t-token@nats.internal:4222":                      "nats://nats.internal:4222",
		"tls://user:pass@nats.example.com:4443":                       "tls://nats.example.com:4443",
		"nats://a:b@n1:4222, nats://c:d@n2:4222,nats://n3:4222":       "nats://n1:4222,nats://n2:4222,nats://n3:4222",
		"nats://127.0.0.1:4222":                                       "nats://127.0.0.1:4222",
		"user:p@ss@nats.internal:4222":                                "nats.internal:4222",
		"nats://weird%zzpass@host:4222":                               "host:4222",
		"nats://gpumarket:pa%40ss@nats.internal:4222/?name=gpumarket": "nats://nats.internal:4222/?name=gpumarket",
	} {
		if got := withoutUserInfo(in); got != want {
			t.Errorf("withoutUserInfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// A second `gpumarket dev` on the data directory of one that runs (make run twice) stops before it starts
// anything, and says where the first one is.
func TestASecondDevOnOneDataDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := dirlock.Take(dir, devLockName)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	if err := first.Note("http://127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = dev(ctx, Config{DataDir: dir, Addr: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("a second dev platform ran on a data directory the first holds")
	}
	for _, want := range []string{"another gpumarket dev is running", fmt.Sprintf("(process %d, at http://127.0.0.1:8080)", os.Getpid()), "GPUMARKET_DATA_DIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the refused platform left %d entries in the data directory, want only the lock", len(entries))
	}
}

// `gpumarket dev` says where its metrics and its caught e-mail are and that payments are a test.
func TestWelcomeSaysWhereTheMetricsAre(t *testing.T) {
	t.Parallel()
	text := welcome("http://localhost:8080", "http://127.0.0.1:41234/metrics", "http://127.0.0.1:41235", true, 24)
	for _, want := range []string{"metrics     http://127.0.0.1:41234/metrics", "e-mail      http://127.0.0.1:41235", "test mode", "no card is charged"} {
		if !strings.Contains(text, want) {
			t.Errorf("the welcome does not say %q:\n%s", want, text)
		}
	}
	if text := welcome("http://localhost:8080", "", "", false, 24); strings.Contains(text, "metrics ") || strings.Contains(text, "test mode") ||
		strings.Contains(text, "e-mail ") {
		t.Errorf("without a metrics listener, a mail catcher or test payments the welcome says:\n%s", text)
	}
}

// configFromEnv reads the new settings and refuses bad ones by name.
func TestEdgeSettingsComeFromTheEnvironment(t *testing.T) {
	for _, name := range []string{"GPUMARKET_PAYMENTS", "GPUMARKET_TRUSTED_PROXIES", "GPUMARKET_METRICS_TOKEN", "GPUMARKET_METRICS_ADDR"} {
		t.Setenv(name, "")
	}
	t.Setenv("GPUMARKET_TRUSTED_PROXIES", " 10.0.0.0/8, 192.0.2.7 ,2001:db8::/32")
	t.Setenv("GPUMARKET_METRICS_TOKEN", "a-long-random-metrics-token")
	t.Setenv("GPUMARKET_METRICS_ADDR", "127.0.0.1:9464")
	t.Setenv("GPUMARKET_PAYMENTS", "test")
	c, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	var nets []string
	for _, n := range c.TrustedProxies {
		nets = append(nets, n.String())
	}
	if got := strings.Join(nets, ","); got != "10.0.0.0/8,192.0.2.7/32,2001:db8::/32" {
		t.Errorf("trusted proxies %s", got)
	}
	if c.MetricsToken != "a-long-random-metrics-token" || c.MetricsAddr != "127.0.0.1:9464" || c.Payments != PaymentsTest {
		t.Errorf("config %+v", c)
	}
	for name, bad := range map[string]string{
		"GPUMARKET_TRUSTED_PROXIES": "10.0.0.0/33",
		"GPUMARKET_METRICS_TOKEN":   "short",
		"GPUMARKET_PAYMENTS":        "yes",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v, want a refusal naming it", name, bad, err)
			}
		})
	}
	t.Setenv("GPUMARKET_TRUSTED_PROXIES", "")
	if c, err := configFromEnv(); err != nil || c.TrustedProxies != nil {
		t.Errorf("no trusted proxies: %v, %v", c.TrustedProxies, err)
	}
}
