//go:build benchharness

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/cmd/internal/devenv"
	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/web/gateway"
)

// benchOptions are bench-gateway's flags.
type benchOptions struct {
	rates        []int
	duration     time.Duration
	warmup       time.Duration
	maxTokens    int
	promptTokens int
	cpuProfile   string
	trace        string
	processes    bool
	compareHop   bool
}

func parseBenchOptions(args []string) (benchOptions, error) {
	o := benchOptions{}
	fs := flag.NewFlagSet("bench-gateway", flag.ContinueOnError)
	rates := fs.String("rates", "1000,2000", "request rates to measure, per second, comma-separated; the last line is the first rate's")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each run lasts at each rate and path (requests: rate x duration)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up on each path at the first rate before measuring")
	fs.IntVar(&o.maxTokens, "max-tokens", 8, "max_tokens of each request")
	fs.IntVar(&o.promptTokens, "prompt-tokens", 16, "length of each prompt in tokens, about")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write CPU profiles during the first segment of each path at the first rate: "+
		"`file` for the gateway's during the gateway run and file.direct for this process's during the direct run; "+
		"with -processes, file is the gateway process's and file.bench this process's during the gateway run")
	fs.StringVar(&o.trace, "trace", "", "write execution traces of this process during the first segment of each path at the first rate: "+
		"`file` during the gateway run and file.direct during the direct run; read with go tool trace "+
		"(-pprof=sched: where goroutines waited for a processor)")
	fs.BoolVar(&o.processes, "processes", false, "run the gateway and the meter each in a `gpumarket serve` process of its own, "+
		"as a deployment does, and print each process's CPU time a request")
	fs.BoolVar(&o.compareHop, "compare-hop", false, "also measure, in the same turns, the gateway calling the rig over a "+
		"keep-alive HTTP connection to the agent's handler instead of over NATS: the best any connection held open "+
		"between the gateway and a rig (a tunnel the agent opened) could do; not with -processes")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.compareHop && o.processes {
		return o, errors.New("-compare-hop measures the gateway in this process: not with -processes")
	}
	for _, s := range strings.Split(*rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || r < 1 {
			return o, fmt.Errorf("-rates: %q is not a whole number of requests per second", s)
		}
		o.rates = append(o.rates, r)
	}
	if o.duration <= 0 || o.warmup < 0 || o.maxTokens < 1 || o.promptTokens < 1 {
		return o, errors.New("-duration, -max-tokens and -prompt-tokens must be positive, -warmup not negative")
	}
	return o, nil
}

const (
	// benchModel is the model of the benchmark's offering: no demo offering serves it, so
	// routing has this one candidate.
	benchModel = "gpumarket-bench/zero-latency"
	// benchKeyRate is the gateway's per-key rate limit (and burst) during the benchmark: far
	// above any rate it measures, so that it never refuses a request.
	benchKeyRate = 1_000_000
	// benchSegment is how long each path is measured at a time before the next takes over.
	benchSegment = 2 * time.Second
	// benchRequestTimeout bounds each request: a zero-latency rig answers in milliseconds.
	benchRequestTimeout = 30 * time.Second
)

