package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/coreos/go-systemd/v22/unit"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/rigauth"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// TestARigRunsFromItsConnectPage is a provider's rig as the Connect page tells the provider to run it: the page's
// command for this machine's architecture downloads the gpuagent binary the platform publishes, checks its SHA-256
// and runs it, and then its environment file under deploy/gpuagent@.service's command line runs the same binary, in
// an environment holding nothing but what the page shows (no platform secret at all), against the rigs' entry
// point at the URL the page names. The only change the test makes is the inference server's address. The rig
// connects as its own user in the rigs' account, gets routed a request, and the meter meters its usage event.
//
// It runs with the entry point on loopback, and on another address of this machine (the embedded NATS then does
// not listen on loopback at all, so the agent can have reached it only at the address the page showed).
func TestARigRunsFromItsConnectPage(t *testing.T) {
	t.Parallel()
	bin := buildAgent(t)
	t.Run("loopback", func(t *testing.T) { testRigFromConnectPage(t, bin, "127.0.0.1") })
	t.Run("another address of this machine", func(t *testing.T) {
		ip := nonLoopbackAddress(t)
		if ip == "" {
			t.Skip("this machine has no address but loopback (net.InterfaceAddrs): nothing to listen on for rigs elsewhere")
		}
		testRigFromConnectPage(t, bin, ip)
	})
}

func testRigFromConnectPage(t *testing.T, bin, host string) {
	published := filepath.Join(t.TempDir(), "downloads")
	if err := os.MkdirAll(published, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(bin, filepath.Join(published, downloads.AgentName(runtime.GOARCH))); err != nil {
		t.Fatal(err)
	}
	b := setupGatewayConfig(t, func(c *Config) { c.NATSHost, c.DownloadsDir = host, published }, nil)
	p := b.p
	if host != "127.0.0.1" {
		if nc, err := nats.Connect("nats://127.0.0.1:"+strconv.Itoa(p.natsServer.Addr().(*net.TCPAddr).Port),
			nats.NoReconnect(), nats.Timeout(time.Second)); err == nil {
			nc.Close()
			t.Fatalf("the entry point on %s is reachable on loopback too: the test could not tell which address the agent used", host)
		}
	}

	// The offering; the inference server runs beside its agent.
	const model = "rig-entry-model"
	p50, p99, tps := 100.0, 300.0, 1000.0
	o, err := p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: model,
		AskInput: 60_000, AskOutput: 120_000,
		ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	upstream := startInferenceServer(t, model)

	page := connectPage(t, p, "provider@example.com", o.ID)
	command := page.Find(`[data-testid="agent-command"][data-arch="` + runtime.GOARCH + `"]`).Text()
	envFile := page.Find(`[data-testid="agent-env-file"]`).Text()
	wantURL := "nats://" + net.JoinHostPort(host, strconv.Itoa(p.natsServer.Addr().(*net.TCPAddr).Port))
	if got := page.Find(`[data-testid="rig-nats-url"]`).Text(); got != wantURL {
		t.Errorf("the page names the entry point %q, want %q", got, wantURL)
	}
	if warned := page.Find(`[data-testid="nats-loopback"]`).Length() == 1; warned != (host == "127.0.0.1") {
		t.Errorf("with the entry point on %s, the page warns that it is loopback: %v", host, warned)
	}
	if !strings.HasPrefix(command, "curl -fsSLo gpuagent "+p.URL()+"/downloads/"+downloads.AgentName(runtime.GOARCH)+" &&") {
		t.Fatalf("the command does not download the agent the platform publishes:\n%s", command)
	}
	html, _ := page.Html()
	assertNoPlatformSecret(t, p, html)

	_, _, secret := b.developer(t, "rig-entry-"+strings.ReplaceAll(host, ".", "-"), 20*money.PicoPerUSD, accounts.NewKeyInput{})
	serve := func(what string) {
		t.Helper()
		b.eventually(t, what+": the agent connects as the rig's own user", func() bool { return rigConnected(t, p.natsServer, o.ID) })
		checkRigConnection(t, p.natsServer, o.ID, host)
		b.eventually(t, what+": the rig qualifies by the platform's probes and is routed", func() bool {
			_, err := p.router.Pick(routing.Request{Model: model, Tier: o.Tier, Offering: o.ID})
			return err == nil
		})
		var res *http.Response
		chat, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams(model, 5), option.WithResponseInto(&res))
		if err != nil {
			t.Fatalf("%s: a request through the gateway: %v", what, err)
		}
		id, offering, _ := headersOf(t, res)
		if offering != o.ID {
			t.Fatalf("%s: served by %s, want %s", what, offering, o.ID)
		}
		m := b.metered(t, id)
		if m.offering != o.ID || m.status != "ok" || m.output != chat.Usage.CompletionTokens || m.charge <= 0 {
			t.Errorf("%s: metered %+v, want the rig's request of %d output tokens, charged", what, m, chat.Usage.CompletionTokens)
		}
	}

	// The command, as the provider pastes it into a shell.
	if !strings.Contains(command, " -upstream "+agentUpstreamOnPage+" ") {
		t.Fatalf("the command does not forward to %s:\n%s", agentUpstreamOnPage, command)
	}
	stop := runAgent(t, bin, exec.Command("sh", "-c", strings.Replace(command, agentUpstreamOnPage, upstream, 1)), nil)
	serve("the page's command")
	stop()

	// The environment file, under the unit's command line (its outbox, in the state directory systemd would make, in
	// a directory of the test's instead).
	args := unitCommandLine(t)
	for i := range args {
		if i > 0 && args[i-1] == "-outbox" {
			args[i] = filepath.Join(t.TempDir(), "outbox")
		}
	}
	env := parseEnvFile(t, envFile)
	if env["GPUAGENT_UPSTREAM"] != agentUpstreamOnPage {
		t.Fatalf("the environment file does not forward to %s:\n%s", agentUpstreamOnPage, envFile)
	}
	env["GPUAGENT_UPSTREAM"] = upstream
	stop = runAgent(t, bin, exec.Command(bin, args...), env)
	serve("the page's environment file")
	stop()
}

