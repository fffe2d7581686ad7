package rigwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
)

// Server is an agent's side: it takes the calls to one offering from NATS and runs each through an http.Handler.
type Server struct {
	nc      *nats.Conn
	h       http.Handler
	opts    Options
	control string // this server's control subjects' prefix
	calls   *nats.Subscription
	callCh  chan *nats.Msg
	idle    atomic.Int32 // workers waiting for a call
	ctl     *nats.Subscription
	ids     atomic.Uint64

	mu       sync.Mutex
	inFlight map[string]*serverCall
	wg       sync.WaitGroup

	stop    chan struct{}
	done    chan struct{}
	closing sync.Once
	closed  sync.Once
}

// Serve takes the calls to the rig serving an offering on nc, the rig's own connection, and runs each through h
// until ctx ends or the server is shut down: its queue subscription shares the calls with every other agent
// serving the offering. nats.go subscribes again after a reconnect, so serving resumes with the connection. A
// call's request has the call's context, canceled when the gateway cancels the call or goes silent; its
// ResponseWriter implements http.Flusher (a flush publishes what is buffered at once).
func Serve(ctx context.Context, nc *nats.Conn, providerID, offeringID string, h http.Handler, opts Options) (*Server, error) {
	s := &Server{nc: nc, h: h, opts: opts.withDefaults(), inFlight: map[string]*serverCall{},
		stop: make(chan struct{}), done: make(chan struct{}),
		control: events.RigControlSubject(providerID, offeringID, events.NewToken())}
	var err error
	if s.ctl, err = nc.Subscribe(events.AnyToken(s.control), s.onControl); err != nil {
		return nil, fmt.Errorf("rigwire: subscribe to control: %w", err)
	}
	_ = s.ctl.SetPendingLimits(1<<20, 512<<20)
	s.callCh = make(chan *nats.Msg, callQueue)
	if s.calls, err = nc.ChanQueueSubscribe(events.RigCallRequestSubject(providerID, offeringID), events.RigCallQueue, s.callCh); err != nil {
		_ = s.ctl.Unsubscribe()
		return nil, fmt.Errorf("rigwire: subscribe to calls: %w", err)
	}
	s.idle.Store(1)
	go s.worker()
	if err := nc.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && nc.IsConnected() {
		s.Close()
		return nil, fmt.Errorf("rigwire: subscribe: %w", err)
	}
	go s.sweep()
	go s.acceptLoop()
	context.AfterFunc(ctx, s.stopTaking)
	return s, nil
}

const (
	// callQueue is how many calls may wait for a worker; a full queue drops a call, which its gateway then
	// fails over as a call no rig accepted. A worker is started whenever none is left waiting.
	callQueue = 1 << 12
	// maxIdleWorkers is how many workers stay waiting for calls after a burst.
	maxIdleWorkers = 16
)

// worker serves calls as they come, each on the goroutine that took it from the connection's reader (no goroutine
// between them to wake). When it takes a call and leaves no worker waiting, it starts one.
func (s *Server) worker() {
	for {
		select {
		case <-s.stop:
			s.idle.Add(-1)
			return
		case m := <-s.callCh:
			if s.idle.Add(-1) == 0 {
				s.idle.Add(1)
				go s.worker()
			}
			s.onCall(m)
		}
		for {
			n := s.idle.Load()
			if n >= maxIdleWorkers {
				return
			}
			if s.idle.CompareAndSwap(n, n+1) {
				break
			}
		}
	}
}

// stopTaking stops taking new calls; those in flight go on.
func (s *Server) stopTaking() {
	s.closing.Do(func() { _ = s.calls.Unsubscribe() })
}

// Shutdown stops taking calls and waits for those in flight until ctx ends, then cancels the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopTaking()
	idle := make(chan struct{})
	go func() { s.wg.Wait(); close(idle) }()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Close()
	return err
}

// Close stops taking calls and cancels those in flight.
func (s *Server) Close() {
	s.stopTaking()
	s.closed.Do(func() {
		close(s.stop)
		s.mu.Lock()
		for _, sc := range s.inFlight {
			sc.abort(ErrCanceled)
		}
		s.mu.Unlock()
		s.wg.Wait()
		<-s.done
		_ = s.ctl.Unsubscribe()
	})
}

// serverCall is one call in flight at the agent.
type serverCall struct {
	s         *Server
	key       string
	control   string // the call's control subject, named in the acceptance
	start     time.Time
	reply     string
	window    int64
	cancelCtx context.CancelFunc
	lastHeard atomic.Int64 // from the gateway
	lastSent  atomic.Int64 // to the gateway

	mu       sync.Mutex
	cond     *sync.Cond
	acked    int64
	sent     int64
	err      error // the call was canceled or broke: writes fail with it
	body     *bodyPipe
	pubMu    sync.Mutex  // one message at a time, in number order
	accepted atomic.Bool // set under pubMu
	seq      uint64
	frame    []byte
}