// benchGateway is `gpumarket-bench bench-gateway` (make bench-gateway): it measures what the /v1
// gateway adds to a request.
//
//	gpumarket-bench bench-gateway [-rates 1000,2000] [-duration 10s] [-warmup 2s] [-max-tokens 8]
//	                              [-prompt-tokens 16] [-cpuprofile file] [-trace file] [-processes]
//	                              [-compare-hop]
//
// It is built from the platform's package, into the platform binary built with the benchharness
// tag (harness.go), because what it measures is the platform as `gpumarket serve` runs it: the
// same Config, Open, Run and Close, the same embedded NATS, meter, router, admission and request
// log, and the simulated rigs of `gpumarket dev` (rigs.go), none of which is reachable from
// outside this package.
//
// One run, on a fresh database (created on the server of GPUMARKET_TEST_DATABASE_URL, else
// DATABASE_URL, else the PostgreSQL `gpumarket dev postgres` finds or starts; dropped at the
// end) and an embedded NATS server in a temporary directory (benchTempRoot):
//
//  1. The platform runs with its gateway and meter roles (no web role: pages are not what is
//     measured) in this process, or with -processes each in a `gpumarket serve` process of its
//     own, as a deployment runs them (GPUMARKET_ROLES=gateway, GPUMARKET_ROLES=meter), started
//     from this very binary on this process's database and embedded NATS (benchprocess.go).
//     Either way this process holds the embedded NATS server, the demo data, the rig and the
//     load generator. The platform's configuration differs from a default one only in the
//     per-key rate limit, raised far above the rates measured, and loopback allowed for the
//     rig's agent URL; credit is granted by an adjustment and payments are never called. One
//     offering of a model of its own is served by a zero-latency simbackend behind a real
//     gpuagent, both in this process on loopback ports, heartbeating so that routing sees it
//     healthy. A developer account has ample credit and an API key without a monthly limit.
//  2. At each rate, the load generator (cmd/loadgen/load) sends small non-streamed chat
//     completions with Poisson arrivals: first directly to the agent's handler (served for the
//     benchmark on a loopback port: the agent itself listens on none), with a route ticket for
//     the offering signed for the run with the platform's ticket key, then through the
//     gateway's /v1 with the API key (gateway, NATS, the agent's NATS connection, the same handler), on the same arrival schedule and bodies, in the tier the
//     offering is in at the time (routing moves it by its measured latency). A short warm-up on
//     each path comes first. Each path's run is cut in segments of benchSegment that take turns
//     with the other paths' (direct, proxy, gateway, then proxy, gateway, direct, and so on), each
//     turn on an arrival schedule of its own, and a path's segments are merged into one result
//     (load.Merge): the paths meet the machine as it is over the whole measurement, whose speed
//     drifts from one ten seconds to the next. Before each segment the meter is let take every
//     usage event of the last, so that none pays for the metering of another. A third path,
//     measured in the same turns, goes through the standard library's reverse proxy
//     (httputil.ReverseProxy, no check of its own) to the agent with the direct path's ticket:
//     what a bare proxy hop adds on this machine at this moment, the floor the gateway's added
//     latency is read against. With -compare-hop a fourth path takes its turns too: the gateway
//     again, for a customer of its own, with its calls to the rig made over a keep-alive HTTP
//     connection to the agent's handler instead of over NATS (directHop): what the platform's
//     path would cost over a connection held open between the gateway and the rig, the
//     alternative to NATS docs/rig-transport.md weighs.
//
// Per rate it prints the latency at the 50th and 99th percentiles, the throughput achieved and
// the failed requests on each path; failures are listed with their causes, and the latencies
// are of the requests that succeeded. The last lines read
// "gateway: added p50 <X> us, p99 <Y> us at <R> rps; throughput ratio <T>; added p50 / direct
// p50 <A> (a bare reverse proxy's <B>)", one per rate and the first rate's last: X and Y are the
// gateway's percentile less the direct one, T the gateway's achieved throughput over the direct
// one, A is X over the direct p50 and B the same for the bare proxy. All the processes run on
// this machine, so the figures are for its cores shared by all of them. The platform logs at warn level unless
// GPUMARKET_LOG_LEVEL is set (with -processes, each process's log is in the run's data
// directory, and shown when one fails to start); the platform's access log, one line per
// request at info level in production, is not written. Each rate's table is followed by the CPU time each process used a
// request, from the start of a run until the meter has taken its events, and by how busy the
// machine's CPUs were over the same time (every process's, PostgreSQL's included) and how much
// of them the hypervisor gave other guests: a run whose machine was taken is told apart. With -cpuprofile and
// -processes the gateway process's CPU profile over the gateway run at the first rate is read
// from its metrics address (/debug/pprof/profile).
//
// The direct run's requests all carry the run's one ticket, so the meter bills the first of
// them and keeps the others as duplicates; the gateway's each carry their own and are billed.
//
// It prints figures and never fails on them: it fails only when it cannot set up, or when a
// rate's runs completed no request at all.
func benchGateway(ctx context.Context, env Config, args []string) error {
	opts, err := parseBenchOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	// The platform's logs would drown the figures: only warnings and errors, unless
	// GPUMARKET_LOG_LEVEL asks for more.
	level := slog.LevelWarn
	if l, set := logLevel(); set {
		level = l
	}
	quiet := &quietHandler{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}), counts: &logCounts{seen: map[string]int{}}}
	log := slog.New(quiet)
	slog.SetDefault(log)

	summary, err := runBenchGateway(ctx, env, opts, log)
	quiet.counts.report()
	if err != nil {
		return err
	}
	// The summary comes last, once everything is stopped and dropped.
	fmt.Println()
	for _, line := range summary {
		fmt.Println(line)
	}
	return nil
}

// runBenchGateway sets up, measures and tears down, and returns the summary lines.
func runBenchGateway(ctx context.Context, env Config, opts benchOptions, log *slog.Logger) ([]string, error) {
	adminURL := env.TestDatabaseURL
	if adminURL == "" {
		// DATABASE_URL when set, else the PostgreSQL `gpumarket dev postgres` finds or starts.
		var err error
		if adminURL, err = devenv.EnsureTestPostgres(ctx, env.DatabaseURL, env.DataDir, log); err != nil {
			return nil, err
		}
	}
	dbURL, dropDatabase, err := createScratchDatabase(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	defer dropDatabase()
	dataDir, err := os.MkdirTemp(benchTempRoot(), "gpumarket-bench-gateway-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)

	b, err := startBenchPlatform(ctx, dbURL, dataDir, log, benchSetup{p50: 5, p99: 20, processes: opts.processes, compareHop: opts.compareHop})
	if err != nil {
		return nil, err
	}
	defer b.close()
	return b.measure(ctx, opts)
}

// benchTempRoot is where the run's data directory goes: /dev/shm when the machine has it. The
// agent fsyncs each usage event into its outbox before it answers (one fsync shared by the
// requests that end together), and the embedded NATS stores the usage stream under the same
// directory; on a disk each fsync costs milliseconds that depend on the disk, not on the
// gateway. In memory they cost microseconds.
func benchTempRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// createScratchDatabase creates an empty database of its own on the server of adminURL, and
// returns its URL and what drops it. Open migrates it.
func createScratchDatabase(ctx context.Context, adminURL string) (dbURL string, drop func(), err error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("the benchmark needs a postgres:// URL in GPUMARKET_TEST_DATABASE_URL or DATABASE_URL")
	}
	name := "gpumarket_bench_gateway_" + randomHex(6)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to PostgreSQL to create the benchmark's database: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create the benchmark's database: %w", err)
	}
	u.Path = "/" + name
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, adminURL)
		if err == nil {
			defer admin.Close(ctx)
			_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}
		if err != nil {
			benchProgress("could not drop the database %s: %v", name, err)
		}
	}
	return u.String(), drop, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchPlatform is the running platform, its rig and its customer.
type benchPlatform struct {
	p      *Platform
	cfg    Config
	cancel context.CancelFunc
	// gatewayProc and meterProc are the gateway and the meter in processes of their own (benchSetup.processes);
	// nil when they run in p.
	gatewayProc, meterProc *platformProcess
	done                   chan error // Run's result
	rig                    *simulatedRig
	offering               catalog.Offering
	customer               accounts.User
	key                    accounts.APIKey
	secret                 string
	signer                 *ticket.Signer
	proxy                  *http.Server // pathProxy's, once started
	proxyURL               string
	// direct serves the rig's agent handler on a loopback port for the direct path only: the agent itself
	// listens on no port, and the gateway reaches it over NATS.
	direct    *http.Server
	directURL string
	// hop is the gateway's way to the rig when -compare-hop measures pathGatewayHTTP, and that path's customer
	// (an account of its own, so that the platform's records of the two gateway paths stay apart); nil without.
	hop         *directHop
	hopCustomer accounts.User
	hopSecret   string
}