// agentUpstreamOnPage is the inference server's address in the page's command and environment file.
const agentUpstreamOnPage = "http://127.0.0.1:8000"

// TestConnectPageShowsOnlyTheRigsOwnCredential: the page of a rig on the embedded entry point shows its command and
// environment file with the rig's own user and password, and no trace of the platform's: not its NATS password,
// nor any of its keys.
func TestConnectPageShowsOnlyTheRigsOwnCredential(t *testing.T) {
	t.Parallel()
	p := runPlatform(t, testConfig(t, Roles{Web: true, Meter: true}))
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
	page := connectPage(t, p, "provider@example.com", rig.ID)
	html, _ := page.Html()
	assertNoPlatformSecret(t, p, html)
	password := events.RigPassword(p.cfg.RigKey, rig.ID)
	command := page.Find(`[data-testid="agent-command"]`).Text()
	for _, want := range []string{"GPUAGENT_NATS_PASSWORD=" + password + " \\", "-nats " + p.natsURL + " -nats-user " + events.RigUsername(rig.ID),
		"-provider " + rig.ProviderAccountID + " -offering " + rig.ID} {
		if !strings.Contains(command, want) {
			t.Errorf("the command does not hold %q:\n%s", want, command)
		}
	}
	env := parseEnvFile(t, page.Find(`[data-testid="agent-env-file"]`).Text())
	if env["GPUAGENT_NATS_PASSWORD"] != password || env["NATS_URL"] != p.natsURL || env["GPUAGENT_NATS_USER"] != events.RigUsername(rig.ID) {
		t.Errorf("the environment file %v does not hold the rig's credential and the entry point", env)
	}
	if page.Find(`[data-testid="reissue-credential"]`).Length() != 1 {
		t.Error("the page of a rig on the embedded entry point offers no new password")
	}
	// The service: the unit's instance for this rig, reading an environment file of its own, so that a second
	// listing served from the same machine neither overwrites this one's file nor shares its outbox.
	service := page.Find(`[data-testid="agent-service-command"]`).Text()
	envPath := "/etc/gpuagent/" + rig.ID + ".env"
	for _, want := range []string{"sudoedit " + envPath + " ", "/etc/systemd/system/gpuagent@.service ",
		"enable --now gpuagent@" + rig.ID + "\n", "journalctl -u gpuagent@" + rig.ID + " -f"} {
		if !strings.Contains(service, want) {
			t.Errorf("the service's commands do not hold %q:\n%s", want, service)
		}
	}
	if got := page.Find(`[data-testid="agent-env-path"]`).Text(); got != envPath {
		t.Errorf("the page names the environment file %q, want %q", got, envPath)
	}

	// This platform publishes no agent (its downloads directory is empty): the page says so for each architecture
	// and gives no download that would fail, and it warns that the addresses it shows are this machine's loopback.
	for _, arch := range downloads.Arches {
		if page.Find(`[data-testid="download-unavailable-`+arch+`"]`).Length() != 1 {
			t.Errorf("the page does not say the agent for %s is not available for download", arch)
		}
		if c := page.Find(`[data-testid="agent-command"][data-arch="` + arch + `"]`).Text(); strings.Contains(c, "curl") || !strings.HasPrefix(c, "GPUAGENT_OFFERING_KEY=") {
			t.Errorf("with no agent published, the %s command is:\n%s", arch, c)
		}
	}
	for _, warning := range []string{"nats-loopback", "download-loopback"} {
		if page.Find(`[data-testid="`+warning+`"]`).Length() != 1 {
			t.Errorf("the page, served and showing rigs a loopback address, has no %s warning", warning)
		}
	}
}