// onCall accepts a call and runs it on the calling goroutine.
func (s *Server) onCall(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	c, err := decodeCall(m.Data)
	if err != nil {
		s.opts.Log.Warn("rigwire: a call that does not decode", "error", err)
		return
	}
	sc := &serverCall{s: s, key: strconv.FormatUint(s.ids.Add(1), 36), reply: m.Reply, window: c.window, start: time.Now()}
	sc.control = events.Child(s.control, sc.key)
	sc.cond = sync.NewCond(&sc.mu)
	now := time.Now().UnixNano()
	sc.lastHeard.Store(now)
	var body io.ReadCloser = http.NoBody
	if c.bodyLen > int64(len(c.first)) {
		sc.body = &bodyPipe{want: c.bodyLen, wake: make(chan struct{}, 1)}
		sc.body.push(1, c.first)
		body = sc.body
	} else if len(c.first) > 0 {
		body = io.NopCloser(bytes.NewReader(c.first))
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc.cancelCtx = cancel
	r, err := http.NewRequestWithContext(ctx, c.method, c.path, body)
	if err != nil {
		cancel()
		sc.publish(flagError, nil, "the call's request is invalid")
		return
	}
	r.Header, r.ContentLength, r.RequestURI, r.RemoteAddr = c.header, c.bodyLen, c.path, "nats"
	if c.bodyLen == 0 {
		r.Body = http.NoBody
	}
	s.mu.Lock()
	select {
	case <-s.stop: // a call taken as the server closed: its gateway fails over at once
		s.mu.Unlock()
		cancel()
		sc.publish(flagError, nil, "the agent is stopping")
		return
	default:
	}
	s.inFlight[sc.key] = sc
	s.wg.Add(1)
	s.mu.Unlock()
	// The acceptance goes with the answer's first message when that comes within acceptDelay (a whole answer is
	// then one message), else alone (acceptLoop).
	sc.run(r)
}

// run serves the call through the handler and ends its answer.
func (sc *serverCall) run(r *http.Request) {
	s := sc.s
	w := &responseWriter{sc: sc, header: http.Header{}}
	defer func() {
		s.mu.Lock()
		delete(s.inFlight, sc.key)
		s.mu.Unlock()
		sc.cancelCtx()
		s.wg.Done()
	}()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				s.opts.Log.Error("rigwire: the handler panicked", "path", r.URL.Path, "panic", p)
			}
			w.fail("the agent's handler failed")
		}
	}()
	s.h.ServeHTTP(w, r)
	w.finish()
}

// onControl takes the gateway's messages about a call: its body, acknowledgements, a cancel.
func (s *Server) onControl(m *nats.Msg) {
	key := events.LastToken(m.Subject)
	s.mu.Lock()
	sc := s.inFlight[key]
	s.mu.Unlock()
	if sc == nil || len(m.Data) == 0 {
		return
	}
	sc.lastHeard.Store(time.Now().UnixNano())
	r := reader{b: m.Data[1:]}
	switch m.Data[0] {
	case ctlAck:
		n := int64(r.uvarint())
		if r.bad {
			return
		}
		sc.mu.Lock()
		if n > sc.acked {
			sc.acked = n
			sc.cond.Broadcast()
		}
		sc.mu.Unlock()
	case ctlBody:
		seq := r.uvarint()
		if r.bad || sc.body == nil {
			sc.abort(ErrProtocol)
			return
		}
		if !sc.body.push(seq+1, r.b) {
			sc.abort(fmt.Errorf("%w: the request body's chunks are out of order", ErrOutOfOrder))
		}
	case ctlCancel:
		sc.abort(ErrCanceled)
	}
}

// abort ends the call: its request context is canceled, its writes and body reads fail.
func (sc *serverCall) abort(err error) {
	sc.mu.Lock()
	if sc.err == nil {
		sc.err = err
	}
	sc.cond.Broadcast()
	sc.mu.Unlock()
	if sc.body != nil {
		sc.body.fail(err)
	}
	sc.cancelCtx()
}

// publish sends one numbered message of the answer: flags, what they announce, then data. The first message of
// a call carries its acceptance.
func (sc *serverCall) publish(flags byte, w *responseWriter, reason string) error {
	sc.pubMu.Lock()
	defer sc.pubMu.Unlock()
	if !sc.accepted.Load() {
		flags |= flagAccept
		sc.accepted.Store(true)
	}
	f := append(sc.frame[:0], flags)
	f = binary.AppendUvarint(f, sc.seq)
	if flags&flagAccept != 0 {
		f = appendString(f, sc.control)
	}
	var data []byte
	if w != nil {
		if flags&flagHead != 0 {
			f = binary.AppendUvarint(f, uint64(w.status))
			f = appendHeader(f, w.header)
		}
		data = w.buf
	}
	if flags&flagError != 0 {
		f = appendString(f, reason)
	}
	f = append(f, data...)
	sc.frame = f
	sc.seq++
	sc.lastSent.Store(time.Now().UnixNano())
	return sc.s.nc.Publish(sc.reply, f)
}