// benchSetup is what a benchmark changes of the platform: its configuration, and the latency the
// offering claims, which decides the tier it is listed in.
type benchSetup struct {
	adjust   func(*Config)
	p50, p99 float64
	// compareHop has the gateway's calls to the rig go through a directHop (bench-gateway -compare-hop).
	compareHop bool
	// processes runs the gateway and the meter each in a `gpumarket serve` process of its own, as a deployment
	// runs them (GPUMARKET_ROLES=gateway, GPUMARKET_ROLES=meter), on this process's database and embedded
	// NATS; this process then holds the NATS server, the rig and the load generator. Otherwise both roles run
	// in this process.
	processes bool
}

// startBenchPlatform opens and runs the platform, lists the benchmark's offering with its rig
// and signs up its customer.
func startBenchPlatform(ctx context.Context, dbURL, dataDir string, log *slog.Logger, setup benchSetup) (_ *benchPlatform, err error) {
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: dataDir, NATSPort: 0,
		SessionKey: randomKey(), TicketKey: randomKey(), RigKey: randomKey(),
		// Payments are never called (credit is granted by an adjustment): a placeholder key
		// keeps Open from starting stripe-mock, and no request goes to Stripe.
		StripeSecretKey: "sk_test_gpumarket_bench_unused", StripeWebhookSecrets: []string{"whsec_gpumarket_bench_unused"},
		Roles: Roles{Gateway: !setup.processes, Meter: !setup.processes}, StreamReplicas: 1,
		// The per-key rate limit (GPUMARKET_RATE_LIMIT_RPS and _BURST, 50/s and 100 by default)
		// would refuse most of the load: far above the rates measured, it refuses nothing.
		RateLimitRPS: benchKeyRate, RateLimitBurst: benchKeyRate}
	if setup.adjust != nil {
		setup.adjust(&cfg)
	}
	var hop *directHop
	if setup.compareHop {
		hop = &directHop{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024,
			IdleConnTimeout: 90 * time.Second}}}
		cfg.wrapRigCalls = func(over gateway.RigCaller) gateway.RigCaller { hop.nats = over; return hop }
	}
	benchProgress("starting the platform (database %s, embedded NATS under %s)", redactedURL(dbURL), dataDir)
	runCtx, cancel := context.WithCancel(ctx)
	p, err := Open(runCtx, cfg, log)
	if err != nil {
		cancel()
		return nil, err
	}
	b := &benchPlatform{p: p, cfg: cfg, cancel: cancel, hop: hop}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if err := p.Seed(ctx); err != nil {
		return nil, err
	}
	if b.signer, err = ticket.NewSigner(cfg.TicketKey); err != nil {
		return nil, err
	}
	b.done = make(chan error, 1)
	go func() { b.done <- p.Run(runCtx) }()
	if setup.processes {
		// The meter first: it makes the usage stream and its consumer, which the rig publishes to.
		benchProgress("starting the meter in a process of its own")
		if b.meterProc, err = startPlatformProcess(ctx, "meter", "meter", dataDir, b.processEnv()); err != nil {
			return nil, err
		}
	} else if err := waitFor(ctx, "the router to load the catalog", func() bool {
		_, err := p.router.Pick(routing.Request{Model: benchModel})
		return !errors.Is(err, routing.ErrNotLoaded)
	}); err != nil {
		return nil, err
	}

	// The customer: a developer with $100,000 of credit (a run costs cents) and a key without
	// a monthly limit; with -compare-hop, another for the gateway path over HTTP.
	if b.customer, b.key, b.secret, err = b.signUpCustomer(ctx, "bench@gateway.example.com", "Gateway benchmark"); err != nil {
		return nil, err
	}
	if hop != nil {
		if b.hopCustomer, _, b.hopSecret, err = b.signUpCustomer(ctx, "bench-http@gateway.example.com", "Gateway benchmark, hop over HTTP"); err != nil {
			return nil, err
		}
	}

	// The offering, listed by a demo provider, and its rig.
	provider, err := p.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		return nil, err
	}
	// bench-gateway claims what a zero-latency rig measures up to: realtime. Routing moves an
	// offering's tier by its measured P99 (routing/tiers.go), so each run asks for the tier it is in then.
	p50, p99, tps := setup.p50, setup.p99, 1000.0
	if b.offering, err = p.catalog.Create(ctx, provider.AccountID, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: benchModel, AskInput: 60_000, AskOutput: 120_000, ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99,
		ClaimedTokensPerSec: &tps}); err != nil {
		return nil, err
	}
	// The benchmark measures the gateway's path, not how a rig qualifies: its rig starts active.
	if err := p.catalog.MarkQualified(ctx, b.offering.ID); err != nil {
		return nil, err
	}
	profile := simulation.Zero()
	profile.Model = benchModel
	if b.rig, err = p.startRig(runCtx, b.offering.ID, provider.AccountID, b.offering.GPU, b.offering.GPUCount, profile); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.direct = &http.Server{Handler: b.rig.agent.Handler(), ReadHeaderTimeout: 10 * time.Second}
	b.directURL = "http://" + ln.Addr().String()
	if hop != nil {
		hop.url.Store(&b.directURL)
	}
	go b.direct.Serve(ln)
	if setup.processes {
		// The gateway last, so that it loads the catalog with the offering in it; ready once its routing is.
		benchProgress("starting the gateway in a process of its own")
		if b.gatewayProc, err = startPlatformProcess(ctx, "gateway", "gateway", dataDir, b.processEnv()); err != nil {
			return nil, err
		}
		benchProgress("gateway at %s, meter at %s; offering %s (%s tier) served by a zero-latency simbackend behind its agent (over NATS; directly at %s)",
			b.gatewayURL(), b.meterProc.URL(), b.offering.ID, b.offering.Tier, b.agentURL())
		return b, nil
	}
	if err := p.router.Refresh(ctx); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "the rig's heartbeat to reach routing", func() bool {
		_, err := p.router.Pick(routing.Request{Model: benchModel, Tier: b.offering.Tier, Offering: b.offering.ID})
		return err == nil
	}); err != nil {
		return nil, err
	}
	benchProgress("platform at %s; offering %s (%s tier) served by a zero-latency simbackend behind its agent (over NATS; directly at %s)",
		p.URL(), b.offering.ID, b.offering.Tier, b.agentURL())
	return b, nil
}

