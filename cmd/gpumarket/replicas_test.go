//go:build linux

// Linux only, as the restart test whose world it reuses: the platform processes are tied to this test process with
// Pdeathsig.

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/rigaddr"
)

// Two `gpumarket serve` replicas, A and B, each its own process with its own port and data directory, on one
// PostgreSQL database and a three-node NATS cluster (external to both, as production's is; each replica connects
// first to a node of its own), with the same session, ticket and rig keys, in front of the same rigs
// (docs/deploy.md, "Replicas"):
//   - a session cookie made by logging in on A is valid on B, and its CSRF token too; logging out on B ends it on A;
//   - an API key created on A works on B; the key revoked on A is refused by B within a second;
//   - a key's rate limit is each replica's own: with A's bucket empty, B still admits the key a whole burst;
//   - the routing figures A measures reach B: with A killed, B writes to the catalog the figures of requests
//     only A routed;
//   - both replicas' meters take their share of the one durable consumer;
//   - A is killed with SIGKILL while clients send chat completions through both: B answers every request sent to
//     it, and once metering settles every request answered 200 has exactly one usage row, each request in flight
//     on A at the kill has at most one, the customer's balance fell by the sum of its usage rows' charges, and the
//     ledger balances.
const (
	// replicaRoles is what each replica runs (GPUMARKET_ROLES).
	replicaRoles = "web,gateway,meter"
	// replicaRigDelay keeps the rigs in the standard tier: a measured P99 below 49.5 ms would promote them.
	replicaRigDelay = 60 * time.Millisecond
	// The key rate limit each replica applies (GPUMARKET_RATE_LIMIT_RPS and _BURST).
	replicaRatePerSec = 100
	replicaBurst      = 100
	// replicaLoadRate is the chat completions a second the clients send through each replica.
	replicaLoadRate = 40
	// replicaAckWait is how soon the events a killed replica's meter held unacknowledged go to the other.
	replicaAckWait = 2 * time.Second
	// replicaFigures requests, more than catalog.MinMeasuredRequests, go to the figures model through A only.
	replicaFigures      = 120
	replicaFiguresModel = "replicas-figures"
	// replicaRevokeWithin is how soon the replica that did not revoke a key must refuse it.
	replicaRevokeWithin = time.Second
)

// replica is one platform process of the two.
type replica struct {
	name        string
	addr        string
	metricsAddr string
	logPath     string
	process     *meterProcess
}

func TestTwoReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two platform processes and kills one under traffic (about 40 seconds)")
	}
	begin := time.Now()
	h := setupRestartWith(t, restartOptions{rigDelay: replicaRigDelay, natsCluster: true})
	figures := h.listFiguresOffering()
	t.Logf("%v: the binary built, PostgreSQL, three NATS nodes and three rigs ready", time.Since(begin).Round(time.Millisecond))

	a, b := h.startReplica("A", 0), h.startReplica("B", 1)
	var results []loadResult
	for _, r := range []*replica{a, b} {
		waitHealthy(t, r.addr, r.process, "replica "+r.name)
		results = append(results, h.waitRoutedAt(r, "restart-model")...)
	}
	results = append(results, h.waitRoutedAt(a, replicaFiguresModel)...)
	t.Logf("%v: both replicas route", time.Since(begin).Round(time.Millisecond))

	// Sessions, keys and their revocation.
	sess := login(t, a, "customer@restart.example.com")
	results = append(results, h.checkSessionsAndKeys(a, b, sess)...)
	h.checkRateLimitsPerReplica(a, b, sess)
	if st, _ := sess.do(t, b, http.MethodPost, "/logout", nil); st != http.StatusSeeOther {
		t.Fatalf("logging out on B: %d, want 303", st)
	}
	if st, _ := sess.do(t, a, http.MethodGet, "/api/keys", nil); st != http.StatusUnauthorized {
		t.Errorf("A answers the session logged out on B with %d, want 401", st)
	}

	// Routing figures: requests routed by A alone.
	results = append(results, h.figuresThroughA(a, figures)...)

	// Traffic through both; A killed part-way.
	loadA := startPaced(replicaLoadRate, func() loadResult { return h.chatAt(a.addr, "restart-model", h.secret) })
	loadB := startPaced(replicaLoadRate, func() loadResult { return h.chatAt(b.addr, "restart-model", h.secret) })
	time.Sleep(1500 * time.Millisecond)
	storedA, storedB := h.waitBothMeter(a, b)
	t.Logf("before the kill A's meter stored %v usage events and B's %v: both take from the one consumer", storedA, storedB)
	a.process.kill()
	killedAt := time.Now()
	t.Logf("%v: A killed", time.Since(begin).Round(time.Millisecond))
	time.Sleep(2500 * time.Millisecond)
	resultsA, resultsB := loadA.stop(), loadB.stop()

	failedA, afterKillB := 0, 0
	for _, r := range resultsA {
		if !r.ok {
			failedA++
		}
	}
	for _, r := range resultsB {
		switch {
		case !r.ok:
			t.Errorf("B failed a request sent %v after the kill", r.sent.Sub(killedAt).Round(time.Millisecond))
		case r.sent.After(killedAt):
			afterKillB++
		}
	}
	if want := replicaLoadRate; afterKillB < want {
		t.Errorf("B answered %d requests sent after A was killed, want at least %d", afterKillB, want)
	}
	t.Logf("through A: %d requests, %d failed (in flight at the kill or sent after it); through B: %d, %d after the kill, all answered",
		len(resultsA), failedA, len(resultsB), afterKillB)
	results = append(append(results, resultsA...), resultsB...)

	h.checkFiguresReachB(figures, results)
	summary := h.checkBilling(results)
	if summary.unseen > failedA {
		t.Errorf("%d usage rows for requests no client saw answered, but only %d requests failed, all on A", summary.unseen, failedA)
	}
	t.Logf("%d requests in flight on A at the kill were billed once, the other %d of A's failures not at all; took %v",
		summary.unseen, failedA-summary.unseen, time.Since(begin).Round(time.Millisecond))
}

// listFiguresOffering lists a standard offering of its own model, served by a rig like the others.
func (h *restart) listFiguresOffering() catalog.Offering {
	h.t.Helper()
	cat := catalog.NewService(h.pool, catalog.Config{Rigs: rigaddr.Policy{Development: true}})
	p50, p99, tps := 100.0, 300.0, 1000.0
	o, err := cat.Create(h.ctx, h.offerings[0].ProviderAccountID, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: replicaFiguresModel, AskInput: 50_000, AskOutput: 100_000, AgentURL: "http://127.0.0.1:1",
		ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		h.t.Fatal(err)
	}
	h.startRig(o, o.ProviderAccountID)
	return o
}

