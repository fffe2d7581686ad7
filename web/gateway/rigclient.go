package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rigClient is the gateway's HTTP/1.1 client to the rigs' agents (docs/gateway.md, "The hop to
// the rig"). net/http's Transport gives every connection a reading and a writing goroutine of
// its own and hands each request and response between them and the caller; on a busy machine
// every such handoff waits for a processor. rigClient does the whole exchange in the goroutine
// of the request: it writes the request and reads the response on the connection itself, with
// net/http's own response parser, and keeps the connection for the next request once the
// response has been read to its end.
//
// What it keeps of the Transport the gateway used before: connections are dialled by the
// gateway's dialer (which checks every address where DNS resolved it, rigaddr), spoken to in
// HTTP/1.1 only, over TLS for an https agent; the wait for the response headers is bounded; at
// most maxIdlePerHost connections to one agent and maxIdle in all are kept, each at most
// idleTimeout; no proxy, no compression, no redirect followed (a redirect is an answer, which
// the gateway treats as the rig's failure). A request is never sent twice: a connection the
// agent closed while it was idle is found before it is used (alive), and any other failure is
// the attempt's, which the gateway fails over from.
type rigClient struct {
	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	headerTimeout  time.Duration
	idleTimeout    time.Duration
	maxIdlePerHost int
	maxIdle        int
	tls            *tls.Config // cloned per connection, with the agent's host name

	mu        sync.Mutex
	idle      map[string][]*rigConn // by scheme://host:port, the longest idle first
	idleCount int
	lastSweep time.Time
	closed    bool
}

const (
	// maxRigHeaderBytes bounds a response's status line and headers, as net/http's Transport
	// bounds them by default.
	maxRigHeaderBytes = 10 << 20
	// maxInformational bounds the 1xx answers skipped before a response, as the Transport does.
	maxInformational = 5
)

// rigConn is one connection to an agent.
type rigConn struct {
	key    string // the pool's: scheme://host:port
	nc     net.Conn
	tcp    net.Conn // the TCP connection under nc, for alive
	secure bool
	in     *headerLimit
	br     *bufio.Reader
	head   []byte // the request line and headers being written
	idleAt time.Time
}

// headerLimit reads from the connection, bounding what is read while a response's headers are.
type headerLimit struct {
	bounded boundedReader
	limited bool
}

var errRigHeaderTooLarge = errors.New("the rig's response headers are too large")

func (h *headerLimit) Read(p []byte) (int, error) {
	if h.limited {
		return h.bounded.Read(p)
	}
	return h.bounded.r.Read(p)
}

// limit bounds what is read from now on to n bytes, until unlimit.
func (h *headerLimit) limit(n int64) { h.limited, h.bounded.left = true, n }

func (h *headerLimit) unlimit() { h.limited = false }

func newRigClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), headerTimeout time.Duration) *rigClient {
	return &rigClient{dial: dial, headerTimeout: headerTimeout, idleTimeout: 90 * time.Second,
		maxIdlePerHost: 256, maxIdle: 1024, tls: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		idle: map[string][]*rigConn{}}
}

// aLongTimeAgo is a deadline in the past: it ends a read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// post sends body to path at the agent at scheme://host with header, and returns its response:
// its Body must be closed. ctx's end aborts the exchange, at any point of it.
func (c *rigClient) post(ctx context.Context, scheme, host, path string, header http.Header, body []byte) (*http.Response, error) {
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("the agent URL's scheme %q is neither http nor https", scheme)
	}
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(strings.Trim(host, "[]"), map[string]string{"http": "80", "https": "443"}[scheme])
	}
	pc, err := c.get(ctx, scheme, addr)
	if err != nil {
		return nil, err
	}
	pc.head, err = appendRequestHead(pc.head[:0], host, path, header, len(body))
	if err != nil {
		pc.nc.Close()
		return nil, err
	}
	// The headers are awaited for at most headerTimeout; ctx's end aborts the exchange through
	// the deadline, at any point until the body is read or closed.
	if c.headerTimeout > 0 {
		_ = pc.nc.SetDeadline(time.Now().Add(c.headerTimeout))
	}
	stop := context.AfterFunc(ctx, func() { _ = pc.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		pc.nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("the rig sent no response headers within %s", c.headerTimeout)
		}
		return nil, err
	}
	if len(body) <= 64<<10 {
		pc.head = append(pc.head, body...)
		_, err = pc.nc.Write(pc.head)
	} else {
		bufs := net.Buffers{pc.head, body}
		_, err = bufs.WriteTo(pc.nc)
	}
	if err != nil {
		return fail(err)
	}
	pc.in.limit(maxRigHeaderBytes)
	var resp *http.Response
	for i := 0; ; i++ {
		if resp, err = http.ReadResponse(pc.br, nil); err != nil {
			return fail(err)
		}
		// A 1xx before the response is skipped, as net/http's Transport skips it; a 101 is an
		// answer (one the gateway refuses).
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols || i == maxInformational {
			break
		}
	}
	pc.in.unlimit()
	if c.headerTimeout > 0 {
		_ = pc.nc.SetDeadline(time.Time{})
		if ctx.Err() != nil { // ended between the deadline's being lifted and now: end it again
			_ = pc.nc.SetDeadline(aLongTimeAgo)
		}
	}
	reusable := resp.StatusCode >= 200 && !resp.Close
	resp.Body = &rigBody{c: c, pc: pc, body: resp.Body, stop: stop, reusable: reusable}
	return resp, nil
}

