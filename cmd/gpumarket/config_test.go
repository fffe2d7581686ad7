package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/web/gateway"
)

// TestRateLimitPerKeyComesFromTheEnvironment: GPUMARKET_RATE_LIMIT_RPS and GPUMARKET_RATE_LIMIT_BURST set the
// gateway's token bucket per API key, default to the gateway's defaults, and a bad value stops the start with
// an error naming the variable.
func TestRateLimitPerKeyComesFromTheEnvironment(t *testing.T) {
	load := func(rps, burst string) (Config, error) {
		t.Helper()
		t.Setenv("GPUMARKET_RATE_LIMIT_RPS", rps)
		t.Setenv("GPUMARKET_RATE_LIMIT_BURST", burst)
		return configFromEnv()
	}

	c, err := load("", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitRPS != gateway.DefaultKeyRatePerSecond || c.RateLimitBurst != gateway.DefaultKeyRateBurst {
		t.Errorf("unset: %g/s, burst %d; want the gateway's defaults %d/s, burst %d", c.RateLimitRPS, c.RateLimitBurst,
			gateway.DefaultKeyRatePerSecond, gateway.DefaultKeyRateBurst)
	}

	for _, good := range []struct {
		rps, burst string
		wantRPS    float64
		wantBurst  int
	}{{"200", "400", 200, 400}, {"0.5", "1", 0.5, 1}, {" 7 ", " 9 ", 7, 9}, {"1e3", "", 1000, gateway.DefaultKeyRateBurst}} {
		c, err := load(good.rps, good.burst)
		if err != nil {
			t.Errorf("RPS %q, burst %q: %v", good.rps, good.burst, err)
			continue
		}
		if c.RateLimitRPS != good.wantRPS || c.RateLimitBurst != good.wantBurst {
			t.Errorf("RPS %q, burst %q: %g/s, burst %d; want %g/s, burst %d", good.rps, good.burst, c.RateLimitRPS,
				c.RateLimitBurst, good.wantRPS, good.wantBurst)
		}
	}

	for _, bad := range []struct{ rps, burst, names string }{
		{"fast", "", "GPUMARKET_RATE_LIMIT_RPS"},
		{"0", "", "GPUMARKET_RATE_LIMIT_RPS"},
		{"-5", "", "GPUMARKET_RATE_LIMIT_RPS"},
		{"NaN", "", "GPUMARKET_RATE_LIMIT_RPS"},
		{"+Inf", "", "GPUMARKET_RATE_LIMIT_RPS"},
		{"", "0", "GPUMARKET_RATE_LIMIT_BURST"},
		{"", "-1", "GPUMARKET_RATE_LIMIT_BURST"},
		{"", "2.5", "GPUMARKET_RATE_LIMIT_BURST"},
		{"", "lots", "GPUMARKET_RATE_LIMIT_BURST"},
	} {
		if _, err := load(bad.rps, bad.burst); err == nil || !strings.Contains(err.Error(), bad.names) {
			t.Errorf("RPS %q, burst %q: error %v; want one naming %s", bad.rps, bad.burst, err, bad.names)
		}
	}

	// The gateway gets what was configured.
	c, err = load("12.5", "30")
	if err != nil {
		t.Fatal(err)
	}
	c.TicketKey = []byte(strings.Repeat("t", 32))
	p := &Platform{cfg: c, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	gw, err := p.gatewayConfig()
	if err != nil {
		t.Fatal(err)
	}
	if gw.RatePerSecond != 12.5 || gw.RateBurst != 30 {
		t.Errorf("the gateway limits each key to %g/s with a burst of %d; want 12.5/s, 30", gw.RatePerSecond, gw.RateBurst)
	}
}

// TestStreamReplicasComeFromTheEnvironment: GPUMARKET_STREAM_REPLICAS is how many NATS nodes hold each of the
// platform's streams, 1 unless set (the embedded server), 3 on a three-node cluster; JetStream takes 1 to 5, and
// anything else stops the start with an error naming the variable (docs/deploy.md).
func TestStreamReplicasComeFromTheEnvironment(t *testing.T) {
	for _, good := range []struct {
		env  string
		want int
	}{{"", 1}, {"1", 1}, {"3", 3}, {"5", 5}} {
		t.Setenv("GPUMARKET_STREAM_REPLICAS", good.env)
		c, err := configFromEnv()
		if err != nil || c.StreamReplicas != good.want {
			t.Errorf("GPUMARKET_STREAM_REPLICAS=%q: %d replicas, %v; want %d", good.env, c.StreamReplicas, err, good.want)
		}
	}
	for _, bad := range []string{"0", "6", "-1", "three", "2.5"} {
		t.Setenv("GPUMARKET_STREAM_REPLICAS", bad)
		if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), "GPUMARKET_STREAM_REPLICAS") {
			t.Errorf("GPUMARKET_STREAM_REPLICAS=%q: error %v; want one naming the variable", bad, err)
		}
	}
}