// startNATSCluster starts three nats-server nodes with JetStream, clustered on loopback, each with its own store,
// and waits until they have a JetStream leader.
func startNATSCluster(t *testing.T) []*server.Server {
	t.Helper()
	var ports []int // a client and a cluster port per node
	for range 6 {
		_, port, err := net.SplitHostPort(freeAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		ports = append(ports, n)
	}
	var routes []string
	for i := range 3 {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[3+i]))
	}
	store := t.TempDir()
	nodes := make([]*server.Server, 3)
	for i := range nodes {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("nats-%d", i+1), Host: "127.0.0.1", Port: ports[i],
			JetStream: true, StoreDir: filepath.Join(store, fmt.Sprintf("nats-%d", i+1)),
			Cluster: server.ClusterOpts{Name: "gpumarket", Host: "127.0.0.1", Port: ports[3+i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
			NoLog:   true, NoSigs: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("NATS node %d is not ready for clients", i+1)
		}
		nodes[i] = s
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(nodes, (*server.Server).JetStreamIsLeader) {
		if time.Now().After(deadline) {
			t.Fatal("the three NATS nodes elected no JetStream leader within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nodes
}

// startReplica starts a replica on a port, a metrics port and a data directory of its own, connected first to
// NATS node first.
func (h *restart) startReplica(name string, first int) *replica {
	h.t.Helper()
	r := &replica{name: name, addr: freeAddr(h.t), metricsAddr: freeAddr(h.t), logPath: filepath.Join(h.dataDir, "replica-"+name+".log")}
	r.process = h.serve(r.addr, h.t.TempDir(), r.logPath, "replica "+name,
		"NATS_URL="+h.platformNATSURL(first),
		"GPUMARKET_STREAM_REPLICAS="+strconv.Itoa(len(h.nats)),
		"GPUMARKET_ROLES="+replicaRoles,
		"GPUMARKET_METRICS_ADDR="+r.metricsAddr,
		"GPUMARKET_RATE_LIMIT_RPS="+strconv.Itoa(replicaRatePerSec),
		"GPUMARKET_RATE_LIMIT_BURST="+strconv.Itoa(replicaBurst),
		"GPUMARKET_STREAM_ACK_WAIT="+replicaAckWait.String(),
	)
	h.t.Cleanup(func() {
		if !r.process.killed {
			r.process.kill()
		}
		if h.t.Failed() {
			if out, err := os.ReadFile(r.logPath); err == nil {
				var kept []string
				for line := range strings.Lines(string(out)) {
					if !strings.Contains(line, " msg=http ") { // the access log says nothing the test does not
						kept = append(kept, line)
					}
				}
				tail := strings.Join(kept[max(0, len(kept)-40):], "")
				h.t.Logf("replica %s log, without the access log (last 40 lines):\n%s", name, tail)
			}
		}
	})
	return r
}

// waitRoutedAt sends requests for the model through the replica until one is answered, and returns them all.
func (h *restart) waitRoutedAt(r *replica, model string) []loadResult {
	h.t.Helper()
	var sent []loadResult
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := h.chatAt(r.addr, model, h.secret)
		sent = append(sent, res)
		if res.ok {
			return sent
		}
		if r.process.gone() || time.Now().After(deadline) {
			h.t.Fatalf("replica %s did not route %s within 30 s", r.name, model)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// browserSession is a logged-in browser: its session cookie and its CSRF cookie, which forms and state-changing
// calls repeat in X-CSRF-Token.
type browserSession struct {
	session, csrf string
}

var noRedirects = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// login logs in on the replica's login form, as a browser does.
func login(t *testing.T, r *replica, email string) browserSession {
	t.Helper()
	res, err := noRedirects.Get("http://" + r.addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var s browserSession
	for _, c := range res.Cookies() {
		if c.Name == csrfCookieName {
			s.csrf = c.Value
		}
	}
	if s.csrf == "" {
		t.Fatalf("GET /login on %s set no %s cookie", r.name, csrfCookieName)
	}
	form := url.Values{"email": {email}, "password": {demo.Password}, "_csrf": {s.csrf}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: csrfCookieName, Value: s.csrf})
	if res, err = noRedirects.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == sessionCookieName {
			s.session = c.Value
		}
	}
	if res.StatusCode != http.StatusSeeOther || s.session == "" {
		t.Fatalf("logging in on %s: %d, session cookie %q", r.name, res.StatusCode, s.session)
	}
	return s
}

// The cookies' names, as web/session.go sets them.
const (
	sessionCookieName = "gpumarket_session"
	csrfCookieName    = "gpumarket_csrf"
)

// do sends a request with the browser's cookies and CSRF token to the replica, and returns the status and body.
func (s browserSession) do(t *testing.T, r *replica, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, "http://"+r.addr+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-CSRF-Token", s.csrf)
	req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: s.session})
	req.AddCookie(&http.Cookie{Name: csrfCookieName, Value: s.csrf})
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// createKey creates an API key on the replica with the browser's session.
func (s browserSession) createKey(t *testing.T, r *replica, name string) (id, secret string) {
	t.Helper()
	st, body := s.do(t, r, http.MethodPost, "/api/keys", map[string]string{"name": name})
	var k struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &k) != nil || k.Key == "" {
		t.Fatalf("creating a key on %s: %d %s", r.name, st, body)
	}
	return k.ID, k.Key
}

// models calls GET /v1/models on the replica with the API key secret and returns the status and Retry-After.
func models(t *testing.T, r *replica, secret string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.addr+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Retry-After")
}

// checkSessionsAndKeys: the session made on A is valid on B, and a forged one is not; a key created on A serves
// on B; revoked on A, B refuses it within replicaRevokeWithin. It returns the chat completions it sent.
func (h *restart) checkSessionsAndKeys(a, b *replica, sess browserSession) []loadResult {
	t := h.t
	t.Helper()
	if st, body := sess.do(t, b, http.MethodGet, "/api/keys", nil); st != http.StatusOK || !strings.Contains(body, `"name":"load"`) {
		t.Errorf("B answers the session made on A with %d %s, want 200 and the account's keys", st, body)
	}
	forged := sess
	forged.session = sess.session[:len(sess.session)-2] + "xx"
	if st, _ := forged.do(t, b, http.MethodGet, "/api/keys", nil); st != http.StatusUnauthorized {
		t.Errorf("B answers a forged session with %d, want 401", st)
	}

	id, secret := sess.createKey(t, a, "made on A")
	for i := range 3 { // B now has the key in its cache
		if st, _ := models(t, b, secret); st != http.StatusOK {
			t.Fatalf("call %d on B with the key made on A: %d, want 200", i+1, st)
		}
	}
	chat := h.chatAt(b.addr, "restart-model", secret)
	if !chat.ok {
		t.Errorf("B did not answer a chat completion with the key made on A")
	}

	sent := time.Now()
	if st, body := sess.do(t, a, http.MethodDelete, "/api/keys/"+id, nil); st != http.StatusNoContent {
		t.Fatalf("revoking the key on A: %d %s", st, body)
	}
	answered := time.Now()
	var refused time.Time
	for {
		if st, _ := models(t, b, secret); st == http.StatusUnauthorized {
			refused = time.Now()
			break
		}
		if time.Since(answered) > 5*time.Second {
			t.Fatal("B still serves the key revoked on A 5 s after the revocation")
		}
		time.Sleep(2 * time.Millisecond)
	}
	delay := refused.Sub(answered)
	t.Logf("B refused the key revoked on A %v after A answered the revocation (%v after it was sent)",
		delay.Round(time.Microsecond), refused.Sub(sent).Round(time.Microsecond))
	if delay > replicaRevokeWithin {
		t.Errorf("B refused the revoked key %v after the revocation, want within %v", delay, replicaRevokeWithin)
	}
	if st, _ := models(t, a, secret); st != http.StatusUnauthorized {
		t.Errorf("A answers the key it revoked with %d, want 401", st)
	}
	return []loadResult{chat}
}

// checkRateLimitsPerReplica: each replica keeps its own bucket per key (docs/deploy.md, "Replicas"). A key
// spends A's bucket until A refuses it; B then still admits it a whole burst, so that the two together admit more
// than one bucket shared between them could have.
func (h *restart) checkRateLimitsPerReplica(a, b *replica, sess browserSession) {
	t := h.t
	t.Helper()
	_, secret := sess.createKey(t, b, "rate limited") // made on B, with A's session and CSRF token
	spend := func(r *replica) int {
		for admitted := 0; admitted < 10*replicaBurst; admitted++ {
			st, retryAfter := models(t, r, secret)
			switch {
			case st == http.StatusTooManyRequests && retryAfter != "":
				return admitted
			case st != http.StatusOK:
				t.Fatalf("replica %s answered the key %d (Retry-After %q) after %d admitted", r.name, st, retryAfter, admitted)
			}
		}
		t.Fatalf("replica %s never limited the key", r.name)
		return 0
	}
	start := time.Now()
	onA := spend(a)
	onB := spend(b)
	elapsed := time.Since(start)
	shared := replicaBurst + int(replicaRatePerSec*elapsed.Seconds())
	t.Logf("the key was admitted %d times by A, then %d by B, in %v (one shared bucket: at most %d)",
		onA, onB, elapsed.Round(time.Millisecond), shared)
	if onA < replicaBurst || onA > shared {
		t.Errorf("A admitted the key %d times before limiting it, want a burst of %d and what %v refilled", onA, replicaBurst, elapsed)
	}
	if onB < replicaBurst {
		t.Errorf("B admitted the key %d times after A limited it, want its own whole burst of %d", onB, replicaBurst)
	}
	if onA+onB <= shared {
		t.Errorf("the replicas admitted the key %d times in all, no more than one shared bucket (%d)", onA+onB, shared)
	}
}

// figuresThroughA sends replicaFigures streamed chat completions for the figures model through A alone, four at a
// time, and requires every one answered: only a streamed answer's first token is a time to first token the
// gateway measures (docs/tiers-and-asks.md).
func (h *restart) figuresThroughA(a *replica, o catalog.Offering) []loadResult {
	h.t.Helper()
	var mu sync.Mutex
	var out []loadResult
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for range next {
				r := h.streamAt(a.addr, o.Model, h.secret)
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			}
		})
	}
	for range replicaFigures {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	for _, r := range out {
		if !r.ok {
			h.t.Fatalf("A failed a request for %s", o.Model)
		}
	}
	return out
}

// streamAt sends a streamed chat completion with its usage chunk to the replica at addr.
func (h *restart) streamAt(addr, model, secret string) loadResult {
	r := loadResult{sent: time.Now(), streamed: true}
	body := `{"model": "` + model + `", "max_tokens": 6, "stream": true, "stream_options": {"include_usage": true},
		"messages": [{"role": "user", "content": "count to six"}]}`
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
	for line := range strings.Lines(string(raw)) {
		payload, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || payload == "[DONE]" {
			continue
		}
		var chunk struct {
			Usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal([]byte(payload), &chunk) == nil && chunk.Usage != nil {
			r.input, r.output = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens
			r.ok = true
		}
	}
	r.requestID, r.offering = res.Header.Get("X-GPUMarket-Request-Id"), res.Header.Get("X-GPUMarket-Offering")
	return r
}

var storedTotal = regexp.MustCompile(`(?m)^gpumarket_meter_events_stored_total ([0-9.e+]+)$`)

// meterStored is how many usage events the replica's meter has stored, from its /metrics.
func meterStored(r *replica) (float64, error) {
	res, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(bufio.NewReader(res.Body))
	if err != nil {
		return 0, err
	}
	m := storedTotal.FindSubmatch(raw)
	if m == nil {
		return 0, fmt.Errorf("replica %s: no gpumarket_meter_events_stored_total in /metrics", r.name)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// waitBothMeter waits until each replica's meter has stored usage events, and returns how many.
func (h *restart) waitBothMeter(a, b *replica) (onA, onB float64) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var errA, errB error
		onA, errA = meterStored(a)
		onB, errB = meterStored(b)
		if errA == nil && errB == nil && onA > 0 && onB > 0 {
			return onA, onB
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the meters have not both stored usage: A %v (%v), B %v (%v)", onA, errA, onB, errB)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkFiguresReachB: with A dead, the figures offering's stored figures are cleared; B, which never routed to
// it, writes them back at its next flush (routing.DefaultFlushEvery) from the observations A shared: every
// request A answered for it.
func (h *restart) checkFiguresReachB(o catalog.Offering, results []loadResult) {
	t := h.t
	t.Helper()
	var ids []string
	for _, r := range results {
		if r.ok && r.streamed && r.offering == o.ID { // a whole answer is not among the measured
			ids = append(ids, r.requestID)
		}
	}
	if len(ids) < catalog.MinMeasuredRequests {
		t.Fatalf("A answered %d requests for %s, fewer than the %d figures need", len(ids), o.Model, catalog.MinMeasuredRequests)
	}
	if _, err := h.pool.Exec(h.ctx, `UPDATE offerings SET measured_requests = 0 WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	cleared := time.Now()
	deadline := cleared.Add(routingFlushWait)
	var measured int64
	for {
		if err := h.pool.QueryRow(h.ctx, `SELECT measured_requests FROM offerings WHERE id = $1`, o.ID).Scan(&measured); err != nil {
			t.Fatal(err)
		}
		if measured > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B did not write figures for %s within %v of their clearing: it never heard what A measured", o.Model, routingFlushWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("B wrote %s's figures over %d requests, all routed by A, %v after they were cleared", o.Model, measured,
		time.Since(cleared).Round(time.Millisecond))
	if measured != int64(len(ids)) {
		t.Errorf("B measured %s over %d requests; A answered %d for it", o.Model, measured, len(ids))
	}
}

// routingFlushWait is a flush period of the router (routing.DefaultFlushEvery) and some.
const routingFlushWait = 17 * time.Second
