package gateway

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections a test server accepted and the requests it served.
type connCounter struct {
	conns, requests atomic.Int32
}

func (c *connCounter) server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		h(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func testRigClient(headerTimeout time.Duration) *rigClient {
	return newRigClient((&net.Dialer{Timeout: 5 * time.Second}).DialContext, headerTimeout)
}

// postTo posts body to path at srv's address.
func postTo(ctx context.Context, t *testing.T, c *rigClient, rawURL, path, body string) (*http.Response, error) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return c.post(ctx, u.Scheme, u.Host, path, http.Header{"Content-Type": {"application/json"}, "X-Test": {"1"}}, []byte(body))
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// What the agent receives is the request the gateway meant: its path, headers and body, once;
// and the answer comes back whole, on one connection kept for the requests that follow.
func TestRigClientSendsTheRequestAndKeepsTheConnection(t *testing.T) {
	var cc connCounter
	srv := cc.server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("X-Test") != "1" ||
			r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(b)) {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	c := testRigClient(time.Minute)
	defer c.Close()
	large := `{"p":"` + strings.Repeat("x", 200<<10) + `"}` // written apart from the head
	for i, body := range []string{`{"a":1}`, large, `{"b":2}`} {
		resp, err := postTo(context.Background(), t, c, srv.URL, "/v1/chat/completions", body)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != body {
			t.Fatalf("request %d: %d with %d bytes, want 200 echoing its %d bytes", i, resp.StatusCode, len(got), len(body))
		}
	}
	if cc.conns.Load() != 1 || cc.requests.Load() != 3 {
		t.Fatalf("%d connections for %d requests, want 1 for 3", cc.conns.Load(), cc.requests.Load())
	}
}

// A connection the agent closed while it sat idle is found before it is used: the request goes
// on a new one, and is sent once.
func TestRigClientDoesNotUseAConnectionTheAgentClosed(t *testing.T) {
	var cc connCounter
	srv := cc.server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	})
	c := testRigClient(time.Minute)
	defer c.Close()
	resp, err := postTo(context.Background(), t, c, srv.URL, "/v1/x", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	srv.CloseClientConnections()
	time.Sleep(50 * time.Millisecond) // the FIN arrives
	resp, err = postTo(context.Background(), t, c, srv.URL, "/v1/x", `{}`)
	if err != nil {
		t.Fatalf("after the agent closed the idle connection: %v", err)
	}
	readAll(t, resp)
	if cc.conns.Load() != 2 || cc.requests.Load() != 2 {
		t.Fatalf("%d connections and %d requests served, want 2 and 2", cc.conns.Load(), cc.requests.Load())
	}
}

// A body closed before its end is not drained: Close returns at once, and its connection is
// closed, never reused with the rest of that answer still on it.
func TestRigClientClosesAConnectionWhoseBodyWasNotRead(t *testing.T) {
	var cc connCounter
	stop := make(chan struct{})
	srv := cc.server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, "data: {}\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	defer close(stop)
	c := testRigClient(time.Minute)
	defer c.Close()
	resp, err := postTo(context.Background(), t, c, srv.URL, "/stream", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp.Body.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("closing an endless body took %s", took)
	}
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("a closed body read on")
	}
	resp, err = postTo(context.Background(), t, c, srv.URL, "/small", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "ok" {
		t.Fatalf("the next request read %q, want ok", got)
	}
	if cc.conns.Load() != 2 {
		t.Fatalf("%d connections, want 2: the stream's was closed", cc.conns.Load())
	}
}