func randomKey() []byte { return []byte(randomHex(32)) }

// signUpCustomer signs up a developer with $100,000 of credit, granted by an adjustment, and an API key
// without a monthly limit.
func (b *benchPlatform) signUpCustomer(ctx context.Context, email, name string) (accounts.User, accounts.APIKey, string, error) {
	p := b.p
	user, err := p.accounts.SignUp(ctx, accounts.SignUpInput{Email: email, Password: demo.Password,
		Role: accounts.RoleDeveloper, AccountName: name})
	if err != nil {
		return user, accounts.APIKey{}, "", err
	}
	admin, err := p.accounts.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		return user, accounts.APIKey{}, "", err
	}
	cr := credits.NewCredits(p.pool, ledger.NewLedger(p.pool, nil), nil, nil)
	if _, err := cr.Adjust(ctx, credits.AdjustInput{AccountID: user.AccountID, Amount: 100_000 * money.PicoPerUSD,
		Reason: "gateway benchmark", ByUserID: admin.ID}); err != nil {
		return user, accounts.APIKey{}, "", err
	}
	key, secret, err := p.accounts.CreateKey(ctx, user, accounts.NewKeyInput{Name: "gateway benchmark"})
	return user, key, secret, err
}

// directHop is the gateway's way to the rig under bench-gateway -compare-hop: over NATS, as always, but during
// pathGatewayHTTP's turns an HTTP/1.1 request on a keep-alive loopback connection to the agent's handler, the
// handler NATS brings the calls to. It stands for any connection held open between the gateway and a rig (a
// tunnel the agent opened, or the dial to the rig the platform no longer makes): none does better than a warm
// connection on the loopback. The platform has no such path; only the benchmark measures it.
type directHop struct {
	nats   gateway.RigCaller
	on     atomic.Bool            // during pathGatewayHTTP's turns
	url    atomic.Pointer[string] // the agent's handler, once served
	client *http.Client
}

var _ gateway.RigCaller = (*directHop)(nil)

func (h *directHop) Call(ctx context.Context, providerID, offeringID, path string, header http.Header, body []byte) (*http.Response, error) {
	base := h.url.Load()
	if !h.on.Load() || base == nil {
		return h.nats.Call(ctx, providerID, offeringID, path, header, body)
	}
	method, rd := http.MethodGet, io.Reader(nil) // as rigwire.Caller: POST with the body, GET when it is nil
	if body != nil {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, *base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	return h.client.Do(req)
}

func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// agentURL is where the direct path reaches the rig's agent: its handler, served on loopback for the benchmark.
func (b *benchPlatform) agentURL() string { return b.directURL }

// gatewayURL is where the gateway serves /v1: its own process's address, else this process's.
func (b *benchPlatform) gatewayURL() string {
	if b.gatewayProc != nil {
		return b.gatewayProc.URL()
	}
	return b.p.URL()
}

// processEnv is the environment of a platform process this one starts: the same database, NATS (with the
// platform's credentials), keys and per-key rate limit, warnings only in its log unless GPUMARKET_LOG_LEVEL says otherwise.
func (b *benchPlatform) processEnv() []string {
	level := "warn"
	if l, set := logLevel(); set {
		level = l.String()
	}
	return []string{"DATABASE_URL=" + b.cfg.DatabaseURL, "NATS_URL=" + b.p.natsPlatformURL,
		"GPUMARKET_SESSION_KEY=" + string(b.cfg.SessionKey), "GPUMARKET_TICKET_KEY=" + string(b.cfg.TicketKey),
		"GPUMARKET_RIG_KEY=" + string(b.cfg.RigKey),
		"GPUMARKET_RATE_LIMIT_RPS=" + strconv.FormatFloat(b.cfg.RateLimitRPS, 'f', -1, 64), "GPUMARKET_RATE_LIMIT_BURST=" + strconv.Itoa(b.cfg.RateLimitBurst),
		"GPUMARKET_STREAM_REPLICAS=1", "GPUMARKET_LOG_LEVEL=" + level}
}

// close stops the gateway, the rig, the meter and the platform, in that order (the rig sends its outbox
// before it stops, for the meter to take), and releases everything.
func (b *benchPlatform) close() {
	if b.gatewayProc != nil {
		b.gatewayProc.stop()
	}
	if b.direct != nil {
		_ = b.direct.Close()
	}
	if b.rig != nil {
		b.rig.stop()
	}
	if b.meterProc != nil {
		b.meterProc.stop()
	}
	b.cancel()
	if b.done != nil {
		if err := <-b.done; err != nil && !errors.Is(err, context.Canceled) {
			benchProgress("the platform stopped with an error: %v", err)
		}
	}
	b.p.Close()
}

// benchPath is how the load generator reaches the rig.
type benchPath string

const (
	pathDirect  benchPath = "direct"
	pathGateway benchPath = "gateway"
	// pathProxy is the standard library's reverse proxy in front of the agent, with no check of
	// its own: the hop any proxy adds on this machine, measured beside the gateway's.
	pathProxy benchPath = "proxy"
	// pathGatewayHTTP is the gateway with its calls to the rig over a keep-alive HTTP connection (directHop):
	// measured with -compare-hop only.
	pathGatewayHTTP benchPath = "gateway-http"
)

// startProxy serves a bare httputil.ReverseProxy to the agent on a loopback port.
func (b *benchPlatform) startProxy() error {
	target, err := url.Parse(b.agentURL())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024, IdleConnTimeout: 90 * time.Second}
	rp.Transport = tr
	b.proxy = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	b.proxy.RegisterOnShutdown(tr.CloseIdleConnections)
	b.proxyURL = "http://" + ln.Addr().String()
	go b.proxy.Serve(ln)
	return nil
}

