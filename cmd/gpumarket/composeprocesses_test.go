//go:build linux

// Linux only, as the other tests that run the platform as processes: each is tied to this test process with
// Pdeathsig.

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/batch/s3fake"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/rigauth"
)

// TestComposeProcessesAdmitARig runs deploy/compose.yaml's services as processes on this machine, where no
// container runtime is: each process's command line and environment are the ones Compose loads from the file and
// an env file written from deploy/compose.env.example, changed only where one machine must differ from a compose
// network (composeSubstitutions): each container's hostname is 127.0.0.1, each port a free one, each volume a
// temporary directory, PostgreSQL the test's database, stripe-mock and MinIO the tests' own, the rigs' certificate
// one made here. Three nats-server processes run deploy/nats/nats.conf; the platform binary runs `migrate`, the
// documented `run migrate seed`, each web replica and the meter.
//
// The demo provider lists an offering through a web process's API, opens its Connect page and runs the page's
// command as shown (it downloads the agent from the web process), against a simulated inference server, with an
// environment holding nothing of the platform's. The rig gets in over wss:// as its own user in the rigs'
// account, qualifies through the platform's probes, serves a customer's request sent through a web process with an
// API key made there, and is billed once. Re-issuing its credential closes its connections on every node within a
// second, and the agent, still holding the earlier password, is not let in again.
func TestComposeProcessesAdmitARig(t *testing.T) {
	// Not parallel: its processes bind ports picked before they start, which the package's parallel tests,
	// each starting listeners of their own, took from under it at times. Run alone, before them, it meets none.
	if testing.Short() {
		t.Skip("-short: builds four binaries and runs the compose file's processes")
	}
	begin := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &composeRun{t: t, ctx: ctx, dir: t.TempDir(), ports: map[string]int{}, mounts: map[string]map[string]string{},
		addrs: map[string]string{}}
	c.build()
	c.loadProject()
	t.Logf("%v: binaries built, compose.yaml loaded", time.Since(begin).Round(time.Millisecond))

	// The services, each as its process on this machine, in the order of their depends_on.
	c.pool, c.dbURL = dbtest.NewWithURL(t)
	c.hosts = map[string]string{
		"stripe-mock": hostOf(t, stripemocktest.Start(t)),
		"minio":       hostOf(t, s3fake.Start(t, c.bucket())),
	}
	for _, name := range []string{"nats-1", "nats-2", "nats-3"} {
		c.startNATS(name)
	}
	for _, name := range []string{"nats-1", "nats-2", "nats-3"} {
		c.waitNATSHealthy(name)
	}
	c.runOnce("migrate", nil)
	c.runOnce("migrate", []string{"seed"}) // `docker compose run --rm migrate seed`
	var webs []*replica
	webService := c.project.Services["web"]
	for i := range webService.GetScale() {
		webs = append(webs, c.startPlatform("web", i+1))
	}
	meter := c.startPlatform("meter", 1)
	for _, r := range append(slices.Clone(webs), meter) {
		waitHealthy(t, r.addr, r.process, r.name)
	}
	t.Logf("%v: three NATS nodes, %d web replicas and the meter up", time.Since(begin).Round(time.Millisecond), len(webs))
	web := webs[0]

	// The demo provider lists an offering through the web's API.
	const model = "compose-rig-model"
	provider := login(t, web, "provider@example.com")
	st, body := provider.do(t, web, http.MethodPost, "/api/provider/offerings", map[string]any{
		"gpu": "rtx-4090", "gpu_count": 4, "region": "eu", "model": model,
		catalog.FieldAskInput: "0.06", catalog.FieldAskOutput: "0.12",
		"claimed_ttft_p50_ms": 100, "claimed_ttft_p99_ms": 300, "claimed_tokens_per_second": 1000,
	})
	var o struct {
		ID       string `json:"id"`
		Tier     string `json:"tier"`
		RigState string `json:"rig_state"`
	}
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &o) != nil || o.ID == "" {
		t.Fatalf("listing an offering through the web: %d %s", st, body)
	}
	if o.RigState != string(catalog.RigPending) {
		t.Fatalf("a new listing's rig is %q, want pending", o.RigState)
	}

	// Its Connect page: the wss:// entry point, the command, and nothing of the platform's.
	page := c.connectPage(web, provider, o.ID)
	html, _ := page.Html()
	command := page.Find(`[data-testid="agent-command"][data-arch="` + runtime.GOARCH + `"]`).Text()
	if got, want := page.Find(`[data-testid="rig-nats-url"]`).Text(), c.env["GPUMARKET_RIG_NATS_URL"]; got != want || !strings.HasPrefix(got, "wss://") {
		t.Errorf("the page names the entry point %q, want the env file's %q", got, want)
	}
	if !strings.HasPrefix(command, "curl -fsSLo gpuagent http://"+web.addr+"/downloads/"+downloads.AgentName(runtime.GOARCH)+" &&") ||
		!strings.Contains(command, " -upstream "+agentUpstreamOnPage+" ") {
		t.Fatalf("the command does not download the agent from the web process or forward to %s:\n%s", agentUpstreamOnPage, command)
	}
	c.assertNoComposeSecret("the Connect page", html)

	// The rig: a zero-latency simbackend, and the page's command as the provider pastes it into a shell, its
	// system trusting the entry point's certificate (SSL_CERT_FILE, as a certificate from a public authority would
	// be trusted) and holding nothing else.
	upstream := c.startSimbackend(model)
	agentEnv := map[string]string{"SSL_CERT_FILE": c.certFile}
	shown := strings.Replace(command, agentUpstreamOnPage, upstream, 1)
	c.assertNoComposeSecret("the agent's command", shown)
	for k, v := range agentEnv {
		c.assertNoComposeSecret("the agent's "+k, v)
	}
	runAgent(t, c.bins["gpuagent"], exec.Command("sh", "-c", shown), agentEnv)

	// Let in over wss://, as the rig's own user in the rigs' account.
	var conns map[string][]natsConn
	eventually(t, 20*time.Second, "the agent connects over wss:// as the rig's own user", func() bool {
		conns = c.rigConnections(o.ID)
		n := 0
		for _, cs := range conns {
			for _, cn := range cs {
				if cn.Account != "RIGS" || cn.AuthorizedUser != events.RigUsername(o.ID) || cn.TLSVersion == "" {
					return false
				}
				n++
			}
		}
		return n == agentConnections
	})
	t.Logf("%v: the rig is in, %v", time.Since(begin).Round(time.Millisecond), summarize(conns))

	// Qualified by the platform's probes.
	eventually(t, 60*time.Second, "the rig qualifies by the platform's probes", func() bool {
		st, body := provider.do(t, web, http.MethodGet, "/api/provider/offerings/"+o.ID, nil)
		var got struct {
			RigState string `json:"rig_state"`
		}
		return st == http.StatusOK && json.Unmarshal([]byte(body), &got) == nil && got.RigState == string(catalog.RigActive)
	})
	t.Logf("%v: the rig is active", time.Since(begin).Round(time.Millisecond))

	// A customer with credit (granted by finance through the web) and an API key made through the web.
	dev := login(t, web, "developer@example.com")
	st, body = dev.do(t, web, http.MethodGet, "/api/balance", nil)
	var bal struct {
		AccountID string `json:"account_id"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &bal) != nil || bal.AccountID == "" {
		t.Fatalf("the developer's balance: %d %s", st, body)
	}
	finance := login(t, web, "finance@example.com")
	if st, body := finance.do(t, web, http.MethodPost, "/api/finance/adjustments",
		map[string]string{"account_id": bal.AccountID, "amount_usd": "20", "reason": "compose test credit"}); st != http.StatusCreated {
		t.Fatalf("granting credit: %d %s", st, body)
	}
	_, secret := dev.createKey(t, web, "compose")
	before := c.balance(dev, web)

	// The customer's request, through the last web replica (the gateway there), served by the rig and metered once.
	h := &restart{t: t, ctx: ctx, httpClient: &http.Client{Timeout: 10 * time.Second}}
	var res loadResult
	eventually(t, 15*time.Second, "the gateway routes the customer's request to the rig", func() bool {
		res = h.chatAt(webs[len(webs)-1].addr, model, secret)
		return res.ok
	})
	if res.offering != o.ID || res.output <= 0 {
		t.Fatalf("served by %q with %d output tokens, want the rig %s", res.offering, res.output, o.ID)
	}
	prices, err := catalog.NewService(c.pool, catalog.Config{}).CurrentPrices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	var charge int64
	var status string
	eventually(t, 20*time.Second, "the request is metered", func() bool {
		err := c.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(charge_pico), 0)::bigint, coalesce(min(status), '')
			FROM usage_events WHERE request_id = $1 AND offering_id::text = $2`, res.requestID, o.ID).Scan(&rows, &charge, &status)
		return err == nil && rows > 0
	})
	p := prices[catalog.Tier(o.Tier)]
	in, err1 := money.ChargeFor(res.input, p.Input)
	out, err2 := money.ChargeFor(res.output, p.Output)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	time.Sleep(time.Second) // a second row, if the meter were to write one, would be there by now
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM usage_events WHERE request_id = $1`, res.requestID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || status != "ok" || money.Pico(charge) != in+out {
		t.Fatalf("%d usage rows for the request, status %q, charged %s; want one, ok, charged %s at the %s tier's price",
			rows, status, money.Pico(charge), in+out, o.Tier)
	}
	if paid := before - c.balance(dev, web); paid != money.Pico(charge) {
		t.Fatalf("the customer's balance fell by %s; want the charge %s", paid, money.Pico(charge))
	}
	t.Logf("%v: the request served by the rig and charged %s once", time.Since(begin).Round(time.Millisecond), money.Pico(charge))

	// Re-issuing the rig's credential closes its connections on every node within a second.
	conns = c.rigConnections(o.ID)
	start := time.Now()
	if st := c.reissue(web, provider, o.ID); st != http.StatusSeeOther {
		t.Fatalf("re-issuing the rig's credential: %d, want 303", st)
	}
	for {
		open := 0
		now := c.rigConnections(o.ID)
		for node, cs := range conns {
			for _, cn := range cs {
				if slices.ContainsFunc(now[node], func(x natsConn) bool { return x.CID == cn.CID }) {
					open++
				}
			}
		}
		if open == 0 {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("%d of the rig's connections are still open a second after its credential was re-issued", open)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%v: re-issued; the rig's connections (%v) closed within %v", time.Since(begin).Round(time.Millisecond),
		summarize(conns), time.Since(start).Round(time.Millisecond))

	// The agent, still running with its earlier password, tries again and is refused on every node. A node lists
	// a connection under the name it gave while the auth callout weighs it; let in, it is in the rigs' account.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for node, cs := range c.rigConnections(o.ID) {
			for _, cn := range cs {
				if cn.Account == events.RigsAccount {
					t.Fatalf("the rig is let in again with its earlier password: %+v on %s", cn, node)
				}
			}
		}
	}
}

// composeRun is deploy/compose.yaml's processes on this machine.
type composeRun struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	bins    map[string]string // the built binaries by name
	env     map[string]string // the env file's values
	project *types.Project
	// certFile is the rigs' entry point's certificate, in the directory NATS_RIGS_TLS_DIR names.
	certFile string
	// downloads is the image's /downloads: the agent's binary, as deploy/Dockerfile puts it there.
	downloads string
	// ports are the free ports that stand for the services' ports, by "service-replica:port".
	ports map[string]int
	// hosts are where the services the test runs in its own process listen (host:port), by service name.
	hosts map[string]string
	// mounts are each replica's volumes: its paths in the container, and the directories standing for them.
	mounts map[string]map[string]string
	// addrs are where each platform replica listens (GPUMARKET_ADDR here).
	addrs map[string]string
	// monitor is each NATS node's monitoring address.
	monitor []string
	pool    *pgxpool.Pool
	dbURL   string
}

// composeServices is what runs each service of compose.yaml (without the rigs profile) here. A service the table
// does not know fails the test.
var composeServices = map[string]string{
	"postgres":     "the test's database (dbtest)",
	"nats-1":       "nats-server",
	"nats-2":       "nats-server",
	"nats-3":       "nats-server",
	"stripe-mock":  "stripe-mock (stripemocktest)",
	"minio":        "an S3 store in the test's process (s3fake)",
	"minio-bucket": "s3fake, which starts with the bucket the command makes",
	"migrate":      "gpumarket",
	"web":          "gpumarket",
	"meter":        "gpumarket",
}

// substitution is how a variable of a process's environment in compose.yaml becomes its value on one machine.
type substitution int

const (
	keep         substitution = iota // as compose.yaml and the env file give it
	hostPorts                        // each service:port in it becomes where that service listens here
	listenPort                       // a port the process listens on: the free port standing for it
	listenAddr                       // ":port": the free port standing for it, on 127.0.0.1
	volumePath                       // a path in a mounted volume: the same path in the directory standing for it
	testDatabase                     // the test's database
)

// composeSubstitutions is every variable compose.yaml (and the image, deploy/Dockerfile's ENV) sets for a process
// the test runs, and how it is changed. A variable the table does not know fails the test.
var composeSubstitutions = map[string]substitution{
	// The NATS nodes (deploy/nats/nats.conf).
	"NATS_SERVER_NAME": keep, "NATS_CLIENT_PORT": listenPort, "NATS_HTTP_PORT": listenPort, "NATS_CLUSTER_PORT": listenPort,
	"NATS_RIGS_PORT": listenPort, "NATS_ROUTES": hostPorts, "NATS_STORE_DIR": volumePath,
	"NATS_RIGS_TLS_CERT": volumePath, "NATS_RIGS_TLS_KEY": volumePath,
	"NATS_PLATFORM_PASSWORD": keep, "NATS_SYSTEM_PASSWORD": keep, "NATS_AUTH_CALLOUT_ISSUER": keep,
	// The platform's processes.
	"DATABASE_URL": testDatabase, "NATS_URL": hostPorts, "GPUMARKET_STREAM_REPLICAS": keep, "GPUMARKET_TICKET_KEY": keep,
	"GPUMARKET_ADDR": listenAddr, "GPUMARKET_LOG_LEVEL": keep, "GPUMARKET_ROLES": keep, "GPUMARKET_SESSION_KEY": keep,
	"STRIPE_WEBHOOK_SECRET": keep, "GPUMARKET_PAYMENTS": keep, "STRIPE_API_URL": hostPorts, "GPUMARKET_PUBLIC_URL": keep,
	"GPUMARKET_RIG_KEY": keep, "GPUMARKET_NATS_SYSTEM_URL": hostPorts, "GPUMARKET_RIG_NATS_URL": keep,
	"GPUMARKET_METRICS_TOKEN": keep, "GPUMARKET_BATCH_S3_ENDPOINT": hostPorts, "GPUMARKET_BATCH_S3_BUCKET": keep,
	"GPUMARKET_BATCH_S3_ACCESS_KEY": keep, "GPUMARKET_BATCH_S3_SECRET_KEY": keep,
	// The image's own (deploy/Dockerfile), under the platform's.
	"GPUMARKET_DATA_DIR": volumePath, "GPUMARKET_DOWNLOADS_DIR": volumePath,
}

// composeSecretNames are the env file's secrets: none may reach a rig.
var composeSecretNames = []string{"POSTGRES_PASSWORD", "GPUMARKET_TICKET_KEY", "GPUMARKET_SESSION_KEY", "MINIO_ROOT_PASSWORD",
	"STRIPE_WEBHOOK_SECRET", "NATS_PLATFORM_PASSWORD", "NATS_SYSTEM_PASSWORD", "GPUMARKET_RIG_KEY"}

// build builds the platform, the agent, the simulated inference server and nats-server in one go build.
func (c *composeRun) build() {
	c.t.Helper()
	dir := filepath.Join(c.dir, "bin")
	out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../gpuagent", "../simbackend",
		"github.com/nats-io/nats-server/v2").CombinedOutput()
	if err != nil {
		c.t.Fatalf("go build: %v\n%s", err, out)
	}
	c.bins = map[string]string{}
	for _, name := range []string{"gpumarket", "gpuagent", "simbackend", "nats-server"} {
		c.bins[name] = filepath.Join(dir, name)
		if _, err := os.Stat(c.bins[name]); err != nil {
			c.t.Fatal(err)
		}
	}
	// The image's /downloads: the agent for this machine's architecture, as the Dockerfile builds it.
	c.downloads = filepath.Join(c.dir, "downloads")
	if err := os.MkdirAll(c.downloads, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Link(c.bins["gpuagent"], filepath.Join(c.downloads, downloads.AgentName(runtime.GOARCH))); err != nil {
		c.t.Fatal(err)
	}
}

// port is the free port standing for a port of a service's replica ("nats-1", "web-2"), the same each time.
func (c *composeRun) port(replica string, port int) int {
	key := replica + ":" + strconv.Itoa(port)
	if _, ok := c.ports[key]; !ok {
		c.ports[key] = freePort(c.t)
	}
	return c.ports[key]
}

// loadProject writes the env file from deploy/compose.env.example, every value filled in, and loads
// deploy/compose.yaml with it as Compose does.
func (c *composeRun) loadProject() {
	t := c.t
	t.Helper()
	tlsDir := filepath.Join(c.dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	c.certFile, _ = natstest.WriteCertificate(t, tlsDir) // rigs.crt and rigs.key, as deploy/nats/tls holds them
	key := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	rigKey := key()
	cmd := exec.Command(c.bins["gpumarket"], "nats-issuer")
	cmd.Env = []string{"GPUMARKET_RIG_KEY=" + rigKey}
	issuer, err := cmd.Output()
	if err != nil {
		t.Fatalf("gpumarket nats-issuer: %v", err)
	}
	var rigURLs []string
	for i := range 3 {
		rigURLs = append(rigURLs, "wss://127.0.0.1:"+strconv.Itoa(c.port(fmt.Sprintf("nats-%d-1", i+1), 8443)))
	}
	values := map[string]string{
		"POSTGRES_PASSWORD": "p" + key(), "GPUMARKET_TICKET_KEY": key(), "GPUMARKET_SESSION_KEY": key(),
		"MINIO_ROOT_PASSWORD": "p" + key(), "STRIPE_WEBHOOK_SECRET": "whsec_" + key(),
		"GPUMARKET_PUBLIC_URL":   "http://127.0.0.1:" + strconv.Itoa(c.port("web-1", 8080)),
		"NATS_PLATFORM_PASSWORD": "p" + key(), "NATS_SYSTEM_PASSWORD": "p" + key(), "GPUMARKET_RIG_KEY": rigKey,
		"NATS_AUTH_CALLOUT_ISSUER": strings.TrimSpace(string(issuer)),
		"GPUMARKET_RIG_NATS_URL":   strings.Join(rigURLs, ","),
	}
	// The simulated rigs' values are for --profile rigs, which does not run here: the rig is the provider's own.
	for _, rig := range []string{"RIG1", "RIG2"} {
		for _, v := range []string{"PROVIDER_ID", "OFFERING_ID", "MODEL", "OFFERING_KEY", "NATS_PASSWORD"} {
			values[rig+"_"+v] = ""
		}
	}
	example, err := os.ReadFile(filepath.Join(deployDir, "compose.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	c.env = map[string]string{}
	var file strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(example)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "=")
		v, ok := values[name]
		if !ok {
			t.Fatalf("compose.env.example has %s, which this test does not fill in", name)
		}
		c.env[name] = v
		fmt.Fprintf(&file, "%s=%s\n", name, v)
	}
	// compose.yaml's own defaults that one machine changes: the certificate's directory, and the nodes' entry
	// points published on the ports they listen on here.
	c.env["NATS_RIGS_TLS_DIR"] = tlsDir
	for i := range 3 {
		c.env[fmt.Sprintf("NATS_RIGS_HOST_PORT_%d", i+1)] = strconv.Itoa(c.port(fmt.Sprintf("nats-%d-1", i+1), 8443))
	}
	for _, name := range []string{"NATS_RIGS_TLS_DIR", "NATS_RIGS_HOST_PORT_1", "NATS_RIGS_HOST_PORT_2", "NATS_RIGS_HOST_PORT_3"} {
		fmt.Fprintf(&file, "%s=%s\n", name, c.env[name])
	}
	envFile := filepath.Join(c.dir, "compose.env")
	if err := os.WriteFile(envFile, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(deployDir, "compose.yaml")},
		cli.WithEnvFiles(envFile), cli.WithDotEnv, cli.WithWorkingDirectory(deployDir))
	if err != nil {
		t.Fatal(err)
	}
	if c.project, err = opts.LoadProject(c.ctx); err != nil {
		t.Fatal(err)
	}
	for name := range c.project.Services {
		if _, ok := composeServices[name]; !ok {
			t.Errorf("compose.yaml has a service %s, which this test does not run", name)
		}
	}
	for name := range composeServices {
		if _, ok := c.project.Services[name]; !ok {
			t.Errorf("compose.yaml has no service %s any more", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// The nodes publish their entry point on the ports the env file gives them, which is where they listen here.
	for i := range 3 {
		name := fmt.Sprintf("nats-%d", i+1)
		if !slices.ContainsFunc(c.project.Services[name].Ports, func(p types.ServicePortConfig) bool {
			return p.Target == 8443 && p.Published == c.env[fmt.Sprintf("NATS_RIGS_HOST_PORT_%d", i+1)]
		}) {
			t.Fatalf("%s does not publish its port 8443 on NATS_RIGS_HOST_PORT_%d: %+v", name, i+1, c.project.Services[name].Ports)
		}
	}
}

// bucket is the bucket minio-bucket makes.
func (c *composeRun) bucket() string {
	for _, arg := range c.project.Services["minio-bucket"].Command {
		if b, ok := strings.CutPrefix(arg, "minio/"); ok {
			return b
		}
	}
	c.t.Fatalf("minio-bucket's command %q makes no bucket", c.project.Services["minio-bucket"].Command)
	return ""
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%q is no URL with a host", raw)
	}
	return u.Host
}

var servicePort = regexp.MustCompile(`([a-z][a-z0-9-]*):(\d+)`)

// environment is the service replica's environment on this machine: the image's (for the platform's), then the
// service's, each variable changed as composeSubstitutions says.
func (c *composeRun) environment(service string, replica int) []string {
	t := c.t
	t.Helper()
	s := c.project.Services[service]
	name := fmt.Sprintf("%s-%d", service, replica)
	vars := map[string]string{}
	if strings.HasPrefix(s.Image, "gpumarket:") {
		for k, v := range dockerfileEnv(t) {
			vars[k] = v
		}
	}
	for k, v := range s.Environment {
		if v != nil {
			vars[k] = *v
		}
	}
	// The volumes: a named one is a directory of its own here, a bound one its path; the image's /data is the
	// process's own directory and /downloads the agent's binaries.
	mounts := map[string]string{
		"/data":      filepath.Join(c.dir, "data", name),
		"/downloads": c.downloads,
	}
	dirs := []string{mounts["/data"]}
	for _, v := range s.Volumes {
		switch v.Type {
		case types.VolumeTypeVolume:
			mounts[v.Target] = filepath.Join(c.dir, "volumes", v.Source)
			dirs = append(dirs, mounts[v.Target])
		case types.VolumeTypeBind:
			mounts[v.Target] = v.Source
		}
	}
	c.mounts[name] = mounts
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(c.dir, "data", name)}
	for k, v := range vars {
		sub, ok := composeSubstitutions[k]
		if !ok {
			t.Fatalf("compose.yaml sets %s for %s, which this test does not know", k, service)
		}
		switch sub {
		case hostPorts:
			n := 0
			v = servicePort.ReplaceAllStringFunc(v, func(m string) string {
				sm := servicePort.FindStringSubmatch(m)
				port, _ := strconv.Atoi(sm[2])
				switch {
				case c.hosts[sm[1]] != "":
					n++
					return c.hosts[sm[1]]
				case sm[1] == "nats-1" || sm[1] == "nats-2" || sm[1] == "nats-3":
					n++
					return "127.0.0.1:" + strconv.Itoa(c.port(sm[1]+"-1", port)) // one replica each
				}
				return m
			})
			if n == 0 {
				t.Fatalf("%s's %s=%q names no service this test knows the address of", service, k, v)
			}
		case listenPort:
			port, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s's %s=%q is not a port", service, k, v)
			}
			v = strconv.Itoa(c.port(name, port))
		case listenAddr:
			port, err := strconv.Atoi(strings.TrimPrefix(v, ":"))
			if err != nil || !strings.HasPrefix(v, ":") {
				t.Fatalf("%s's %s=%q is not :port", service, k, v)
			}
			v = "127.0.0.1:" + strconv.Itoa(c.port(name, port))
			c.addrs[name] = v
		case volumePath:
			v = c.mounted(name, v)
		case testDatabase:
			v = c.dbURL
		}
		env = append(env, k+"="+v)
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// mounted is a path inside the replica's container, on this machine.
func (c *composeRun) mounted(replica, path string) string {
	best := ""
	for target := range c.mounts[replica] {
		if (path == target || strings.HasPrefix(path, target+"/")) && len(target) > len(best) {
			best = target
		}
	}
	if best == "" {
		c.t.Fatalf("%s: %s is in no volume", replica, path)
	}
	return filepath.Join(c.mounts[replica][best], strings.TrimPrefix(path, best))
}

// dockerfileEnv is the ENV of deploy/Dockerfile's final image.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "FROM ") {
			clear(env) // only the last stage's
		}
		rest, ok := strings.CutPrefix(line, "ENV ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("deploy/Dockerfile: ENV %q is not KEY=VALUE", rest)
			}
			env[k] = v
		}
	}
	return env
}

// start starts the service replica's command (the image's entry point for the platform's) with its environment,
// its output in a log file shown if the test fails.
func (c *composeRun) start(service string, replica int, args []string) (*meterProcess, string) {
	t := c.t
	t.Helper()
	s := c.project.Services[service]
	name := fmt.Sprintf("%s-%d", service, replica)
	env := c.environment(service, replica)
	var bin string
	switch {
	case strings.HasPrefix(s.Image, "nats:"):
		bin = c.bins["nats-server"]
		for i, a := range args {
			if strings.HasPrefix(a, "/") {
				args[i] = c.mounted(name, a)
			}
		}
	case strings.HasPrefix(s.Image, "gpumarket:") && len(s.Entrypoint) == 0:
		bin = c.bins["gpumarket"] // the image's ENTRYPOINT
	default:
		t.Fatalf("%s runs image %s with entry point %q, which this test cannot run", service, s.Image, s.Entrypoint)
	}
	logPath := filepath.Join(c.dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s %q ===\n", name, args)
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = env, filepath.Join(c.dir, "data", name)
	if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &meterProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		select {
		case <-m.exited:
		default:
			m.kill()
		}
		if t.Failed() {
			if out, err := os.ReadFile(logPath); err == nil {
				var kept []string
				for line := range strings.Lines(string(out)) {
					if !strings.Contains(line, " msg=http ") {
						kept = append(kept, line)
					}
				}
				t.Logf("%s's log, without the access log (last 30 lines):\n%s", name, strings.Join(kept[max(0, len(kept)-30):], ""))
			}
		}
	})
	return m, logPath
}

// startNATS starts a NATS node as its service runs it.
func (c *composeRun) startNATS(service string) {
	c.start(service, 1, slices.Clone([]string(c.project.Services[service].Command)))
}

// waitNATSHealthy waits for the node's own health check (compose.yaml's), and for the cluster's JetStream leader.
func (c *composeRun) waitNATSHealthy(service string) {
	t := c.t
	t.Helper()
	s := c.project.Services[service]
	if s.HealthCheck == nil {
		t.Fatalf("%s has no health check", service)
	}
	probe := ""
	for _, a := range s.HealthCheck.Test {
		if strings.HasPrefix(a, "http://127.0.0.1:") {
			probe = a
		}
	}
	m := regexp.MustCompile(`^http://127\.0\.0\.1:(\d+)(/.*)$`).FindStringSubmatch(probe)
	if m == nil {
		t.Fatalf("%s's health check %q asks no local URL", service, s.HealthCheck.Test)
	}
	port, _ := strconv.Atoi(m[1])
	base := "http://127.0.0.1:" + strconv.Itoa(c.port(service+"-1", port))
	eventually(t, 30*time.Second, service+" is healthy and the cluster has a JetStream leader", func() bool {
		res, err := http.Get(base + m[2])
		if err != nil {
			return false
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return false
		}
		res, err = http.Get(base + "/jsz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		return json.NewDecoder(res.Body).Decode(&jsz) == nil && jsz.Meta != nil && jsz.Meta.Leader != ""
	})
	c.monitor = append(c.monitor, base)
}

