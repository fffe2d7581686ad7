package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/cmd/internal/rignet"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestARigAtHomeServesFromItsConnectPage is a provider's rig behind a home router: the agent and its inference
// server run in a network namespace whose only route leads to the platform's address and whose firewall refuses
// every connection that does not start inside it (cmd/internal/rignet). The provider lists the rig, opens its
// Connect page and runs the page's command as shown, inside the namespace: it downloads the agent from the
// platform, checks its SHA-256 and runs it against the inference server on the rig's own loopback. The rig starts
// pending, qualifies through the platform's probes, serves a customer's streamed request over the connection its
// agent opened, and the request is billed exactly once: the customer charged the tier's price, the provider owed
// its asks.
func TestARigAtHomeServesFromItsConnectPage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the agent and runs a whole platform")
	}
	home := rignet.New(t)
	bin := buildAgent(t)
	simbackend := filepath.Join(t.TempDir(), "simbackend")
	if out, err := exec.Command("go", "build", "-o", simbackend, "../simbackend").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/simbackend: %v\n%s", err, out)
	}
	published := filepath.Join(t.TempDir(), "downloads")
	if err := os.MkdirAll(published, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(bin, filepath.Join(published, downloads.AgentName(runtime.GOARCH))); err != nil {
		t.Fatal(err)
	}
	// The platform listens for rigs and serves its pages on its end of the link only.
	platformIP := home.PlatformIP.String()
	b := setupGatewayConfig(t, func(c *Config) {
		c.Addr, c.NATSHost, c.DownloadsDir = net.JoinHostPort(platformIP, "0"), platformIP, published
	}, nil)
	p := b.p

	const model = "rig-at-home"
	p50, p99, tps := 100.0, 300.0, 1000.0
	o, err := p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: model,
		AskInput: 60_000, AskOutput: 120_000, ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	if o.RigState != catalog.RigPending {
		t.Fatalf("a new listing's rig is %q, want pending", o.RigState)
	}

	page := connectPage(t, p, "provider@example.com", o.ID)
	command := page.Find(`[data-testid="agent-command"][data-arch="` + runtime.GOARCH + `"]`).Text()
	if !strings.HasPrefix(command, "curl -fsSLo gpuagent http://"+net.JoinHostPort(platformIP, "")) ||
		!strings.Contains(command, "-nats nats://"+platformIP+":") || !strings.Contains(command, "-upstream "+agentUpstreamOnPage) {
		t.Fatalf("the page's command does not download from and connect to the platform's address %s, or forward to %s:\n%s",
			platformIP, agentUpstreamOnPage, command)
	}

	// The rig's inference server, on the rig's own loopback where the page's command expects it.
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	upstream := home.Command(ctx, simbackend, "-zero", "-model", model, "-addr", strings.TrimPrefix(agentUpstreamOnPage, "http://"))
	upstream.Stderr = os.Stderr
	if err := upstream.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = upstream.Wait() }()

	// The page's command, as shown, in a shell at the rig's home: no change at all.
	stop := runAgent(t, bin, home.Command(ctx, "sh", "-c", command), nil)
	defer stop()

	b.eventually(t, "the agent connects as the rig's own user", func() bool { return rigConnected(t, p.natsServer, o.ID) })
	checkRigConnection(t, p.natsServer, o.ID, home.RigIP.String()) // from the rig's home, to the platform's address
	assertNothingListensAtHome(t, home)

	// Pending until the platform's probes pass through the real path; then active.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := p.catalog.Get(b.ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.RigState == catalog.RigActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rig at home is still %s after a minute: %s", got.RigState, got.RigStateReason(time.Now()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}

	// A customer's streamed request, through the gateway, to the rig at home.
	dev, _, secret := b.developer(t, "rig-at-home", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params := chatParams(model, 16)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var res *http.Response
	stream := b.client(secret).Chat.Completions.NewStreaming(b.ctx, params, option.WithResponseInto(&res))
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	id, offering, _ := headersOf(t, res)
	if offering != o.ID || acc.Usage.CompletionTokens != 16 || chunks < 2 {
		t.Fatalf("served by %s in %d chunks with usage %+v; want the rig at home's 16 tokens, streamed", offering, chunks, acc.Usage)
	}
	m := b.metered(t, id)
	want := b.price(t, string(m.tier), m.input, m.output)
	if m.offering != o.ID || m.status != "ok" || m.output != 16 || m.input != acc.Usage.PromptTokens || m.charge != want {
		t.Fatalf("metered %+v; want the rig's %d + 16 tokens charged %s", m, acc.Usage.PromptTokens, want)
	}
	if paid := start - b.balance(t, dev.AccountID); paid != want {
		t.Fatalf("the customer paid %s; want %s", paid, want)
	}
	b.owedOnce(t, id, o, m)
}

// assertNothingListensAtHome checks that no socket in the rig's namespace listens on any address but loopback:
// the agent opened its connection out, and takes none in.
func assertNothingListensAtHome(t *testing.T, home *rignet.Home) {
	t.Helper()
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		out, err := home.Command(t.Context(), "cat", table).Output()
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		sc.Scan() // the header
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			if ip, ok := procNetAddr(f[1]); !ok || !ip.IsLoopback() {
				t.Errorf("something listens in the rig's home at %s (%s)", f[1], table)
			}
		}
	}
}

// procNetAddr reads the address of a /proc/net/tcp local-address field ("0100007F:1F40").
func procNetAddr(field string) (netip.Addr, bool) {
	hexIP, _, ok := strings.Cut(field, ":")
	if !ok {
		return netip.Addr{}, false
	}
	b := make([]byte, len(hexIP)/2)
	for i := range b {
		v, err := strconv.ParseUint(hexIP[2*i:2*i+2], 16, 8)
		if err != nil {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
	}
	// The kernel prints each 32-bit word in host order (little-endian here).
	for w := 0; w+4 <= len(b); w += 4 {
		b[w], b[w+1], b[w+2], b[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	ip, ok := netip.AddrFromSlice(b)
	return ip.Unmap(), ok
}