// TestARigsReissuedCredentialShutsOutTheEarlierOne: re-issuing from the Connect page closes the rig's connection
// within a second, refuses its earlier password and lets the new one in, which the page then shows; delisting the
// offering closes that one within a second too, and refuses the rig altogether.
func TestARigsReissuedCredentialShutsOutTheEarlierOne(t *testing.T) {
	t.Parallel()
	p := runPlatform(t, testConfig(t, Roles{Web: true, Meter: true}))
	ctx := context.Background()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	provider, err := p.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rigs, err := p.catalog.ListOwn(ctx, provider.AccountID)
	if err != nil || len(rigs) == 0 {
		t.Fatalf("the demo provider's rigs: %v, %d", err, len(rigs))
	}
	rig := rigs[0]
	before := events.RigPassword(p.cfg.RigKey, rig.ID)
	connect := func(password string) (*nats.Conn, error) {
		return nats.Connect(p.natsURL, nats.UserInfo(events.RigUsername(rig.ID), password), nats.NoReconnect(),
			nats.CustomInboxPrefix(events.RigInboxPrefix(rig.ProviderAccountID, rig.ID)))
	}
	live, err := connect(before)
	if err != nil {
		t.Fatalf("the rig's first password: %v", err)
	}
	defer live.Close()

	// Someone else's provider cannot re-issue it.
	if code := reissue(t, p, "northwind@example.com", rig.ID); code != http.StatusNotFound {
		t.Errorf("another provider re-issuing the rig's credential: %d, want 404", code)
	}
	start := time.Now()
	if code := reissue(t, p, "provider@example.com", rig.ID); code != http.StatusSeeOther {
		t.Fatalf("re-issuing: %d, want 303", code)
	}
	for deadline := start.Add(time.Second); !live.IsClosed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rig's connection with its earlier password is still open a second after re-issuing")
		}
	}
	if nc, err := connect(before); err == nil {
		nc.Close()
		t.Error("the earlier password still lets the rig in")
	}
	after := events.RigPasswordIssue(p.cfg.RigKey, rig.ID, 2)
	nc, err := connect(after)
	if err != nil {
		t.Fatalf("the new password: %v", err)
	}
	defer nc.Close()
	command := connectPage(t, p, "provider@example.com", rig.ID).Find(`[data-testid="agent-command"]`).Text()
	if !strings.Contains(command, "GPUAGENT_NATS_PASSWORD="+after+" ") || strings.Contains(command, before) {
		t.Errorf("after re-issuing, the page shows:\n%s", command)
	}

	start = time.Now()
	if err := p.catalog.SetStatus(ctx, provider.AccountID, rig.ID, catalog.StatusDelisted); err != nil {
		t.Fatal(err)
	}
	for deadline := start.Add(time.Second); !nc.IsClosed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the delisted rig's connection is still open a second after delisting")
		}
	}
	if nc, err := connect(after); err == nil {
		nc.Close()
		t.Error("the delisted rig's password still lets it in")
	}
}