// runOnce runs a one-shot service to its end (args instead of its command, as `compose run` does), and requires
// that it succeeded.
func (c *composeRun) runOnce(service string, args []string) {
	c.t.Helper()
	if args == nil {
		args = slices.Clone([]string(c.project.Services[service].Command))
	}
	m, logPath := c.start(service, 1, args)
	select {
	case <-m.exited:
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("%s %q did not finish in 2 minutes", service, args)
	}
	if !m.cmd.ProcessState.Success() {
		out, _ := os.ReadFile(logPath)
		c.t.Fatalf("%s %q: %v\n%s", service, args, m.cmd.ProcessState, out)
	}
}

// startPlatform starts a replica of a platform service with its command.
func (c *composeRun) startPlatform(service string, n int) *replica {
	c.t.Helper()
	m, logPath := c.start(service, n, slices.Clone([]string(c.project.Services[service].Command)))
	name := fmt.Sprintf("%s-%d", service, n)
	return &replica{name: name, addr: c.addrs[name], logPath: logPath, process: m}
}

// natsConn is a connection as a node's monitoring endpoint (/connz?auth=true) lists it.
type natsConn struct {
	CID            uint64 `json:"cid"`
	Name           string `json:"name"`
	Account        string `json:"account"`
	AuthorizedUser string `json:"authorized_user"`
	TLSVersion     string `json:"tls_version"`
}