// TestUsageRetentionComesFromTheEnvironment: GPUMARKET_USAGE_RETENTION_MONTHS is how many whole months raw usage
// rows are kept after their month ends, 0 (forever) unless set; anything but a whole number of months stops the
// start with an error naming the variable (docs/usage-storage.md).
func TestUsageRetentionComesFromTheEnvironment(t *testing.T) {
	for _, good := range []struct {
		env  string
		want int
	}{{"", 0}, {"0", 0}, {"1", 1}, {" 13 ", 13}} {
		t.Setenv("GPUMARKET_USAGE_RETENTION_MONTHS", good.env)
		c, err := configFromEnv()
		if err != nil || c.UsageRetentionMonths != good.want {
			t.Errorf("GPUMARKET_USAGE_RETENTION_MONTHS=%q: %d months, %v; want %d", good.env, c.UsageRetentionMonths, err, good.want)
		}
	}
	for _, bad := range []string{"-1", "a year", "1.5", "5000"} {
		t.Setenv("GPUMARKET_USAGE_RETENTION_MONTHS", bad)
		if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), "GPUMARKET_USAGE_RETENTION_MONTHS") {
			t.Errorf("GPUMARKET_USAGE_RETENTION_MONTHS=%q: error %v; want one naming the variable", bad, err)
		}
	}
}

// TestRigEntryPointComesFromTheEnvironment: GPUMARKET_RIG_NATS_ADDR is where the embedded NATS listens for rigs
// (127.0.0.1 and GPUMARKET_NATS_PORT when unset), GPUMARKET_RIG_NATS_URL the address providers are shown; bad
// values, and settings that contradict each other, stop the start with an error naming the variable.
func TestRigEntryPointComesFromTheEnvironment(t *testing.T) {
	load := func(natsURL, port, addr, rigURL string) (Config, error) {
		t.Helper()
		t.Setenv("NATS_URL", natsURL)
		t.Setenv("GPUMARKET_NATS_PORT", port)
		t.Setenv("GPUMARKET_RIG_NATS_ADDR", addr)
		t.Setenv("GPUMARKET_RIG_NATS_URL", rigURL)
		return configFromEnv()
	}
	for _, good := range []struct {
		natsURL, port, addr, rigURL string
		host                        string
		wantPort                    int
		shown                       string
	}{
		{"", "", "", "", "", 4222, ""},
		{"", "4333", "", "", "", 4333, ""},
		{"", "", "0.0.0.0:4222", "tls://nats.example.com:4222", "0.0.0.0", 4222, "tls://nats.example.com:4222"},
		{"", "", ":4999", "", "0.0.0.0", 4999, ""},
		{"", "", "192.0.2.10:0", " nats://a.example.com:4222 , nats://b.example.com:4222", "192.0.2.10", 0,
			"nats://a.example.com:4222,nats://b.example.com:4222"},
		{"", "", "[2001:db8::1]:4222", "", "2001:db8::1", 4222, ""},
		{"nats://n1:4222", "", "", "wss://rigs.example.com:443", "", 4222, "wss://rigs.example.com:443"},
	} {
		c, err := load(good.natsURL, good.port, good.addr, good.rigURL)
		if err != nil {
			t.Errorf("%+v: %v", good, err)
			continue
		}
		if c.NATSHost != good.host || c.NATSPort != good.wantPort || c.RigNATSURL != good.shown {
			t.Errorf("%+v: host %q, port %d, shown %q", good, c.NATSHost, c.NATSPort, c.RigNATSURL)
		}
	}
	for _, bad := range []struct{ natsURL, port, addr, rigURL, names string }{
		{"", "", "4222", "", "GPUMARKET_RIG_NATS_ADDR"},
		{"", "", "nats.example.com:4222", "", "GPUMARKET_RIG_NATS_ADDR"},
		{"", "", "0.0.0.0:70000", "", "GPUMARKET_RIG_NATS_ADDR"},
		{"", "4222", "0.0.0.0:4222", "", "GPUMARKET_NATS_PORT"},
		{"nats://n1:4222", "", "0.0.0.0:4222", "", "GPUMARKET_RIG_NATS_URL"},
		{"", "", "", "nats.example.com:4222", "GPUMARKET_RIG_NATS_URL"},
		{"", "", "", "http://nats.example.com:4222", "GPUMARKET_RIG_NATS_URL"},
		{"", "", "", "nats://nats.example.com", "GPUMARKET_RIG_NATS_URL"},
		{"", "", "", "nats://gpumarket:secret@nats.example.com:4222", "GPUMARKET_RIG_NATS_URL"},
	} {
		_, err := load(bad.natsURL, bad.port, bad.addr, bad.rigURL)
		if err == nil || !strings.Contains(err.Error(), bad.names) {
			t.Errorf("%+v: %v, want an error naming %s", bad, err, bad.names)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error repeats the credential: %v", err)
		}
	}
}