// connectPage is an offering's Connect page as one of the provider's users sees it.
func connectPage(t *testing.T, p *Platform, email, offeringID string) *goquery.Document {
	t.Helper()
	sess, err := p.accounts.Login(context.Background(), loginAs(email))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, p.URL()+"/provider/rigs/"+offeringID+"/connect", nil)
	req.AddCookie(&http.Cookie{Name: "gpumarket_session", Value: sess.Token})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the Connect page: %d", res.StatusCode)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// reissue posts the Connect page's form as one of a provider's users, and returns the status.
func reissue(t *testing.T, p *Platform, email, offeringID string) int {
	t.Helper()
	sess, err := p.accounts.Login(context.Background(), loginAs(email))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get, _ := http.NewRequest(http.MethodGet, p.URL()+"/provider/rigs", nil)
	get.AddCookie(&http.Cookie{Name: "gpumarket_session", Value: sess.Token})
	res, err := client.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	csrf, _ := doc.Find(`input[name="_csrf"]`).First().Attr("value")
	var cookies []*http.Cookie
	cookies = append(cookies, res.Cookies()...)
	post, _ := http.NewRequest(http.MethodPost, p.URL()+"/provider/rigs/"+offeringID+"/connect",
		strings.NewReader(url.Values{"_csrf": {csrf}}.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.AddCookie(&http.Cookie{Name: "gpumarket_session", Value: sess.Token})
	for _, c := range cookies {
		post.AddCookie(c)
	}
	res, err = client.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// assertNoPlatformSecret fails if a page holds the platform's NATS password or any of its keys.
func assertNoPlatformSecret(t *testing.T, p *Platform, page string) {
	t.Helper()
	u, err := url.Parse(p.nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	platformPassword, ok := u.User.Password()
	if !ok || len(platformPassword) < 32 {
		t.Fatalf("the platform's own NATS connection has no password to look for (%q)", u.Redacted())
	}
	secrets := map[string]string{
		"the platform's NATS password": platformPassword,
		"the rig key":                  string(p.cfg.RigKey),
		"the ticket key":               string(p.cfg.TicketKey),
		"the session key":              string(p.cfg.SessionKey),
		"the rig key, hexadecimal":     fmt.Sprintf("%x", p.cfg.RigKey),
		"the ticket key, hexadecimal":  fmt.Sprintf("%x", p.cfg.TicketKey),
	}
	if p.rigRevoker != nil {
		s, err := url.Parse(p.rigRevoker.NC.ConnectedUrl())
		if err != nil {
			t.Fatal(err)
		}
		secrets["the system account's NATS password"], _ = s.User.Password()
	}
	issuer, err := rigauth.Issuer(p.cfg.RigKey)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := issuer.Seed()
	secrets["the auth callout's signing key"] = string(seed)
	for name, secret := range secrets {
		if secret == "" {
			t.Fatalf("no %s to look for", name)
		}
		if strings.Contains(page, secret) {
			t.Errorf("the Connect page shows %s", name)
		}
	}
	if strings.Contains(page, "gpumarket:") {
		t.Error("the Connect page shows the platform's NATS user in a URL")
	}
}

// agentConnections is how many connections a running agent holds: one, for its usage events, its heartbeats and
// the gateway's calls (agent.Agent.Run).
const agentConnections = 1

// rigConnected says whether the rig's agent is connected and let in: its connections, and no other of the rig's
// user, all in the rigs' account (one the auth callout has not answered yet is in none). The connection its
// preflight opens and closes at start, before the agent serves (named ".../preflight"), is not the agent's.
func rigConnected(t *testing.T, s *server.Server, offeringID string) bool {
	t.Helper()
	conns, err := s.Connz(&server.ConnzOptions{User: events.RigUsername(offeringID), Username: true})
	if err != nil {
		t.Fatal(err)
	}
	agent := 0
	for _, c := range conns.Conns {
		if strings.HasSuffix(c.Name, "/preflight") {
			continue
		}
		if c.Account != natsserver.RigsAccount {
			return false
		}
		agent++
	}
	return agent == agentConnections
}

// checkRigConnection checks that the rig's agent is connected as the rig's own user, in the rigs' account, at the
// entry point's address.
func checkRigConnection(t *testing.T, s *server.Server, offeringID, host string) {
	t.Helper()
	conns, err := s.Connz(&server.ConnzOptions{User: events.RigUsername(offeringID), Username: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(conns.Conns) != agentConnections {
		t.Fatalf("%d connections of %s, want the agent's %d", len(conns.Conns), events.RigUsername(offeringID), agentConnections)
	}
	for _, c := range conns.Conns {
		if c.Account != natsserver.RigsAccount || c.IP != host {
			t.Errorf("the agent is connected in account %q from %s, want %q from %s", c.Account, c.IP, natsserver.RigsAccount, host)
		}
	}
}

// buildAgent builds cmd/gpuagent as a provider would, and returns the binary.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpuagent")
	out, err := exec.Command("go", "build", "-o", bin, "../gpuagent").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/gpuagent: %v\n%s", err, out)
	}
	return bin
}

// runAgent starts the agent's command in a directory of its own, with PATH finding the built binary and the given
// environment and nothing else of this process's, and returns what stops it (SIGTERM, as systemd does).
func runAgent(t *testing.T, bin string, cmd *exec.Cmd, env map[string]string) (stop func()) {
	t.Helper()
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin", "HOME=" + cmd.Dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	// Its own process group, so that stopping the shell stops the agent it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("the agent's log:\n%s", log.String())
		}
	}
	t.Cleanup(stop)
	return stop
}

// unitCommandLine is deploy/gpuagent@.service's ExecStart, without the program.
func unitCommandLine(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../deploy/gpuagent@.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.Deserialize(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		if o.Section == "Service" && o.Name == "ExecStart" {
			return strings.Fields(o.Value)[1:]
		}
	}
	t.Fatal("deploy/gpuagent@.service has no ExecStart")
	return nil
}

// parseEnvFile reads an environment file as systemd's EnvironmentFile does: KEY=VALUE lines, # comments.
func parseEnvFile(t *testing.T, text string) map[string]string {
	t.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	name := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !name.MatchString(k) {
			t.Fatalf("the environment file's line %q is not KEY=VALUE", line)
		}
		env[k] = v
	}
	return env
}

// startInferenceServer is a simbackend serving a model at once, on a free loopback port.
func startInferenceServer(t *testing.T, model string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	profile := simulation.Zero()
	profile.Model = model
	srv := &http.Server{Handler: simulation.NewHandler(simulation.Options{Profile: profile}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// nonLoopbackAddress is an IPv4 address of this machine other than loopback, or "".
func nonLoopbackAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Logf("net.InterfaceAddrs: %v", err)
		return ""
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.To4() == nil || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort(n.IP.String(), "0")); err == nil {
			l.Close()
			return n.IP.String()
		}
	}
	return ""
}