// rigConnections are the rig's agent's connections on each node (by monitoring address); the one its preflight
// opens and closes at start is not the agent's.
func (c *composeRun) rigConnections(offeringID string) map[string][]natsConn {
	t := c.t
	t.Helper()
	out := map[string][]natsConn{}
	for _, base := range c.monitor {
		res, err := http.Get(base + "/connz?auth=true&limit=1024&user=" + url.QueryEscape(events.RigUsername(offeringID)))
		if err != nil {
			t.Fatal(err)
		}
		var connz struct {
			Conns []natsConn `json:"connections"`
		}
		err = json.NewDecoder(res.Body).Decode(&connz)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, cn := range connz.Conns {
			if !strings.HasSuffix(cn.Name, "/preflight") {
				out[base] = append(out[base], cn)
			}
		}
	}
	return out
}

// summarize says how many connections are on which node.
func summarize(conns map[string][]natsConn) string {
	var parts []string
	for base, cs := range conns {
		if len(cs) > 0 {
			parts = append(parts, fmt.Sprintf("%d on %s", len(cs), base))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// startSimbackend runs the built simbackend with no latency for the model, on a free port, and returns its URL.
func (c *composeRun) startSimbackend(model string) string {
	t := c.t
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.CommandContext(c.ctx, c.bins["simbackend"], "-zero", "-model", model, "-addr", addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	eventually(t, 10*time.Second, "the simbackend answers", func() bool {
		res, err := http.Get("http://" + addr + "/v1/models")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return "http://" + addr
}

// assertNoComposeSecret fails if text holds any of the env file's secrets, or the auth callout's signing key.
func (c *composeRun) assertNoComposeSecret(what, text string) {
	t := c.t
	t.Helper()
	for _, name := range composeSecretNames {
		if v := c.env[name]; len(v) < 16 {
			t.Fatalf("the env file's %s is %q: nothing to look for", name, v)
		} else if strings.Contains(text, v) {
			t.Errorf("%s holds the platform's %s", what, name)
		}
	}
	issuer, err := rigauth.Issuer([]byte(c.env["GPUMARKET_RIG_KEY"]))
	if err != nil {
		t.Fatal(err)
	}
	if seed, _ := issuer.Seed(); strings.Contains(text, string(seed)) {
		t.Errorf("%s holds the auth callout's signing key", what)
	}
	if strings.Contains(text, "gpumarket:") || strings.Contains(text, "system:") {
		t.Errorf("%s names a platform NATS user in a URL", what)
	}
}

// connectPage is the offering's Connect page as the provider's browser sees it on the replica.
func (c *composeRun) connectPage(r *replica, s browserSession, offeringID string) *goquery.Document {
	t := c.t
	t.Helper()
	st, body := s.do(t, r, http.MethodGet, "/provider/rigs/"+offeringID+"/connect", nil)
	if st != http.StatusOK {
		t.Fatalf("the Connect page: %d", st)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// reissue posts the Connect page's form that re-issues the rig's credential, and returns the status.
func (c *composeRun) reissue(r *replica, s browserSession, offeringID string) int {
	t := c.t
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/provider/rigs/"+offeringID+"/connect",
		strings.NewReader(url.Values{"_csrf": {s.csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: s.session})
	req.AddCookie(&http.Cookie{Name: csrfCookieName, Value: s.csrf})
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// balance is the account's balance as the web reports it to its owner.
func (c *composeRun) balance(s browserSession, r *replica) money.Pico {
	t := c.t
	t.Helper()
	st, body := s.do(t, r, http.MethodGet, "/api/balance", nil)
	var b struct {
		Pico json.Number `json:"balance_pico"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if st != http.StatusOK || dec.Decode(&b) != nil {
		t.Fatalf("the balance: %d %s", st, body)
	}
	n, err := strconv.ParseInt(strings.Trim(b.Pico.String(), `"`), 10, 64)
	if err != nil {
		t.Fatalf("the balance %q: %v", b.Pico, err)
	}
	return money.Pico(n)
}

// eventually polls cond until it holds, or fails the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