// waitWindow waits until n more body bytes fit in the gateway's window, and counts them as sent.
func (sc *serverCall) waitWindow(n int64) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for sc.err == nil && sc.sent > sc.acked && sc.sent-sc.acked+n > sc.window {
		sc.cond.Wait()
	}
	if sc.err != nil {
		return sc.err
	}
	sc.sent += n
	return nil
}

// acceptDelay is how long a call's acceptance may wait to go with the answer's first message.
const acceptDelay = 5 * time.Millisecond

// acceptLoop accepts, alone, the calls whose answer has not begun within acceptDelay.
func (s *Server) acceptLoop() {
	t := time.NewTicker(acceptDelay)
	defer t.Stop()
	var late []*serverCall
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		late = late[:0]
		s.mu.Lock()
		for _, sc := range s.inFlight {
			if !sc.accepted.Load() && now.Sub(sc.start) >= acceptDelay {
				late = append(late, sc)
			}
		}
		s.mu.Unlock()
		for _, sc := range late {
			sc.pubMu.Lock()
			accepted := sc.accepted.Load()
			sc.pubMu.Unlock()
			if !accepted { // publish checks again: the answer may have begun meanwhile
				_ = sc.publish(0, nil, "")
			}
		}
	}
}

// sweep sends keepalives on quiet calls and cancels the calls whose gateway went silent.
func (s *Server) sweep() {
	defer close(s.done)
	t := time.NewTicker(min(s.opts.Keepalive, s.opts.IdleTimeout) / 4)
	defer t.Stop()
	keepalive := []byte{flagKeepalive}
	var live []*serverCall
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		live = live[:0]
		s.mu.Lock()
		for _, sc := range s.inFlight {
			live = append(live, sc)
		}
		s.mu.Unlock()
		for _, sc := range live {
			if now-sc.lastHeard.Load() > int64(s.opts.IdleTimeout) {
				sc.abort(fmt.Errorf("%w: the gateway", ErrIdle))
				continue
			}
			if now-sc.lastSent.Load() >= int64(s.opts.Keepalive) {
				sc.lastSent.Store(now)
				_ = s.nc.Publish(sc.reply, keepalive)
			}
		}
	}
}

// responseWriter is a call's http.ResponseWriter: it buffers up to a chunk, and publishes on Flush, on a full
// chunk and at the end, the head with the first of these.
type responseWriter struct {
	sc          *serverCall
	header      http.Header
	status      int
	wroteHeader bool
	headSent    bool
	done        bool
	buf         []byte
}

var _ http.Flusher = (*responseWriter)(nil)

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader || code < 200 || code > 999 {
		return // informational answers are not relayed
	}
	w.wroteHeader, w.status = true, code
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.done {
		return 0, http.ErrHandlerTimeout
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), ChunkSize-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		p, written = p[n:], written+n
		if len(w.buf) == ChunkSize {
			if err := w.send(0); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// send publishes the head (once) and what is buffered, with extra flags.
func (w *responseWriter) send(extra byte) error {
	if err := w.sc.waitWindow(int64(len(w.buf))); err != nil {
		return err
	}
	flags := extra
	if !w.headSent {
		flags |= flagHead
		w.headSent = true
	}
	if flags == 0 && len(w.buf) == 0 {
		return nil
	}
	err := w.sc.publish(flags, w, "")
	w.buf = w.buf[:0]
	if err != nil {
		w.sc.abort(err)
	}
	return err
}

// FlushError publishes the head and what is buffered at once.
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.done {
		return http.ErrHandlerTimeout
	}
	return w.send(0)
}

// Flush implements http.Flusher.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// finish ends the answer after the handler returned.
func (w *responseWriter) finish() {
	if w.done {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.send(flagEnd)
	w.done = true
}

// fail ends the answer with an error marker.
func (w *responseWriter) fail(reason string) {
	if w.done {
		return
	}
	w.done = true
	w.buf = w.buf[:0]
	_ = w.sc.publish(flagError, nil, reason)
}

// bodyPipe is a request body arriving in numbered chunks.
type bodyPipe struct {
	want int64
	wake chan struct{}

	mu     sync.Mutex
	next   uint64
	chunks [][]byte
	got    int64
	err    error
}

// push adds chunk number seq (from 1); false when it is out of order or past the declared length.
func (b *bodyPipe) push(seq uint64, data []byte) bool {
	b.mu.Lock()
	ok := seq == b.next+1 && b.got+int64(len(data)) <= b.want
	if ok {
		b.next = seq
		b.got += int64(len(data))
		b.chunks = append(b.chunks, data)
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return ok
}

func (b *bodyPipe) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *bodyPipe) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		if len(b.chunks) > 0 {
			n := copy(p, b.chunks[0])
			if b.chunks[0] = b.chunks[0][n:]; len(b.chunks[0]) == 0 {
				b.chunks = b.chunks[1:]
			}
			b.mu.Unlock()
			return n, nil
		}
		err, whole := b.err, b.got == b.want
		b.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case whole:
			return 0, io.EOF
		}
		<-b.wake
	}
}

func (b *bodyPipe) Close() error { return nil }
