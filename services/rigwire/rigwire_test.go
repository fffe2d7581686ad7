package rigwire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/rigauth"
	"github.com/gpumarket/gpumarket/services/rigwire"
)

var rigKey = []byte("rigwire test key")

var quiet = slog.New(slog.DiscardHandler)

// world is an embedded server with the rigs' account, a platform connection and a way to connect rigs.
type world struct {
	url      string
	platform *nats.Conn
}

func newWorld(t testing.TB) *world {
	t.Helper()
	e := natstest.StartRigEntry(t, natsserver.EmbeddedOptions{StoreDir: t.TempDir(), Log: quiet}, &rigauth.Responder{
		RigKey: rigKey, Log: quiet,
		RigOf: func(_ context.Context, offeringID string) (string, int, bool) {
			provider, _, _ := strings.Cut(offeringID, "-")
			return provider, 1, true // offering ids here start with their provider's
		}})
	w := &world{url: e.Server.ClientURL()}
	w.platform = w.connect(t, "platform", "platform-secret", "")
	return w
}

func (w *world) connect(t testing.TB, user, password, inbox string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)
	opts = append(opts, nats.UserInfo(user, password))
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(w.url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// rig connects as the rig of provider/offering with its own credential and serves h.
func (w *world) rig(t testing.TB, provider, offering string, h http.Handler, opts rigwire.Options) (*nats.Conn, *rigwire.Server) {
	t.Helper()
	nc := w.connect(t, events.RigUsername(offering), events.RigPassword(rigKey, offering), events.RigInboxPrefix(provider, offering))
	s, err := rigwire.Serve(t.Context(), nc, provider, offering, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return nc, s
}

func (w *world) caller(t testing.TB, opts rigwire.Options) *rigwire.Caller {
	t.Helper()
	c, err := rigwire.NewCaller(w.platform, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestStreamedAnswerArrivesInOrderAsItIsFlushed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	release := make(chan struct{})
	w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("X-Ticket") != "t-1" {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.WriteHeader(http.StatusCreated)
		fmt.Fprintf(rw, "data: %s\n\n", body)
		rw.(http.Flusher).Flush()
		<-release // the first frame must reach the caller while the handler still runs
		for i := range 200 {
			fmt.Fprintf(rw, "data: %d\n\n", i)
			rw.(http.Flusher).Flush()
		}
	}), rigwire.Options{})
	c := w.caller(t, rigwire.Options{})
	resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/chat/completions", http.Header{"x-TICKET": {"t-1"}}, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("head %d %v", resp.StatusCode, resp.Header)
	}
	first := make([]byte, len("data: hello\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: hello\n\n" {
		t.Fatalf("first frame %q, %v", first, err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 200 {
		fmt.Fprintf(&want, "data: %d\n\n", i)
	}
	if string(rest) != want.String() {
		t.Errorf("the frames arrived as %q", rest)
	}
}

func TestLargeBodiesBothWays(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || int64(len(body)) != r.ContentLength {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		rw.Header().Set("Content-Type", "application/octet-stream")
		// Twice the request, reversed in halves: every byte counts, in order.
		rw.Write(body)
		rw.Write(bytes.ToUpper(body))
	}), rigwire.Options{})
	c := w.caller(t, rigwire.Options{Window: 256 << 10})
	body := make([]byte, 5<<20+123)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/embeddings", nil, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, append(append([]byte{}, body...), bytes.ToUpper(body)...)) {
		t.Errorf("status %d, %d bytes back; want 200 and the %d bytes", resp.StatusCode, len(got), 2*len(body))
	}
}

func TestCancelReachesTheHandler(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	canceled := make(chan error, 1)
	w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.(http.Flusher).Flush()
		<-r.Context().Done()
		canceled <- r.Context().Err()
	}), rigwire.Options{})
	c := w.caller(t, rigwire.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := c.Call(ctx, "p1", "p1-o1", "/v1/chat/completions", nil, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the client went away
	select {
	case err := <-canceled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the handler's context was not canceled")
	}
	if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, rigwire.ErrCanceled) {
		t.Errorf("Read after the cancel: %v, want ErrCanceled", err)
	}
	resp.Body.Close()
}