// loadOptions are a run's options on a path: the same bodies and, at a rate, the same arrival
// schedule on both paths.
func (b *benchPlatform) loadOptions(ctx context.Context, path benchPath, o benchOptions, rate int, d time.Duration, seed uint64) (load.Options, error) {
	current, err := b.p.catalog.Get(ctx, b.offering.ID)
	if err != nil {
		return load.Options{}, err
	}
	tier := string(current.Tier)
	lo := load.Options{Model: benchModel, Endpoint: load.EndpointChat, Rate: float64(rate),
		Requests: max(1, int(math.Round(float64(rate)*d.Seconds()))), MaxTokens: o.maxTokens, PromptTokens: o.promptTokens,
		Timeout: benchRequestTimeout, Seed: seed}
	switch path {
	case pathDirect, pathProxy:
		// One ticket for the run, signed as the gateway signs them: the agent takes it for
		// its offering until it is DefaultTicketMaxAge old.
		now := time.Now()
		tk, err := b.signer.Sign(ticket.Claims{RequestID: services.NewTimeOrderedID("req_", now), AccountID: b.customer.AccountID,
			APIKeyID: b.key.ID, OfferingID: b.offering.ID, Tier: tier, IssuedAt: now})
		if err != nil {
			return lo, err
		}
		lo.URL, lo.Header = b.agentURL()+"/v1", http.Header{ticket.Header: {tk}}
		if path == pathProxy {
			lo.URL = b.proxyURL + "/v1"
		}
	case pathGateway:
		lo.URL, lo.APIKey, lo.Header = b.gatewayURL()+"/v1", b.secret, http.Header{gateway.TierHeader: {tier}}
	case pathGatewayHTTP:
		lo.URL, lo.APIKey, lo.Header = b.gatewayURL()+"/v1", b.hopSecret, http.Header{gateway.TierHeader: {tier}}
	}
	return lo, nil
}