// appendRequestHead appends the request line and headers of a POST of n bytes to path.
func appendRequestHead(b []byte, host, path string, header http.Header, n int) ([]byte, error) {
	if !validHeaderText(path) || !validHeaderText(host) || path == "" || path[0] != '/' {
		return b, fmt.Errorf("cannot send to %q at %q", path, host)
	}
	b = append(b, "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: gpumarket-gateway\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\n"...)
	for name, values := range header {
		if !validHeaderText(name) || name == "" {
			return b, fmt.Errorf("the header name %q cannot be sent", name)
		}
		for _, v := range values {
			if !validHeaderText(v) {
				return b, fmt.Errorf("the value of %s cannot be sent", name)
			}
			b = append(b, name...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...), nil
}

// validHeaderText is true for text that cannot end a header line or the header.
func validHeaderText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

// get returns an idle connection to addr that is still open, or dials one.
func (c *rigClient) get(ctx context.Context, scheme, addr string) (*rigConn, error) {
	key := scheme + "://" + addr
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errors.New("the gateway's client to the rigs is closed")
		}
		list := c.idle[key]
		if len(list) == 0 {
			c.mu.Unlock()
			break
		}
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		c.idle[key] = list[:len(list)-1]
		c.idleCount--
		c.mu.Unlock()
		if time.Since(pc.idleAt) < c.idleTimeout && pc.alive() {
			return pc, nil
		}
		pc.nc.Close()
	}
	nc, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pc := &rigConn{key: key, nc: nc, tcp: nc, head: make([]byte, 0, 1024)}
	if scheme == "https" {
		host, _, _ := net.SplitHostPort(addr)
		cfg := c.tls.Clone()
		cfg.ServerName = host
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, err
		}
		pc.nc, pc.secure = tc, true
	}
	pc.in = &headerLimit{bounded: boundedReader{r: pc.nc, err: errRigHeaderTooLarge}}
	pc.br = bufio.NewReaderSize(pc.in, 4096)
	return pc, nil
}

// put keeps pc for the next request to its agent, or closes it when enough are kept; now and
// then it closes the connections idle too long.
func (c *rigClient) put(pc *rigConn) {
	now := time.Now()
	c.mu.Lock()
	var expired []*rigConn
	if now.Sub(c.lastSweep) > c.idleTimeout/3 {
		c.lastSweep = now
		for key, list := range c.idle {
			kept := list[:0]
			for _, old := range list {
				if now.Sub(old.idleAt) >= c.idleTimeout {
					expired = append(expired, old)
					c.idleCount--
				} else {
					kept = append(kept, old)
				}
			}
			clear(list[len(kept):])
			if len(kept) == 0 {
				delete(c.idle, key)
			} else {
				c.idle[key] = kept
			}
		}
	}
	keep := !c.closed && len(c.idle[pc.key]) < c.maxIdlePerHost && c.idleCount < c.maxIdle
	if keep {
		pc.idleAt = now
		c.idle[pc.key] = append(c.idle[pc.key], pc)
		c.idleCount++
	}
	c.mu.Unlock()
	if !keep {
		pc.nc.Close()
	}
	for _, old := range expired {
		old.nc.Close()
	}
}

// Close closes the idle connections and every connection released from now on; requests in
// flight finish, and no other is sent.
func (c *rigClient) Close() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.idleCount, c.closed = map[string][]*rigConn{}, 0, true
	c.mu.Unlock()
	for _, list := range idle {
		for _, pc := range list {
			pc.nc.Close()
		}
	}
}

// rigBody is a response's body: the connection goes back to the pool once the body has been
// read to its end, and is closed when the body is closed before that.
type rigBody struct {
	c        *rigClient
	pc       *rigConn
	body     io.ReadCloser
	stop     func() bool // stops ctx's abort; false once it has aborted
	reusable bool
	eof      bool
	released bool
	mu       sync.Mutex
}

var errRigBodyClosed = errors.New("the rig's response body is closed")

func (b *rigBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eof {
		return 0, io.EOF
	}
	if b.released {
		return 0, errRigBodyClosed
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
		b.release(true)
	} else if err != nil {
		b.release(false)
	}
	return n, err
}

func (b *rigBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.released {
		b.release(false)
	}
	return nil
}

// release ends the exchange: the connection goes back to the pool when its response was read
// whole and nothing else came, and is closed otherwise.
func (b *rigBody) release(whole bool) {
	b.released = true
	aborted := !b.stop()
	if whole && b.reusable && !aborted && b.pc.br.Buffered() == 0 {
		b.c.put(b.pc)
		return
	}
	b.pc.nc.Close()
	if !whole {
		_ = b.body.Close() // on a closed connection, net/http's body stops at once
	}
}
