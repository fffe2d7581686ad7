//go:build linux

// Linux only, as the reliability test: the platform child process is tied to this test process with Pdeathsig.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/rigauth"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The platform killed with SIGKILL under traffic, and started again, ten times: `gpumarket serve` runs as its own
// process, as production does, on a NATS server and rigs that outlive it (each rig a stock gpuagent in front of a
// simulated backend, as a provider runs them), while a client sends 150 requests a second through its gateway. After
// each restart the gateway routes within a second of answering /healthz; in the end every request the client saw
// answered is billed exactly once, for exactly the usage its answer reported, and the customer's balance and the
// providers' payables are their usage rows' sums to the picodollar.
const (
	restartKills      = 10
	restartRate       = 150 // requests per second
	restartUptime     = 1500 * time.Millisecond
	restartTicketKey  = "restart-test-ticket-key-0123456789abcd"
	restartRigKey     = "restart-test-rig-key-0123456789abcdefgh"
	restartRecordWait = 3 * time.Second
)

func TestPlatformRestartsUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the platform ten times under traffic (about 30 seconds)")
	}
	h := setupRestart(t)
	h.start()
	h.waitHealthy()
	load := h.startLoad()

	var recoveries []time.Duration
	for kill := range restartKills {
		time.Sleep(restartUptime)
		h.kill()
		h.start()
		healthy := h.waitHealthy()
		routed := h.waitRouted()
		recoveries = append(recoveries, routed.Sub(healthy))
		t.Logf("kill %d: /healthz after %v, routing %v after /healthz", kill+1, healthy.Sub(h.killedAt).Round(time.Millisecond),
			routed.Sub(healthy).Round(time.Microsecond))
	}
	time.Sleep(restartUptime)
	results := load.stop()

	for i, r := range recoveries {
		if r > time.Second {
			t.Errorf("restart %d routed %v after /healthz, want within a second", i+1, r)
		}
	}
	h.checkBilling(results)
}

// restart is the world around the platform process: its database, NATS, rigs and the binary.
type restart struct {
	t          *testing.T
	ctx        context.Context
	pool       *pgxpool.Pool
	dbURL      string
	bin        string
	dataDir    string
	logPath    string
	addr       string
	nats       []*server.Server // one embedded server, or the nodes of a cluster
	natsPass   string           // the platform's NATS password
	natsURL    string           // with the platform's credentials
	rigs       int              // rigs started, which spread over the NATS nodes
	stripeURL  string
	customer   accounts.User
	secret     string // the customer's API key
	offerings  []catalog.Offering
	process    *meterProcess
	starts     int
	killedAt   time.Time
	httpClient *http.Client
	rigDelay   time.Duration // how long each rig waits before it answers
}

func setupRestart(t *testing.T) *restart { return setupRestartWith(t, restartOptions{}) }

// restartOptions change the world setupRestartWith makes.
type restartOptions struct {
	// rigDelay is how long each rig waits before it answers: the time to first token the gateways measure, and
	// what keeps a rig in the standard tier once its figures are flushed (a P99 under 49.5 ms would promote it to
	// realtime, where requests for the standard tier no longer reach it).
	rigDelay time.Duration
	// natsCluster runs NATS as a cluster of three nodes instead of one server, with no users (the rigs' entry
	// point on a cluster is tested from its configuration file in package rigauth).
	natsCluster bool
}