// TestRigTLSAndSystemURLComeFromTheEnvironment: the embedded server's wss:// entry point needs its address,
// certificate and key together, and only with the embedded server; GPUMARKET_NATS_SYSTEM_URL only with an external
// NATS.
func TestRigTLSAndSystemURLComeFromTheEnvironment(t *testing.T) {
	load := func(natsURL, addr, cert, key, system string) (Config, error) {
		t.Helper()
		t.Setenv("NATS_URL", natsURL)
		t.Setenv("GPUMARKET_RIG_NATS_WSS_ADDR", addr)
		t.Setenv("GPUMARKET_RIG_NATS_TLS_CERT", cert)
		t.Setenv("GPUMARKET_RIG_NATS_TLS_KEY", key)
		t.Setenv("GPUMARKET_NATS_SYSTEM_URL", system)
		return configFromEnv()
	}
	c, err := load("", "0.0.0.0:8443", "/etc/rigs.crt", "/etc/rigs.key", "")
	if err != nil || c.RigTLS == nil || c.RigTLS.Host != "0.0.0.0" || c.RigTLS.Port != 8443 || c.RigTLS.CertFile != "/etc/rigs.crt" ||
		c.RigTLS.KeyFile != "/etc/rigs.key" {
		t.Errorf("the wss:// entry point: %+v, %v", c.RigTLS, err)
	}
	if c, err := load("", "", "", "", ""); err != nil || c.RigTLS != nil {
		t.Errorf("no wss:// entry point set: %+v, %v", c.RigTLS, err)
	}
	if c, err := load("nats://gpumarket:p@n1:4222", "", "", "", "nats://system:s@n1:4222"); err != nil || c.NATSSystemURL != "nats://system:s@n1:4222" {
		t.Errorf("the system URL: %q, %v", c.NATSSystemURL, err)
	}
	for _, bad := range []struct{ natsURL, addr, cert, key, system, names string }{
		{"", "0.0.0.0:8443", "/etc/rigs.crt", "", "", "GPUMARKET_RIG_NATS_TLS_KEY"},
		{"", "", "/etc/rigs.crt", "/etc/rigs.key", "", "GPUMARKET_RIG_NATS_WSS_ADDR"},
		{"", "rigs.example.com:8443", "/etc/rigs.crt", "/etc/rigs.key", "", "GPUMARKET_RIG_NATS_WSS_ADDR"},
		{"nats://n1:4222", "0.0.0.0:8443", "/etc/rigs.crt", "/etc/rigs.key", "", "GPUMARKET_RIG_NATS_WSS_ADDR"},
		{"", "", "", "", "nats://system:s@n1:4222", "GPUMARKET_NATS_SYSTEM_URL"},
	} {
		if _, err := load(bad.natsURL, bad.addr, bad.cert, bad.key, bad.system); err == nil || !strings.Contains(err.Error(), bad.names) {
			t.Errorf("%+v: %v, want an error naming %s", bad, err, bad.names)
		}
	}
}

