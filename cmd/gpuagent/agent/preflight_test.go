package agent

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
)

// TestPreflightSaysWhatIsWrong: each thing a provider can get wrong at start, against real servers, gives the
// message that names it and what to do; with everything right the preflight passes.
func TestPreflightSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	password := events.RigPassword(rigKey, testOffering)
	natsURL := startRigNATS(t, natsserver.RigUser(testProvider, testOffering, password))
	listing := modelsServer(t, http.StatusOK, `{"object":"list","data":[{"id":"qwen-7b","object":"model"},{"id":"llama-8b","object":"model"}]}`)
	refused := closedPort(t)
	tlsURL := startTLSNATS(t)

	for _, c := range []struct {
		name string
		cfg  func(*Config)
		want string // "" when the preflight passes
	}{
		{"everything right", func(*Config) {}, ""},
		{"no model to check", func(c *Config) { c.Model = "" }, ""},
		{"the upstream serves another model", func(c *Config) { c.Model = "mistral-7b" },
			"upstream " + listing + " does not list model mistral-7b (it lists: qwen-7b, llama-8b)"},
		{"no inference server", func(c *Config) { c.Upstream = "http://" + refused },
			"cannot reach the upstream at http://" + refused + ": connection refused — is your inference server running?"},
		{"the upstream is not OpenAI-compatible", func(c *Config) {
			c.Upstream = modelsServer(t, http.StatusNotFound, `not found`)
		}, "answered GET /v1/models with 404 Not Found: -upstream must be the base URL of an OpenAI-compatible server"},
		{"a wrong password", func(c *Config) { c.NATSPassword = "not-the-rigs" },
			"the platform refused this rig's credentials (user rig-" + testOffering + "): re-issue them on your rig's Connect page"},
		{"no credentials at all", func(c *Config) { c.NATSUser, c.NATSPassword = "", "" },
			"the platform's NATS at " + natsURL + " asks for this rig's credentials"},
		{"NATS unreachable", func(c *Config) { c.NATSURL = "nats://" + refused },
			"cannot reach the platform's NATS at nats://" + refused + ": connection refused — it must be reachable from this machine (outbound TCP to " + refused + ")"},
		{"a certificate no one vouches for", func(c *Config) { c.NATSURL = tlsURL },
			"TLS with the platform's NATS at " + tlsURL + " failed: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Upstream: listing, Model: "llama-8b", ProviderID: testProvider, OfferingID: testOffering,
				GPUSKU: "rtx-4090", GPUCount: 1, Capacity: 1, NATSURL: natsURL, NATSUser: events.RigUsername(testOffering),
				NATSPassword: password, OutboxDir: t.TempDir()}
			c.cfg(&cfg)
			err := Preflight(t.Context(), cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("the preflight fails: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("the preflight passes, want %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("the preflight says\n  %v\nwant it to say\n  %s", err, c.want)
			}
		})
	}
}

// startRigNATS is an embedded NATS that lets in only the given users, and its URL.
func startRigNATS(t *testing.T, users ...*server.User) string {
	t.Helper()
	s, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir(), Users: users,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return fmt.Sprintf("nats://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
}

// startTLSNATS is a NATS server that requires TLS with a certificate no public authority signed (httptest's),
// and its tls:// URL.
func startTLSNATS(t *testing.T) string {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	cfg := ts.TLS.Clone()
	ts.Close()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, TLS: true, TLSConfig: cfg,
		NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("the TLS NATS server is not ready")
	}
	return fmt.Sprintf("tls://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
}

// modelsServer answers GET /v1/models with the status and body, and is its base URL.
func modelsServer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// closedPort is a host:port on loopback where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