func setupRestartWith(t *testing.T, opts restartOptions) *restart {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &restart{t: t, ctx: ctx, dataDir: t.TempDir(), httpClient: &http.Client{Timeout: 10 * time.Second}, rigDelay: opts.rigDelay}
	h.pool, h.dbURL = dbtest.NewWithURL(t)
	if err := db.Migrate(ctx, h.pool, nil); err != nil {
		t.Fatal(err)
	}
	h.bin = buildGPUMarket(t, h.dataDir)
	h.logPath = filepath.Join(h.dataDir, "platform.log")
	h.addr = freeAddr(t)
	t.Cleanup(func() {
		if h.process != nil {
			h.process.kill()
		}
		if t.Failed() {
			if out, err := os.ReadFile(h.logPath); err == nil {
				t.Logf("platform log (last 4 KB):\n%s", out[max(0, len(out)-4096):])
			}
		}
	})

	// NATS outlives the platform, letting rigs in as the embedded server does, through the auth callout, answered
	// here while the platform is down (and by the platform too while it runs: one of them answers each rig).
	h.natsPass = randomToken()
	if opts.natsCluster {
		h.nats = startNATSCluster(t) // with no users (the Compose cluster's are in TestClusterFromTheDeployConfig...)
	} else {
		issuer, err := rigauth.Issuer([]byte(restartRigKey))
		if err != nil {
			t.Fatal(err)
		}
		public, _ := issuer.PublicKey()
		ns, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir(), Log: discardLog(),
			Rigs: &natsserver.RigEntry{PlatformUser: "gpumarket", PlatformPassword: h.natsPass,
				SystemUser: "system", SystemPassword: randomToken(), Issuer: public}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		h.nats = []*server.Server{ns}
		nc, err := nats.Connect(withUserInfo(ns.ClientURL(), "gpumarket", h.natsPass), nats.Name("test-rigauth"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		responder := &rigauth.Responder{Issuer: issuer, RigKey: []byte(restartRigKey), Log: discardLog(),
			RigOf: func(ctx context.Context, offeringID string) (string, int, bool) {
				var provider string
				var issue int
				err := h.pool.QueryRow(ctx, `SELECT provider_account_id::text, rig_credential_issue FROM offerings WHERE id::text = $1`,
					offeringID).Scan(&provider, &issue)
				return provider, issue, err == nil
			}}
		if _, err := responder.Serve(nc); err != nil {
			t.Fatal(err)
		}
	}
	h.natsURL = h.platformNATSURL(0)
	h.stripeURL = stripemocktest.Start(t)

	// A provider with two standard offerings, each a stock agent in front of a simulated backend, and a customer
	// with credit and a key.
	acc, err := accounts.NewService(h.pool, accounts.Config{SessionKey: []byte(strings.Repeat("s", 32))})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(h.pool, catalog.Config{})
	if err := cat.EnsureDefaultPrices(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	provider, err := acc.EnsureUser(ctx, "rigs@restart.example.com", demo.Password, accounts.RoleProvider, "Restart Rigs")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := acc.EnsureUser(ctx, "admin@restart.example.com", demo.Password, accounts.RoleAdmin, "Restart Ops")
	if err != nil {
		t.Fatal(err)
	}
	if h.customer, err = acc.EnsureUser(ctx, "customer@restart.example.com", demo.Password, accounts.RoleDeveloper, "Restart Customer"); err != nil {
		t.Fatal(err)
	}
	if _, err := credits.NewCredits(h.pool, ledger.NewLedger(h.pool, nil), nil, nil).Adjust(ctx, credits.AdjustInput{
		AccountID: h.customer.AccountID, Amount: 100 * money.PicoPerUSD, Reason: "restart test", ByUserID: admin.ID}); err != nil {
		t.Fatal(err)
	}
	if _, h.secret, err = acc.CreateKey(ctx, h.customer, accounts.NewKeyInput{Name: "load"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p50, p99, tps := 100.0, 300.0, 1000.0
		o, err := cat.Create(ctx, provider.AccountID, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
			Model: "restart-model", AskInput: money.MicroUSD(50_000 + i*1_000), AskOutput: 100_000,
			ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
		if err != nil {
			t.Fatal(err)
		}
		if err := cat.MarkQualified(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
		h.startRig(o, provider.AccountID)
		h.offerings = append(h.offerings, o)
	}
	return h
}

// platformNATSURL is where the platform connects, with its credentials: the NATS nodes' addresses, starting from
// node first.
func (h *restart) platformNATSURL(first int) string {
	var urls []string
	for k := range h.nats {
		urls = append(urls, withUserInfo(h.nats[(first+k)%len(h.nats)].ClientURL(), "gpumarket", h.natsPass))
	}
	return strings.Join(urls, ",")
}

// startRig runs a provider's rig for the offering: a stock gpuagent in front of a simulated backend, connected to
// NATS with the rig's own credential (on a cluster, each rig to the next node), serving the gateway over it.
func (h *restart) startRig(o catalog.Offering, providerID string) {
	h.t.Helper()
	defer func() { h.rigs++ }()
	profile := simulation.Zero()
	profile.Model = o.Model
	var handler http.Handler = simulation.NewHandler(simulation.Options{Profile: profile})
	if delay := h.rigDelay; delay > 0 {
		sim := handler
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(delay)
			sim.ServeHTTP(w, r)
		})
	}
	backend := httptestServer(h.t, handler)
	a, err := agent.New(agent.Config{Upstream: backend, ProviderID: providerID, OfferingID: o.ID,
		GPUSKU: "rtx-4090", GPUCount: 4, Capacity: 64, NATSURL: h.nats[h.rigs%len(h.nats)].ClientURL(), NATSUser: events.RigUsername(o.ID),
		NATSPassword: events.RigPassword([]byte(restartRigKey), o.ID), OutboxDir: h.t.TempDir(),
		OfferingKey: ticket.OfferingKey([]byte(restartTicketKey), o.ID), Log: discardLog()})
	if err != nil {
		h.t.Fatal(err)
	}
	go func() { _ = a.Run(h.ctx) }()
	h.t.Cleanup(func() { _ = a.Close() })
}

func httptestServer(t *testing.T, handler http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// start runs `gpumarket serve` as production does, on the test's database, NATS and Stripe mock.
func (h *restart) start() {
	h.t.Helper()
	h.starts++
	h.process = h.serve(h.addr, h.dataDir, h.logPath, fmt.Sprintf("start %d", h.starts))
}

// serve starts a `gpumarket serve` process listening on addr with its own data directory, its output appended to
// logPath after a line naming it; extra settings come after the common ones, and win.
func (h *restart) serve(addr, dataDir, logPath, name string, extra ...string) *meterProcess {
	h.t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		h.t.Fatal(err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s ===\n", name)
	cmd := exec.Command(h.bin, "serve")
	cmd.Env = append(environWithout("GPUMARKET_", "DATABASE_URL=", "NATS_URL=", "STRIPE_"),
		"DATABASE_URL="+h.dbURL,
		"NATS_URL="+h.natsURL,
		"GPUMARKET_ADDR="+addr,
		"GPUMARKET_DATA_DIR="+dataDir,
		"GPUMARKET_SESSION_KEY="+strings.Repeat("s", 32),
		"GPUMARKET_TICKET_KEY="+restartTicketKey,
		"GPUMARKET_RIG_KEY="+restartRigKey,
		"GPUMARKET_PAYMENTS=test",
		"STRIPE_API_URL="+h.stripeURL,
		"STRIPE_WEBHOOK_SECRET=whsec_restart_test",
		"GPUMARKET_RATE_LIMIT_RPS=1000",
		"GPUMARKET_RATE_LIMIT_BURST=1000",
		"GPUMARKET_METER_RECORD_WAIT="+restartRecordWait.String(),
	)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	m := &meterProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	return m
}

func (h *restart) kill() {
	h.process.kill()
	h.killedAt = time.Now()
}

// waitHealthy waits until /healthz answers 200 and returns when it did.
func (h *restart) waitHealthy() time.Time {
	h.t.Helper()
	return waitHealthy(h.t, h.addr, h.process, fmt.Sprintf("start %d", h.starts))
}

// waitHealthy waits until the process at addr answers /healthz with 200 and returns when it did.
func waitHealthy(t *testing.T, addr string, process *meterProcess, name string) time.Time {
	t.Helper()
	client := &http.Client{Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if res, err := client.Get("http://" + addr + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return time.Now()
			}
		}
		if process.gone() || time.Now().After(deadline) {
			t.Fatalf("the platform did not become healthy (%s)", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRouted sends requests until one is routed and answered, and returns when it was.
func (h *restart) waitRouted() time.Time {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := h.chat(); r.ok {
			return r.sent
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the platform did not route a request within 30 s of start %d", h.starts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loadResult is one request the client sent, and what it saw.
type loadResult struct {
	sent          time.Time
	ok            bool // answered 200 with a whole body
	requestID     string
	offering      string // the offering that served it
	input, output int64
	streamed      bool // asked for a stream: only then is its time to first token measured
}

// chat sends one small chat completion through the gateway.
func (h *restart) chat() loadResult { return h.chatAt(h.addr, "restart-model", h.secret) }

// chatAt sends one small chat completion for the model, with the API key secret, through the gateway at addr.
func (h *restart) chatAt(addr, model, secret string) loadResult {
	r := loadResult{sent: time.Now()}
	body := `{"model": "` + model + `", "max_tokens": 6, "messages": [{"role": "user", "content": "count to six"}]}`
	req, _ := http.NewRequestWithContext(h.ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := h.httpClient.Do(req)
	if err != nil {
		return r
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return r
	}
	var answer struct {
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(raw, &answer) != nil {
		return r
	}
	r.ok, r.requestID, r.offering = true, res.Header.Get("X-GPUMarket-Request-Id"), res.Header.Get("X-GPUMarket-Offering")
	r.input, r.output = answer.Usage.PromptTokens, answer.Usage.CompletionTokens
	return r
}

// restartLoad sends requests at a steady rate until stopped (startPaced).
type restartLoad struct {
	stopped chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []loadResult
}

func (h *restart) startLoad() *restartLoad { return startPaced(restartRate, h.chat) }

// startPaced calls send rate times a second, each call on its own goroutine, until stopped.
func startPaced(rate int, send func() loadResult) *restartLoad {
	l := &restartLoad{stopped: make(chan struct{})}
	l.wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			l.wg.Go(func() {
				r := send()
				l.mu.Lock()
				l.results = append(l.results, r)
				l.mu.Unlock()
			})
		}
	})
	return l
}

func (l *restartLoad) stop() []loadResult {
	close(l.stopped)
	l.wg.Wait()
	return l.results
}

// billingSummary is what checkBilling found.
type billingSummary struct {
	rows   int // the customer's usage rows
	unseen int // of which for requests the client never saw answered
	paid   money.Pico
}

// checkBilling waits until the meter has caught up, then checks that each answered request is billed once, at its
// answer's usage, and that the money adds up: the customer's balance fell by the sum of its usage rows' charges,
// the providers are owed what their rows earned, and the ledger balances.
func (h *restart) checkBilling(results []loadResult) billingSummary {
	h.t.Helper()
	answered := map[string]loadResult{}
	for _, r := range results {
		if r.ok {
			answered[r.requestID] = r
		}
	}
	h.t.Logf("%d requests sent, %d answered, %d failed", len(results), len(answered), len(results)-len(answered))
	if len(answered) < len(results)/2 {
		h.t.Fatalf("only %d of %d requests were answered", len(answered), len(results))
	}
	type row struct {
		input, output int64
		charge        money.Pico
		status, flag  string
		relayed       bool // the gateway recorded relaying the whole answer
	}
	rows := map[string]row{}
	deadline := time.Now().Add(restartRecordWait + 60*time.Second)
	for {
		list, err := h.pool.Query(h.ctx, `SELECT u.request_id, u.input_tokens, u.output_tokens, u.charge_pico::bigint, u.status,
			coalesce(u.flag, ''), coalesce(g.status = 'ok', false)
			FROM usage_events u LEFT JOIN gateway_requests g USING (request_id) WHERE u.account_id = $1`, h.customer.AccountID)
		if err != nil {
			h.t.Fatal(err)
		}
		clear(rows)
		for list.Next() {
			var id string
			var r row
			if err := list.Scan(&id, &r.input, &r.output, &r.charge, &r.status, &r.flag, &r.relayed); err != nil {
				h.t.Fatal(err)
			}
			rows[id] = r
		}
		list.Close()
		missing := 0
		for id := range answered {
			if _, ok := rows[id]; !ok {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d answered requests are not metered", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var prices catalog.Price
	if err := h.pool.QueryRow(h.ctx, `SELECT input_micro_usd_per_mtok, output_micro_usd_per_mtok FROM prices
		WHERE tier = 'standard' ORDER BY effective_from DESC LIMIT 1`).Scan(&prices.Input, &prices.Output); err != nil {
		h.t.Fatal(err)
	}
	var total money.Pico
	for id, a := range answered {
		r := rows[id]
		want := mustCost(h.t, a.input, a.output, prices.Input, prices.Output)
		if r.input != a.input || r.output != a.output || r.charge != want || r.status != "ok" {
			h.t.Errorf("request %s answered %d in, %d out; billed %+v, want %s", id, a.input, a.output, r, want)
		}
	}
	// The others were in flight when the platform died: their rigs served them, but the client saw no answer. Each
	// is either one the gateway recorded relaying whole (the connection died with the process before the client
	// read it), billed nothing (the gateway recorded the attempt failing, or it produced no output token), or
	// flagged for review: none is billed on the rig's word alone.
	unseen, relayed, free := 0, 0, 0
	for id, r := range rows {
		total += r.charge
		if _, ok := answered[id]; !ok {
			unseen++
			switch {
			case r.relayed && r.flag == "":
				relayed++
			case r.charge == 0 && r.flag == "":
				free++
			case r.flag == "":
				h.t.Errorf("request %s, which the client never saw answered, is billed %s without a flag", id, r.charge)
			}
		}
	}
	var balance, payable, earned int64
	if err := h.pool.QueryRow(h.ctx, `SELECT
			(SELECT balance FROM ledger_accounts WHERE kind = 'customer_credit' AND owner_account_id = $1)::bigint,
			(SELECT coalesce(sum(balance), 0) FROM ledger_accounts WHERE kind = 'provider_payable')::bigint,
			(SELECT coalesce(sum(payable_pico), 0) FROM usage_events)::bigint`, h.customer.AccountID).Scan(&balance, &payable, &earned); err != nil {
		h.t.Fatal(err)
	}
	if money.Pico(balance) != 100*money.PicoPerUSD-total {
		h.t.Errorf("balance %s, want $100 less the %s its usage rows charge", money.Pico(balance), total)
	}
	if payable != earned {
		h.t.Errorf("the providers are owed %s; their usage rows earned %s", money.Pico(payable), money.Pico(earned))
	}
	checkLedgerBalanced(h.t, h.ctx, h.pool)
	h.t.Logf("%d usage rows: %d answers the client saw, %d in flight at a kill (%d relayed whole by the gateway, %d billed "+
		"nothing, %d flagged); the customer paid %s", len(rows), len(answered), unseen, relayed, free, unseen-relayed-free, total)
	return billingSummary{rows: len(rows), unseen: unseen, paid: total}
}