// TestBatchS3ComesFromTheEnvironment: with no GPUMARKET_BATCH_S3_ENDPOINT batch files stay in the data directory;
// with one, its bucket and both keys are required, the cache bound is read in megabytes, and a setting without its
// endpoint or a wrong value stops the start with an error naming the variables (docs/batches.md, "The S3 store").
func TestBatchS3ComesFromTheEnvironment(t *testing.T) {
	vars := []string{"ENDPOINT", "BUCKET", "PREFIX", "REGION", "ACCESS_KEY", "SECRET_KEY", "CACHE_MB"}
	set := func(env map[string]string) {
		for _, v := range vars {
			t.Setenv("GPUMARKET_BATCH_S3_"+v, env[v])
		}
	}
	full := map[string]string{"ENDPOINT": "http://minio:9000", "BUCKET": "gpumarket-batches", "PREFIX": "prod/files/",
		"REGION": "eu-west-1", "ACCESS_KEY": "access", "SECRET_KEY": "secret", "CACHE_MB": "4096"}
	set(full)
	c, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s := c.BatchS3; s.Endpoint != "http://minio:9000" || s.Bucket != "gpumarket-batches" || s.Prefix != "prod/files/" ||
		s.Region != "eu-west-1" || s.AccessKey != "access" || s.SecretKey != "secret" || s.CacheBytes != 4096<<20 {
		t.Fatalf("S3 store %+v", s)
	}
	set(nil)
	if c, err := configFromEnv(); err != nil || c.BatchS3.Endpoint != "" {
		t.Fatalf("unset: %+v, %v; want the data directory", c.BatchS3, err)
	}
	for _, bad := range []struct {
		name, value, want string
	}{
		{"ENDPOINT", "", "not GPUMARKET_BATCH_S3_ENDPOINT"},
		{"ENDPOINT", "minio:9000", "GPUMARKET_BATCH_S3_ENDPOINT: the S3 endpoint"},
		{"BUCKET", "", "set GPUMARKET_BATCH_S3_BUCKET too"},
		{"SECRET_KEY", "", "set GPUMARKET_BATCH_S3_SECRET_KEY too"},
		{"CACHE_MB", "100", "GPUMARKET_BATCH_S3_CACHE_MB"},
		{"CACHE_MB", "lots", "GPUMARKET_BATCH_S3_CACHE_MB"},
	} {
		env := map[string]string{}
		for k, v := range full {
			env[k] = v
		}
		env[bad.name] = bad.value
		set(env)
		if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("GPUMARKET_BATCH_S3_%s=%q: error %v; want %q", bad.name, bad.value, err, bad.want)
		}
	}
}

// TestDownloadsDirectoryComesFromTheEnvironment: GPUMARKET_DOWNLOADS_DIR is where the platform publishes the agent
// from, made absolute; unset, the agent is published from the data directory's downloads (docs/agent-distribution.md).
func TestDownloadsDirectoryComesFromTheEnvironment(t *testing.T) {
	data := t.TempDir()
	t.Setenv("GPUMARKET_DATA_DIR", data)
	t.Setenv("GPUMARKET_DOWNLOADS_DIR", "")
	c, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if shelf, err := agentDownloads(c, slog.New(slog.DiscardHandler)); err != nil || shelf.Dir() != filepath.Join(data, "downloads") {
		t.Errorf("unset, the agent is published from %q (%v), want the data directory's downloads", shelf.Dir(), err)
	}
	t.Setenv("GPUMARKET_DOWNLOADS_DIR", "published/agents")
	if c, err = configFromEnv(); err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("published/agents"); c.DownloadsDir != want {
		t.Errorf("GPUMARKET_DOWNLOADS_DIR=published/agents: %q, want %q", c.DownloadsDir, want)
	}
}

// TestWebhooksComeFromTheEnvironment: the key that seals endpoints' secrets (else one derived from the session
// key, the same in every process that has it), whether private addresses are allowed, and the retry schedule;
// bad values stop the start with an error naming the variable.
func TestWebhooksComeFromTheEnvironment(t *testing.T) {
	t.Setenv("GPUMARKET_SESSION_KEY", strings.Repeat("s", 32))
	t.Setenv("GPUMARKET_WEBHOOK_KEY", "")
	t.Setenv("GPUMARKET_WEBHOOKS_ALLOW_PRIVATE", "")
	t.Setenv("GPUMARKET_WEBHOOK_RETRY_SCHEDULE", "")
	c, err := configFromEnv()
	if err != nil || c.WebhooksAllowPrivate || c.WebhookRetrySchedule != nil || len(c.webhookKey()) != 32 ||
		string(c.webhookKey()) == string(c.SessionKey) {
		t.Fatalf("defaults: %+v, %v; want private refused, the default schedule and a key derived from the session key", c, err)
	}
	derived := string(c.webhookKey())
	t.Setenv("GPUMARKET_WEBHOOK_KEY", strings.Repeat("w", 40))
	t.Setenv("GPUMARKET_WEBHOOKS_ALLOW_PRIVATE", "1")
	t.Setenv("GPUMARKET_WEBHOOK_RETRY_SCHEDULE", "1s, 1m,1h")
	if c, err = configFromEnv(); err != nil || !c.WebhooksAllowPrivate || string(c.webhookKey()) != strings.Repeat("w", 40) ||
		string(c.webhookKey()) == derived || len(c.WebhookRetrySchedule) != 3 || c.WebhookRetrySchedule[1] != time.Minute {
		t.Fatalf("set: %+v, %v", c, err)
	}
	for name, bad := range map[string]string{"GPUMARKET_WEBHOOK_KEY": "short", "GPUMARKET_WEBHOOKS_ALLOW_PRIVATE": "yes please",
		"GPUMARKET_WEBHOOK_RETRY_SCHEDULE": "5s,soon"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, bad)
			if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: error %v; want one naming the variable", name, bad, err)
			}
		})
	}
}