func TestASlowReaderStopsTheRigAtTheWindow(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const window = 128 << 10
	var written atomic.Int64
	finished := make(chan struct{})
	w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		defer close(finished)
		frame := bytes.Repeat([]byte("x"), 1000)
		for r.Context().Err() == nil {
			n, err := rw.Write(frame)
			written.Add(int64(n))
			if err != nil {
				return
			}
			rw.(http.Flusher).Flush()
		}
	}), rigwire.Options{})
	c := w.caller(t, rigwire.Options{Window: window})
	resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/chat/completions", nil, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	read := int64(0)
	buf := make([]byte, 4096)
	for read < 3*window { // read a while, so acknowledgements have flowed
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read += int64(n)
	}
	// Then stop reading. The rig may run ahead by the window and one buffered chunk, never more.
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		if ahead := written.Load() - read; ahead > window+rigwire.ChunkSize {
			t.Fatalf("the rig wrote %d bytes past what was read; the window is %d", ahead, window)
		}
	}
	if ahead := written.Load() - read; ahead < window/2 {
		t.Errorf("the rig wrote only %d bytes ahead; the window of %d should fill", ahead, window)
	}
	// Reading again lets it go on.
	before := written.Load()
	for range 2 * window / 4096 {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if written.Load() <= before {
		t.Error("the rig did not go on once the reader read")
	}
	resp.Body.Close()
	select {
	case <-finished:
	case <-time.After(2 * time.Second):
		t.Error("closing the body did not stop the rig's handler")
	}
}

func TestARigThatDiesMidAnswerBreaksTheBody(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	started := make(chan struct{})
	rigNC, _ := w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		rw.Write([]byte("data: 1\n\n"))
		rw.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	}), rigwire.Options{})
	opts := rigwire.Options{IdleTimeout: time.Second, Keepalive: 200 * time.Millisecond}
	c := w.caller(t, opts)
	resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/chat/completions", nil, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	// The answer is alive for longer than the idle timeout while the rig is there: keepalives.
	time.Sleep(1500 * time.Millisecond)
	rigNC.Close()
	cut := time.Now()
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, rigwire.ErrIdle) || string(got) != "data: 1\n\n" {
		t.Fatalf("read %q, %v; want the first frame and ErrIdle", got, err)
	}
	if took := time.Since(cut); took > opts.IdleTimeout+500*time.Millisecond {
		t.Errorf("the broken answer was seen after %s; the idle timeout is %s", took, opts.IdleTimeout)
	}
}

