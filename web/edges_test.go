package web_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/web"
)

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// logTo makes the server log, at debug level, into a buffer the test reads.
func logTo(buf *logBuffer) func(*web.Config, *pgxpool.Pool) {
	return func(cfg *web.Config, _ *pgxpool.Pool) {
		cfg.Log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// The attack: a 60 KB X-Request-ID. It is replaced by an id of the platform's own, which the
// answer carries, and the access log line stays short. A short plain id is kept as it came.
func TestRequestIDIsKeptOnlyWhenShortAndPlain(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	e := setupWith(t, logTo(logs))
	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)

	huge := strings.Repeat("A", 60*1024)
	res, _ := get(t, e.srv.URL+"/catalog", map[string]string{"X-Request-ID": huge})
	wantStatus(t, res, http.StatusOK)
	id := res.Header.Get("X-Request-ID")
	if !generated.MatchString(id) {
		t.Fatalf("a 60 KB X-Request-ID came back as %d bytes (%.40q…), want a generated 32-hex-digit id", len(id), id)
	}
	var line string
	for _, l := range logs.lines() {
		if strings.Contains(l, "request_id="+id) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no log line names the request id %s", id)
	}
	if len(line) > 400 || strings.Contains(line, "AAAAAAAA") {
		t.Fatalf("the access log line is %d bytes and holds the client's id: %.200q", len(line), line)
	}
	t.Logf("a 60 KB X-Request-ID: answered with %s; its log line is %d bytes", id, len(line))
	if n := len(logs.String()); n > 4096 {
		t.Errorf("the log grew by %d bytes for one request", n)
	}

	for name, c := range map[string]struct {
		sent string
		kept bool
	}{
		"plain":          {"client-123:abc.DEF_9", true},
		"64 characters":  {strings.Repeat("x", 64), true},
		"65 characters":  {strings.Repeat("x", 65), false},
		"a space":        {"two words", false},
		"a quote":        {`id"quote`, false},
		"non-ASCII":      {"idé", false},
		"a slash":        {"a/b", false},
		"a log injected": {"ok msg=forged", false},
	} {
		res, _ := get(t, e.srv.URL+"/healthz", map[string]string{"X-Request-ID": c.sent})
		got := res.Header.Get("X-Request-ID")
		switch {
		case c.kept && got != c.sent:
			t.Errorf("%s: %q came back as %q, want it kept", name, c.sent, got)
		case !c.kept && !generated.MatchString(got):
			t.Errorf("%s: %q came back as %q, want a generated id", name, c.sent, got)
		}
	}
	// Without one, every request still gets an id.
	if res, _ := get(t, e.srv.URL+"/healthz", nil); !generated.MatchString(res.Header.Get("X-Request-ID")) {
		t.Errorf("a request without an id was answered with %q", res.Header.Get("X-Request-ID"))
	}
}

// A 10 KB path is logged clipped.
func TestAccessLogClipsLongPaths(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	e := setupWith(t, logTo(logs))
	res, _ := get(t, e.srv.URL+"/"+strings.Repeat("p", 10*1024), nil)
	wantStatus(t, res, http.StatusNotFound)
	for _, l := range logs.lines() {
		if strings.Contains(l, "msg=http") && len(l) > 600 {
			t.Fatalf("an access log line of %d bytes for a 10 KB path", len(l))
		}
	}
}

// /metrics: without a token configured it is not on the public handler at all; with one, a
// request without it, or with another, is refused.
func TestMetricsAreNotPublic(t *testing.T) {
	t.Parallel()
	withToken := setup(t)
	for name, header := range map[string]map[string]string{
		"no token":       nil,
		"a wrong token":  {"Authorization": "Bearer not-the-metrics-token"},
		"a prefix of it": {"Authorization": "Bearer " + testMetricsToken[:10]},
	} {
		res, body := get(t, withToken.srv.URL+"/metrics", header)
		if res.StatusCode != http.StatusUnauthorized || strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics with %s: %d, want 401 and no metrics", name, res.StatusCode)
		}
	}
	res, body := get(t, withToken.srv.URL+"/metrics", map[string]string{"Authorization": "Bearer " + testMetricsToken})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics with its token: %d, want 200 with the metrics", res.StatusCode)
	}

	without := setupWith(t, func(cfg *web.Config, _ *pgxpool.Pool) { cfg.MetricsToken = "" })
	res, body = get(t, without.srv.URL+"/metrics", nil)
	if res.StatusCode != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics with no token configured: %d, want 404", res.StatusCode)
	}
	// Its own listener serves it.
	rec := &recorder{header: http.Header{}}
	without.server.MetricsHandler().ServeHTTP(rec, httpRequest(t, "/metrics"))
	if rec.status != http.StatusOK || !strings.Contains(rec.body.String(), "gpumarket_http_requests_total") {
		t.Errorf("MetricsHandler: %d, want 200 with the metrics", rec.status)
	}
}

// /readyz names the dependency that failed and never shows why: the error's text (a host, a
// user) goes to the log.
func TestReadyzNamesTheFailedDependencyOnly(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		logTo(logs)(cfg, pool)
		cfg.Ready = append(cfg.Ready, web.ReadyCheck{Name: "nats", Check: func(context.Context) error {
			return errors.New("dial nats://gpumarket:s3cret-password@nats.internal:4222: connection refused")
		}})
	})
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
		Failed []string          `json:"failed"`
	}
	res := e.call(t, "", http.MethodGet, "/readyz", nil, &ready)
	wantStatus(t, res, http.StatusServiceUnavailable)
	if ready.Status != "not ready" || ready.Checks["postgres"] != "ok" || ready.Checks["nats"] != "failed" ||
		len(ready.Failed) != 1 || ready.Failed[0] != "nats" {
		t.Fatalf("/readyz = %+v, want nats failed and postgres ok", ready)
	}
	_, body := get(t, e.srv.URL+"/readyz", nil)
	if strings.Contains(body, "s3cret") || strings.Contains(body, "nats.internal") || strings.Contains(body, "refused") {
		t.Fatalf("/readyz shows the error's text: %s", body)
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Fatal("the cause of the failed check is not in the log")
	}
}

// recorder is a minimal http.ResponseWriter.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
func (r *recorder) WriteHeader(status int) { r.status = status }

func httpRequest(t *testing.T, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