// The request's context ends the exchange wherever it is: waiting for the headers, or reading
// the body.
func TestRigClientStopsWhenTheContextEnds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server sees the client go
		if r.URL.Path == "/body" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"partial":`)
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := testRigClient(time.Minute)
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := postTo(ctx, t, c, srv.URL, "/headers", `{}`)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("waiting for headers: %v after %s, want the context's deadline at once", err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	resp, err := postTo(ctx, t, c, srv.URL, "/body", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("reading a body whose context ended: %v after %s, want an error at once", err, time.Since(start))
	}
}

// The wait for the headers is bounded; once they came, a body may take its time.
func TestRigClientBoundsTheWaitForHeadersOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-headers" {
			time.Sleep(400 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(400 * time.Millisecond)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := testRigClient(200 * time.Millisecond)
	defer c.Close()
	if _, err := postTo(context.Background(), t, c, srv.URL, "/slow-headers", `{}`); err == nil || !strings.Contains(err.Error(), "no response headers") {
		t.Fatalf("headers after 400 ms with a 200 ms bound: %v, want the bound's error", err)
	}
	resp, err := postTo(context.Background(), t, c, srv.URL, "/slow-body", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); got != "data: [DONE]\n\n" {
		t.Fatalf("a body 400 ms after its headers read %q", got)
	}
}

// rawServer answers each connection's first request with what answer writes.
func rawServer(t *testing.T, answer func(conn net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				answer(conn)
				time.Sleep(200 * time.Millisecond)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// What a rig may answer that is not a plain response: a 1xx first (skipped), headers without
// end (refused), an answer that says the connection closes or brings more than itself (its
// connection is not reused).
func TestRigClientReadsWhatAgentsMayAnswer(t *testing.T) {
	c := testRigClient(5 * time.Second)
	defer c.Close()

	informational := rawServer(t, func(conn net.Conn) {
		_, _ = io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+
			"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	})
	resp, err := postTo(context.Background(), t, c, informational, "/v1/x", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != "{}" {
		t.Fatalf("after two 1xx: %d %q, want 200 {}", resp.StatusCode, got)
	}

	endless := rawServer(t, func(conn net.Conn) {
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for range (maxRigHeaderBytes / len(line)) + 10 {
			if _, err := io.WriteString(conn, line); err != nil {
				return
			}
		}
	})
	if _, err := postTo(context.Background(), t, c, endless, "/v1/x", `{}`); !errors.Is(err, errRigHeaderTooLarge) {
		t.Fatalf("headers past %d bytes: %v, want errRigHeaderTooLarge", maxRigHeaderBytes, err)
	}

	for name, answer := range map[string]string{
		"Connection: close":   "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
		"bytes past the body": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged",
	} {
		addr := rawServer(t, func(conn net.Conn) { _, _ = io.WriteString(conn, answer) })
		resp, err := postTo(context.Background(), t, c, addr, "/v1/x", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != "{}" {
			t.Fatalf("%s: read %q", name, got)
		}
		u, _ := url.Parse(addr)
		c.mu.Lock()
		kept := len(c.idle["http://"+u.Host])
		c.mu.Unlock()
		if kept != 0 {
			t.Fatalf("%s: the connection was kept for reuse", name)
		}
	}
}

// Nothing the gateway sends can end a header line early: a value with a line break is refused
// before anything is written.
func TestRigClientRefusesHeadersThatWouldSplitTheRequest(t *testing.T) {
	var cc connCounter
	srv := cc.server(t, func(w http.ResponseWriter, r *http.Request) {})
	c := testRigClient(time.Minute)
	defer c.Close()
	u, _ := url.Parse(srv.URL)
	for _, h := range []http.Header{{"X-Ticket": {"abc\r\nX-Injected: 1"}}, {"Bad\nName": {"v"}}} {
		if _, err := c.post(context.Background(), "http", u.Host, "/v1/x", h, nil); err == nil {
			t.Fatalf("header %v was sent", h)
		}
	}
	if _, err := c.post(context.Background(), "http", u.Host, "/v1/x\r\nX: 1", nil, nil); err == nil {
		t.Fatal("a path with a line break was sent")
	}
	if cc.requests.Load() != 0 {
		t.Fatalf("the agent got %d requests", cc.requests.Load())
	}
}

// An https agent is spoken to over TLS, its certificate checked against its host name.
func TestRigClientSpeaksTLSToHTTPSAgents(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.ProtoMajor != 1 {
			http.Error(w, "want HTTP/1.1 over TLS", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "secure")
	}))
	defer srv.Close()
	c := testRigClient(time.Minute)
	defer c.Close()
	if _, err := postTo(context.Background(), t, c, srv.URL, "/v1/x", `{}`); err == nil {
		t.Fatal("a certificate no root vouches for was accepted")
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c.tls.RootCAs = roots
	for range 2 {
		resp, err := postTo(context.Background(), t, c, srv.URL, "/v1/x", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != "secure" {
			t.Fatalf("over TLS: %d %q", resp.StatusCode, got)
		}
	}
}

// Close closes the kept connections and those released afterwards, and sends nothing more.
func TestRigClientCloses(t *testing.T) {
	var cc connCounter
	srv := cc.server(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") })
	c := testRigClient(time.Minute)
	resp, err := postTo(context.Background(), t, c, srv.URL, "/v1/x", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	readAll(t, resp) // released after the close: closed, not kept
	c.mu.Lock()
	kept := c.idleCount
	c.mu.Unlock()
	if kept != 0 {
		t.Fatalf("%d connections kept after Close", kept)
	}
	if _, err := postTo(context.Background(), t, c, srv.URL, "/v1/x", `{}`); err == nil {
		t.Fatal("a closed client sent a request")
	}
}