func TestNoRigFailsFast(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.caller(t, rigwire.Options{})
	start := time.Now()
	_, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/chat/completions", nil, []byte("{}"))
	if !errors.Is(err, rigwire.ErrNoRig) {
		t.Fatalf("call to no rig: %v, want ErrNoRig", err)
	}
	if took := time.Since(start); took > rigwire.DefaultAcceptTimeout {
		t.Errorf("the missing rig was known after %s, more than the accept timeout", took)
	}
	// A rig subscribed that never answers (a hung process) is known by the accept timeout.
	hung := w.connect(t, "platform", "platform-secret", "")
	if _, err := hung.Subscribe(events.Below(events.RigCallSubject("p1", "p1-o2")), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	hung.Flush()
	short := w.caller(t, rigwire.Options{AcceptTimeout: 300 * time.Millisecond})
	start = time.Now()
	_, err = short.Call(t.Context(), "p1", "p1-o2", "/v1/chat/completions", nil, []byte("{}"))
	if took := time.Since(start); !errors.Is(err, rigwire.ErrNoRig) || took > 600*time.Millisecond || took < 300*time.Millisecond {
		t.Errorf("a rig that never accepts: %v after %s; want ErrNoRig after the 300ms accept timeout", err, took)
	}
}

func TestARigOfAnotherOfferingCannotReadNorAnswerACall(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var served atomic.Int64
	w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		served.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`{"from":"o1"}`))
	}), rigwire.Options{})
	// The rig of p2-o2 tries to take p1-o1's calls and to answer on p1-o1's replies.
	violations := make(chan error, 16)
	thief := w.connect(t, events.RigUsername("p2-o2"), events.RigPassword(rigKey, "p2-o2"), events.RigInboxPrefix("p2", "p2-o2"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	var stolen atomic.Int64
	for _, subject := range []string{events.Below(events.RigCallSubject("p1", "p1-o1")), events.Below(events.RigCallPrefix), ">"} {
		if _, err := thief.QueueSubscribe(subject, events.RigCallQueue, func(m *nats.Msg) {
			stolen.Add(1)
			thief.Publish(m.Reply, []byte("forged"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	thief.Flush()
	c := w.caller(t, rigwire.Options{})
	for range 20 {
		resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/chat/completions", nil, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != `{"from":"o1"}` {
			t.Fatalf("answer %q, %v", got, err)
		}
	}
	if stolen.Load() != 0 || served.Load() != 20 {
		t.Errorf("the other rig read %d calls; the right one served %d of 20", stolen.Load(), served.Load())
	}
	if len(violations) == 0 {
		t.Error("the server did not refuse the other rig's subscriptions")
	}
	// Answering p1-o1's reply subject is refused too.
	if _, err := rigwireForge(w, t); err == nil {
		t.Error("a rig published on another offering's replies")
	}
}

// rigwireForge has the rig of p2-o2 publish on p1-o1's reply subjects and reports whether the platform saw it.
func rigwireForge(w *world, t *testing.T) (int, error) {
	sub, err := w.platform.SubscribeSync(events.Below(events.RigReplySubject("p1", "p1-o1")))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	w.platform.Flush()
	forger := w.connect(t, events.RigUsername("p2-o2"), events.RigPassword(rigKey, "p2-o2"), events.RigInboxPrefix("p2", "p2-o2"))
	forger.Publish(events.RigAnswerSubject("p1", "p1-o1", "x", "1"), []byte("forged"))
	forger.Flush()
	if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
		return 0, err
	}
	return 1, nil
}

func TestTwoCallersShareOneRig(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.rig(t, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "application/json")
		rw.Write(body)
	}), rigwire.Options{})
	a := w.caller(t, rigwire.Options{})
	b, err := rigwire.NewCaller(w.connect(t, "platform", "platform-secret", ""), rigwire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 200)
	for i := range 200 {
		c := a
		if i%2 == 1 {
			c = b
		}
		go func() {
			want := fmt.Sprintf(`{"n":%d}`, i)
			resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/embeddings", nil, []byte(want))
			if err != nil {
				done <- err
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && string(got) != want {
				err = fmt.Errorf("call %d got %q", i, got)
			}
			done <- err
		}()
	}
	for range 200 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestServingResumesAfterAReconnect(t *testing.T) {
	t.Parallel()
	issuer, err := rigauth.Issuer(rigKey)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := issuer.PublicKey()
	opts := natsserver.EmbeddedOptions{StoreDir: t.TempDir(), Log: quiet, Rigs: &natsserver.RigEntry{
		PlatformUser: "platform", PlatformPassword: "platform-secret", SystemUser: "system", SystemPassword: "system-secret",
		Issuer: public}}
	s, err := natsserver.StartEmbedded(opts)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{url: s.ClientURL()}
	reconnect := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	w.platform = w.connect(t, "platform", "platform-secret", "", reconnect...)
	responder := &rigauth.Responder{Issuer: issuer, RigKey: rigKey, Log: quiet,
		RigOf: func(context.Context, string) (string, int, bool) { return "p1", 1, true }}
	if _, err := responder.Serve(w.connect(t, "platform", "platform-secret", "", reconnect...)); err != nil {
		t.Fatal(err)
	}
	rigNC := w.connect(t, events.RigUsername("p1-o1"), events.RigPassword(rigKey, "p1-o1"), events.RigInboxPrefix("p1", "p1-o1"), reconnect...)
	srv, err := rigwire.Serve(t.Context(), rigNC, "p1", "p1-o1", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte("ok"))
	}), rigwire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := w.caller(t, rigwire.Options{})
	call := func() error {
		resp, err := c.Call(t.Context(), "p1", "p1-o1", "/v1/models", nil, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err == nil && string(got) != "ok" {
			err = fmt.Errorf("got %q", got)
		}
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	// The server restarts on the same port: both connections come back, and the rig serves again.
	addr := s.Addr()
	s.Shutdown()
	s.WaitForShutdown()
	opts.Port = addr.(*net.TCPAddr).Port
	s2, err := natsserver.StartEmbedded(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Shutdown(); s2.WaitForShutdown() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := call()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rig does not serve after the reconnect: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