// run is one load run on a path, after the platform has settled from the last.
func (b *benchPlatform) run(ctx context.Context, path benchPath, o benchOptions, rate int, d time.Duration, seed uint64,
	profile, traced string) (load.Result, error) {
	b.settle(ctx)
	lo, err := b.loadOptions(ctx, path, o, rate, d, seed)
	if err != nil {
		return load.Result{}, err
	}
	if path == pathGatewayHTTP {
		b.hop.on.Store(true)
		defer b.hop.on.Store(false)
	}
	if profile != "" && path == pathGateway && b.gatewayProc != nil {
		// The gateway's own process, over the run; this one (the load generator, the rig, NATS) beside it.
		profiled, gatewayProfile := make(chan error, 1), profile
		go func() { profiled <- b.gatewayProc.cpuProfile(ctx, d, gatewayProfile) }()
		defer func() {
			if err := <-profiled; err != nil {
				benchProgress("the gateway's CPU profile: %v", err)
			}
		}()
		profile += ".bench"
	}
	for _, c := range []struct {
		file  string
		start func(io.Writer) error
		stop  func()
	}{{profile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {traced, trace.Start, trace.Stop}} {
		if c.file == "" {
			continue
		}
		f, err := os.Create(c.file)
		if err != nil {
			return load.Result{}, err
		}
		defer f.Close()
		if err := c.start(f); err != nil {
			return load.Result{}, err
		}
		defer c.stop()
	}
	return load.Run(ctx, lo)
}

// settle waits until the meter has taken every usage event of the runs so far and the
// gateway's record is written, then collects garbage, so that each run starts from the same
// quiet state.
func (b *benchPlatform) settle(ctx context.Context) {
	if b.gatewayProc != nil {
		// The gateway's process writes its record every tenth of a second.
		time.Sleep(300 * time.Millisecond)
	} else if err := b.p.requestLog.Flush(ctx); err != nil && ctx.Err() == nil {
		benchProgress("writing the gateway's request record failed: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	quiet := 0
	for quiet < 2 && ctx.Err() == nil {
		if time.Now().After(deadline) {
			benchProgress("the meter has not caught up after 2 minutes; measuring anyway")
			break
		}
		if pending, err := b.meterPending(ctx); err == nil && pending == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	runtime.GC()
}

// meterPending is how many usage events the meter has yet to take or acknowledge.
func (b *benchPlatform) meterPending(ctx context.Context) (uint64, error) {
	cons, err := b.p.js.Consumer(ctx, events.UsageStream, events.UsageConsumer)
	if err != nil {
		return 0, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// measure warms up, then runs both paths at each rate, prints each rate's figures, and returns
// the summary lines: one per rate, the first rate's last.
func (b *benchPlatform) measure(ctx context.Context, o benchOptions) ([]string, error) {
	if err := b.startProxy(); err != nil {
		return nil, err
	}
	defer func() { _ = b.proxy.Shutdown(context.WithoutCancel(ctx)) }()
	all := []benchPath{pathDirect, pathProxy, pathGateway}
	if o.compareHop {
		all = append(all, pathGatewayHTTP)
	}
	if o.warmup > 0 {
		for _, path := range all {
			benchProgress("warming up: %s at %d requests/s for %s", path, o.rates[0], o.warmup)
			res, err := b.run(ctx, path, o, o.rates[0], o.warmup, uint64(o.rates[0]), "", "")
			if err != nil {
				return nil, err
			}
			if res.Completed == 0 {
				return nil, fmt.Errorf("no request of the warm-up %s succeeded: %s", path, describeFailures(res))
			}
		}
	}
	type pair struct {
		rate                  int
		direct, gateway       load.Result
		proxy                 load.Result
		directCPU, gatewayCPU cpuUse
		split                 timeSplit
		hop                   load.Result // pathGatewayHTTP's, with -compare-hop
		hopSplit              timeSplit
	}
	var pairs []pair
	out := os.Stdout
	fmt.Fprintf(out, "gateway benchmark: chat completions of about %d prompt tokens and max_tokens %d, not streamed, "+
		"to a zero-latency simbackend behind its gpuagent; %s per run, Poisson arrivals; %d CPUs\n",
		o.promptTokens, o.maxTokens, o.duration, runtime.GOMAXPROCS(0))
	for i, rate := range o.rates {
		pr := pair{rate: rate}
		// The run on each path is cut in segments that take turns between the paths, each turn
		// starting one path later than the last, so that the paths meet the machine as it is over
		// the whole measurement: these machines' speed drifts from one ten seconds to the next.
		segments := max(1, int(o.duration/benchSegment))
		runs := map[benchPath][]load.Result{}
		var measuredFrom time.Time
		benchProgress("measuring: %s at %d requests/s for %s each, in %d segments of each in turn", pathNames(all), rate, o.duration, segments)
		for seg := range segments {
			paths := append(slices.Clone(all[seg%len(all):]), all[:seg%len(all)]...)
			for _, path := range paths {
				profile, traced := "", ""
				first := i == 0 && seg == 0 && (path == pathDirect || path == pathGateway)
				if first && o.cpuProfile != "" { // the first segment of the direct and gateway paths
					profile = o.cpuProfile
					if path == pathDirect {
						profile += ".direct"
					}
				}
				if first && o.trace != "" {
					traced = o.trace
					if path == pathDirect {
						traced += ".direct"
					}
				}
				b.settle(ctx)
				before, started := b.cpuNow(), time.Now()
				if measuredFrom.IsZero() {
					measuredFrom = started
				}
				res, err := b.run(ctx, path, o, rate, o.duration/time.Duration(segments), uint64(rate)*1000+uint64(seg), profile, traced)
				if err != nil {
					return nil, err
				}
				b.settle(ctx) // the meter's part of the run is done once it has taken the run's events
				used := b.cpuNow().since(before)
				runs[path] = append(runs[path], res)
				if path == pathDirect {
					pr.directCPU = pr.directCPU.plus(used)
				} else if path == pathGateway {
					pr.gatewayCPU = pr.gatewayCPU.plus(used)
				}
			}
		}
		pr.direct, pr.gateway = load.Merge(runs[pathDirect]), load.Merge(runs[pathGateway])
		pr.proxy = load.Merge(runs[pathProxy])
		// Only the gateway's requests have a gateway record: the whole measurement's are its, each gateway path's
		// under its own customer.
		if split, err := b.gatewaySplit(ctx, b.customer.AccountID, measuredFrom, time.Now()); err != nil {
			benchProgress("reading where the gateway's requests spent their time: %v", err)
		} else {
			pr.split = split
		}
		if o.compareHop {
			pr.hop = load.Merge(runs[pathGatewayHTTP])
			if split, err := b.gatewaySplit(ctx, b.hopCustomer.AccountID, measuredFrom, time.Now()); err != nil {
				benchProgress("reading where the gateway's requests over HTTP spent their time: %v", err)
			} else {
				pr.hopSplit = split
			}
		}
		printRate(out, pr.rate, pr.direct, pr.proxy, pr.gateway, pr.hop)
		printCPU(out, pr.direct, pr.gateway, pr.directCPU, pr.gatewayCPU, b.gatewayProc != nil)
		printSplit(out, "gateway", pr.gateway, pr.split)
		if o.compareHop {
			printSplit(out, "gateway-http", pr.hop, pr.hopSplit)
		}
		pairs = append(pairs, pr)
	}
	failed := 0
	for _, pr := range pairs {
		failed += pr.direct.Failed + pr.proxy.Failed + pr.gateway.Failed + pr.hop.Failed
		if pr.direct.Completed == 0 || pr.proxy.Completed == 0 || pr.gateway.Completed == 0 || (o.compareHop && pr.hop.Completed == 0) {
			return nil, fmt.Errorf("at %d requests/s no request succeeded on one of the paths: nothing to compare", pr.rate)
		}
	}
	if failed > 0 {
		fmt.Fprintf(out, "\n%d requests failed (listed above): the latencies are of the requests that succeeded, "+
			"and the throughput counts only those.\n", failed)
	}
	if o.cpuProfile != "" {
		if b.gatewayProc != nil {
			fmt.Fprintf(out, "\nCPU profiles at %d requests/s: %s (the gateway process, gateway run), %s.bench and %s.direct "+
				"(this process, gateway and direct runs); see where the gateway's time goes with\n  go tool pprof -top -cum %s\n",
				o.rates[0], o.cpuProfile, o.cpuProfile, o.cpuProfile, o.cpuProfile)
		} else {
			fmt.Fprintf(out, "\nCPU profiles at %d requests/s: %s (gateway), %s.direct (direct); compare with\n"+
				"  go tool pprof -top -diff_base %s.direct %s\n", o.rates[0], o.cpuProfile, o.cpuProfile, o.cpuProfile, o.cpuProfile)
		}
	}
	// The usage events of the last run are metered before the platform stops, and the gateway's
	// once-a-second write of when keys were last used is let happen.
	b.settle(ctx)
	time.Sleep(1500 * time.Millisecond)
	var summary []string
	for _, pr := range append(pairs[1:], pairs[0]) {
		line := fmt.Sprintf("gateway: added p50 %d us, p99 %d us at %d rps; throughput ratio %.2f; "+
			"added p50 / direct p50 %.2f (a bare reverse proxy's %.2f",
			addedMicros(pr.gateway.LatencyP50Ms, pr.direct.LatencyP50Ms), addedMicros(pr.gateway.LatencyP99Ms, pr.direct.LatencyP99Ms),
			pr.rate, pr.gateway.ReqS/pr.direct.ReqS, addedRatio(pr.gateway, pr.direct), addedRatio(pr.proxy, pr.direct))
		if o.compareHop {
			line += fmt.Sprintf("; the gateway's over a keep-alive HTTP connection to the rig %.2f, throughput ratio %.2f",
				addedRatio(pr.hop, pr.direct), pr.hop.ReqS/pr.direct.ReqS)
		}
		summary = append(summary, line+")")
	}
	return summary, nil
}

// timeSplit is where a gateway run's requests spent their time, at the median, as the platform
// recorded them: the gateway's attempt (its record's duration: from the route ticket to the answer
// relayed) and the agent's handling (the usage event's duration: from the request's arrival at the
// agent to the answer whole).
type timeSplit struct {
	requests         int
	attemptMs, rigMs float64
}

// gatewaySplit reads the medians of the customer's gateway requests between from and to, over
// those the meter has a usage row of.
func (b *benchPlatform) gatewaySplit(ctx context.Context, accountID string, from, to time.Time) (timeSplit, error) {
	attempts, err := requestlog.DurationsOfAccount(ctx, b.p.pool, accountID, from, to)
	if err != nil {
		return timeSplit{}, err
	}
	ids := slices.Collect(maps.Keys(attempts))
	handled, err := metering.DurationsOfRequests(ctx, b.p.pool, ids)
	if err != nil {
		return timeSplit{}, err
	}
	var attemptMs, rigMs []float64
	for id, ms := range handled {
		attemptMs, rigMs = append(attemptMs, attempts[id]), append(rigMs, ms)
	}
	return timeSplit{requests: len(rigMs), attemptMs: median(attemptMs), rigMs: median(rigMs)}, nil
}

// median is the median of v, half way between the middle two when they are two, as
// PostgreSQL's percentile_cont(0.5) interpolates; 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	mid := len(v) / 2
	if len(v)%2 == 1 {
		return v[mid]
	}
	return v[mid-1] + (v[mid]-v[mid-1])/2
}

// printSplit prints where the gateway run's requests spent their time, at the median: what the
// client saw, the gateway's attempt, the agent's handling, and the differences, which are the
// hops and the gateway's own work on either side of its attempt.
func printSplit(out io.Writer, path string, gw load.Result, t timeSplit) {
	if t.requests == 0 {
		return
	}
	client := gw.LatencyP50Ms * 1000
	attempt, rig := t.attemptMs*1000, t.rigMs*1000
	fmt.Fprintf(out, "  where a %s request's time goes, medians of %d requests, us: %.0f at the client; %.0f of them the "+
		"gateway's attempt (from the route ticket to the answer relayed), %.0f of those the agent's handling (its usage "+
		"events' duration); so about %.0f between the client and the attempt (the client's hop and the gateway's "+
		"checks) and %.0f between the attempt and the agent (the gateway's hop to the rig)\n",
		path, t.requests, client, attempt, rig, client-attempt, attempt-rig)
}

// cpuUse is the CPU time each process has used: this one (the load generator, the rig, NATS), the
// gateway's and the meter's.
type cpuUse struct {
	bench, gateway, meter time.Duration
	machine               machineTicks // every CPU of the machine, whatever runs on it
}

// cpuNow is what each process has used so far; only this one's when the roles run in it.
func (b *benchPlatform) cpuNow() cpuUse {
	u := cpuUse{bench: procCPUTime(os.Getpid()), machine: readMachineTicks()}
	if b.gatewayProc != nil {
		u.gateway, u.meter = b.gatewayProc.cpuTime(), b.meterProc.cpuTime()
	}
	return u
}

// plus is u and v together.
func (u cpuUse) plus(v cpuUse) cpuUse {
	return cpuUse{bench: u.bench + v.bench, gateway: u.gateway + v.gateway, meter: u.meter + v.meter,
		machine: machineTicks{busy: u.machine.busy + v.machine.busy, steal: u.machine.steal + v.machine.steal,
			total: u.machine.total + v.machine.total}}
}

func (u cpuUse) since(v cpuUse) cpuUse {
	return cpuUse{bench: u.bench - v.bench, gateway: u.gateway - v.gateway, meter: u.meter - v.meter,
		machine: machineTicks{busy: u.machine.busy - v.machine.busy, steal: u.machine.steal - v.machine.steal,
			total: u.machine.total - v.machine.total}}
}

// machineTicks are the machine's CPU time since boot, in clock ticks, from /proc/stat: busy
// (user, nice, system, irq, softirq: PostgreSQL's and every other process's too), stolen by
// the hypervisor for other guests, and in all. Zero where /proc/stat is not.
type machineTicks struct{ busy, steal, total uint64 }

func readMachineTicks() machineTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTicks{}
	}
	var v [8]uint64
	for i := range v {
		v[i], _ = strconv.ParseUint(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	return machineTicks{busy: v[0] + v[1] + v[2] + v[5] + v[6], steal: v[7], total: v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]}
}

// share is part of the machine's CPU time, in percent, or "-".
func (m machineTicks) share(part uint64) string {
	if m.total == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(m.total), 'f', 0, 64) + "%"
}

// printCPU prints each process's CPU time a request on each path, from the start of a run until
// the meter has taken its events.
func printCPU(out io.Writer, direct, gateway load.Result, dc, gc cpuUse, processes bool) {
	per := func(d time.Duration, r load.Result) string {
		if r.Sent == 0 || d == 0 {
			return "-"
		}
		return strconv.FormatInt(int64(d/time.Microsecond)/int64(r.Sent), 10)
	}
	defer fmt.Fprintf(out, "  the machine's CPUs over each run: busy %s direct, %s gateway (PostgreSQL and every other process "+
		"included); taken by the hypervisor for other guests %s direct, %s gateway\n",
		dc.machine.share(dc.machine.busy), gc.machine.share(gc.machine.busy), dc.machine.share(dc.machine.steal), gc.machine.share(gc.machine.steal))
	if !processes {
		fmt.Fprintf(out, "  CPU a request, us (this process: the gateway, the meter, the load generator, the rig, NATS): %s direct, "+
			"%s gateway\n", per(dc.bench, direct), per(gc.bench, gateway))
		return
	}
	fmt.Fprintf(out, "  CPU a request, us: this process (load generator, rig, NATS) %s direct, %s gateway; "+
		"the gateway process %s; the meter process %s direct, %s gateway\n",
		per(dc.bench, direct), per(gc.bench, gateway), per(gc.gateway, gateway), per(dc.meter, direct), per(gc.meter, gateway))
}

// addedMicros is a-b, both milliseconds, in whole microseconds.
func addedMicros(a, b float64) int64 { return int64(math.Round((a - b) * 1000)) }

// printRate prints a rate's table: each path's latencies, throughput and failures, and what
// the gateway added.
// addedRatio is what a path adds to the direct path's p50, over the direct p50.
func addedRatio(path, direct load.Result) float64 {
	if direct.LatencyP50Ms <= 0 {
		return 0
	}
	return (path.LatencyP50Ms - direct.LatencyP50Ms) / direct.LatencyP50Ms
}

func printRate(out io.Writer, rate int, direct, proxy, gateway, hop load.Result) {
	fmt.Fprintf(out, "\n%d requests/s, %d requests on each path:\n", rate, direct.Requests)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50 us\tp99 us\tmax us\tthroughput rps\tfailed\tsent late p99 ms\t")
	for _, r := range []struct {
		name string
		res  load.Result
	}{{"direct", direct}, {"proxy", proxy}, {"gateway", gateway}, {"gateway-http", hop}} {
		if r.res.Requests == 0 {
			continue // gateway-http without -compare-hop
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%d\t%.2f\t\n", r.name, r.res.LatencyP50Ms*1000, r.res.LatencyP99Ms*1000,
			r.res.LatencyMaxMs*1000, r.res.ReqS, r.res.Failed, r.res.LagP99Ms)
	}
	ratio := 0.0
	if direct.ReqS > 0 {
		ratio = gateway.ReqS / direct.ReqS
	}
	fmt.Fprintf(tw, "proxy added\t%d\t%d\t\t\t\t\t\n", addedMicros(proxy.LatencyP50Ms, direct.LatencyP50Ms),
		addedMicros(proxy.LatencyP99Ms, direct.LatencyP99Ms))
	fmt.Fprintf(tw, "gateway added\t%d\t%d\t\tratio %.2f\t\t\t\n", addedMicros(gateway.LatencyP50Ms, direct.LatencyP50Ms),
		addedMicros(gateway.LatencyP99Ms, direct.LatencyP99Ms), ratio)
	if hop.Requests > 0 && direct.ReqS > 0 {
		fmt.Fprintf(tw, "gateway-http added\t%d\t%d\t\tratio %.2f\t\t\t\n", addedMicros(hop.LatencyP50Ms, direct.LatencyP50Ms),
			addedMicros(hop.LatencyP99Ms, direct.LatencyP99Ms), hop.ReqS/direct.ReqS)
	}
	_ = tw.Flush()
	for _, r := range []struct {
		name string
		res  load.Result
	}{{"direct", direct}, {"proxy", proxy}, {"gateway", gateway}, {"gateway-http", hop}} {
		if r.res.Failed > 0 {
			fmt.Fprintf(out, "  %s: %s\n", r.name, describeFailures(r.res))
		}
		if r.res.LagP99Ms > 10 {
			fmt.Fprintf(out, "  %s: %s\n", r.name, r.res.Note)
		}
	}
}

// describeFailures says how many requests of a run failed and why, by kind with an example.
func describeFailures(r load.Result) string {
	if r.Failed == 0 {
		return "none failed"
	}
	parts := make([]string, 0, len(r.Failures))
	for i, f := range r.Failures {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more kinds", len(r.Failures)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s (e.g. %s)", f.Count, f.Kind, f.Example))
	}
	return fmt.Sprintf("%d of %d failed: %s", r.Failed, r.Sent, strings.Join(parts, "; "))
}

// quietHandler prints the first few log records of each message and counts the others, so
// that a failure repeated at every request does not bury the figures.
type quietHandler struct {
	slog.Handler
	counts *logCounts
}

// logCounts is how many records of each message were logged.
type logCounts struct {
	mu   sync.Mutex
	seen map[string]int
}

// quietRepeats is how many records of one message are printed.
const quietRepeats = 5

func (h *quietHandler) Handle(ctx context.Context, r slog.Record) error {
	h.counts.mu.Lock()
	h.counts.seen[r.Message]++
	n := h.counts.seen[r.Message]
	h.counts.mu.Unlock()
	if n > quietRepeats {
		return nil
	}
	if n == quietRepeats {
		r.AddAttrs(slog.String("bench", "further records of this message are counted, not printed"))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &quietHandler{Handler: h.Handler.WithAttrs(attrs), counts: h.counts}
}

func (h *quietHandler) WithGroup(name string) slog.Handler {
	return &quietHandler{Handler: h.Handler.WithGroup(name), counts: h.counts}
}

// report says how many records of each message were not printed.
func (c *logCounts) report() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for msg, n := range c.seen {
		if n > quietRepeats {
			benchProgress("%d more log records %q were not printed", n-quietRepeats, msg)
		}
	}
}

// benchProgress prints a progress line to stderr.
func benchProgress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-gateway: "+format+"\n", args...)
}

// pathNames lists paths for a progress line: "direct, proxy and gateway".
func pathNames(paths []benchPath) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = string(p)
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
