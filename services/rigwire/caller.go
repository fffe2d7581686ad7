package rigwire

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
)

// Options tune a Caller or a Server; the zero value is the defaults.
type Options struct {
	AcceptTimeout time.Duration // DefaultAcceptTimeout when 0 (Caller)
	Keepalive     time.Duration // DefaultKeepalive when 0
	IdleTimeout   time.Duration // DefaultIdleTimeout when 0
	Window        int64         // DefaultWindow when 0 (Caller: the window it declares)
	Log           *slog.Logger  // slog.Default() when nil
}

func (o Options) withDefaults() Options {
	if o.AcceptTimeout <= 0 {
		o.AcceptTimeout = DefaultAcceptTimeout
	}
	if o.Keepalive <= 0 {
		o.Keepalive = DefaultKeepalive
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Caller calls rigs over a NATS connection of the platform's account: one per gateway process. Its calls'
// answers all arrive on one wildcard subscription, whose messages are handed to each call by its id.
//
// The goroutines waiting for an answer take the subscription's messages themselves: a message goes straight from
// the connection's reader to a waiting goroutine, most often the one whose call it answers, with no goroutine
// between them to wake (at a thousand calls a second on two cores, that hop was a fifth of what the gateway's
// NATS hop cost). A message for another call is handed to it. Since several goroutines take messages at once, a
// call puts its messages back in number order itself. A drainer takes what arrives while no one waits.
type Caller struct {
	nc    *nats.Conn
	opts  Options
	token string
	sub   *nats.Subscription
	msgs  chan *nats.Msg
	ids   atomic.Uint64

	mu    sync.Mutex
	calls map[uint64]*call

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewCaller subscribes to the answers of the calls it will make, under a token of its own.
func NewCaller(nc *nats.Conn, opts Options) (*Caller, error) {
	c := &Caller{nc: nc, opts: opts.withDefaults(), token: events.NewToken(),
		calls: map[uint64]*call{}, stop: make(chan struct{}), done: make(chan struct{}),
		msgs: make(chan *nats.Msg, answerQueue)}
	sub, err := nc.ChanSubscribe(events.RigAnswersSubject(c.token), c.msgs)
	if err != nil {
		return nil, fmt.Errorf("rigwire: subscribe to answers: %w", err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("rigwire: subscribe to answers: %w", err)
	}
	c.sub = sub
	go c.sweep()
	go c.drain()
	return c, nil
}

const (
	// answerQueue is how many answer messages may wait for a goroutine to take them; a full queue drops a
	// message (its call then fails as out of order). Waiting goroutines and the drainer keep it near empty.
	answerQueue = 1 << 16
	// drainEvery is how often the drainer takes the messages that arrived while no goroutine waited: the rest
	// of answers whose readers left, late acceptances to cancel, keepalives of calls no one waits on.
	drainEvery = 2 * time.Millisecond
	// maxAhead bounds the messages a call holds that came before their turn.
	maxAhead = 1024
)

// drain hands on the messages no waiting goroutine took.
func (c *Caller) drain() {
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		for more := true; more; {
			select {
			case m := <-c.msgs:
				c.dispatch(m)
			default:
				more = false
			}
		}
	}
}

// wait returns when the call is woken, after handing on the messages that came meanwhile.
func (k *call) wait() {
	select {
	case <-k.wake:
		return
	default:
	}
	select {
	case <-k.wake:
	case m := <-k.c.msgs:
		k.c.dispatch(m)
	}
}

// Close ends every call in flight with an error and unsubscribes. It does not close the connection.
func (c *Caller) Close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		_ = c.sub.Unsubscribe()
		c.mu.Lock()
		calls := c.calls
		c.calls = map[uint64]*call{}
		c.mu.Unlock()
		for _, k := range calls {
			k.fail(ErrCanceled)
		}
		for more := true; more; { // the messages left are of calls that ended
			select {
			case <-c.msgs:
			default:
				more = false
			}
		}
	})
}

// lateAcceptGrace is how long a call given up before its acceptance waits for one, to cancel it.
const lateAcceptGrace = 30 * time.Second

// call is one call in flight, as the gateway sees it.
type call struct {
	c         *Caller
	id        uint64
	start     time.Time
	lastHeard atomic.Int64 // unix nanoseconds of the last message from the rig
	lastSent  atomic.Int64 // unix nanoseconds of the last message to the rig
	wake      chan struct{}

	mu         sync.Mutex
	seq        uint64              // the next number due
	ahead      map[uint64]replyMsg // messages that came before their turn (several goroutines dispatch)
	aheadBytes int64               // their body bytes, counted against the window
	accepted   bool
	control    string
	head       *replyMsg
	chunks     [][]byte
	cur        []byte
	queued     int64
	end        bool
	err        error
	canceled   bool // by the caller: a late acceptance gets a cancel
	// wantsControl: a goroutine waits for the acceptance itself (to send the rest of the body); otherwise an
	// acceptance alone wakes no one.
	wantsControl bool
	closed       bool
	consumed     int64
	acked        int64
	stopCtx      func() bool
}

func (k *call) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Call sends an HTTP request to the rig serving an offering (POST with the body, GET when it is nil) and returns
// its answer once the rig sent its head. An error before then is a failure of the rig, to fail over on; after it,
// the Body's Read returns an error when the answer breaks off. The context's end cancels the call at the rig. The
// caller must close the Body.
func (c *Caller) Call(ctx context.Context, providerID, offeringID, path string, header http.Header, body []byte) (*http.Response, error) {
	method := http.MethodPost
	if body == nil {
		method = http.MethodGet
	}
	k := &call{c: c, id: c.ids.Add(1), start: time.Now(), wake: make(chan struct{}, 1)}
	k.lastHeard.Store(k.start.UnixNano())
	k.lastSent.Store(k.start.UnixNano())
	c.mu.Lock()
	c.calls[k.id] = k
	c.mu.Unlock()

	reply := events.RigAnswerSubject(providerID, offeringID, c.token, strconv.FormatUint(k.id, 36))
	bp := framePool.Get().(*[]byte)
	frame := appendCall((*bp)[:0], method, path, header, c.opts.Window, body)
	err := c.nc.PublishMsg(&nats.Msg{Subject: events.RigCallRequestSubject(providerID, offeringID),
		Reply: reply, Data: frame})
	*bp = frame
	framePool.Put(bp)
	if err != nil {
		c.forget(k)
		return nil, fmt.Errorf("rigwire: send the call: %w", err)
	}
	k.stopCtx = context.AfterFunc(ctx, func() { k.cancel(ctx) })

	if len(body) > ChunkSize {
		if err := k.sendBody(body[ChunkSize:]); err != nil {
			k.close()
			return nil, err
		}
	}
	for {
		k.mu.Lock()
		if k.head != nil {
			h := k.head
			k.mu.Unlock()
			return k.response(h), nil
		}
		if k.err != nil {
			err := k.err
			k.mu.Unlock()
			k.close()
			return nil, err
		}
		k.mu.Unlock()
		k.wait()
	}
}

// sendBody waits for the call's acceptance and sends the rest of the request body to its agent.
func (k *call) sendBody(rest []byte) error {
	for {
		k.mu.Lock()
		control, err := k.control, k.err
		k.wantsControl = control == ""
		k.mu.Unlock()
		if err != nil {
			return err
		}
		if control != "" {
			break
		}
		k.wait()
	}
	k.signal() // the wait for the head may begin at once
	frame := make([]byte, 0, ChunkSize+16)
	for seq := uint64(1); len(rest) > 0; seq++ {
		n := min(len(rest), ChunkSize)
		frame = append(binary.AppendUvarint(append(frame[:0], ctlBody), seq), rest[:n]...)
		if err := k.c.nc.Publish(k.control, frame); err != nil {
			return fmt.Errorf("rigwire: send the request body: %w", err)
		}
		rest = rest[n:]
	}
	k.lastSent.Store(time.Now().UnixNano())
	return nil
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// response is the http.Response of an answer's head.
func (k *call) response(h *replyMsg) *http.Response {
	resp := &http.Response{StatusCode: h.status, Status: strconv.Itoa(h.status) + " " + http.StatusText(h.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h.header, ContentLength: -1, Body: (*callBody)(k)}
	if cl := h.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			resp.ContentLength = n
		}
	}
	return resp
}

// dispatch hands a message on the Caller's subscription to its call.
func (c *Caller) dispatch(m *nats.Msg) {
	id, err := strconv.ParseUint(events.LastToken(m.Subject), 36, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	k := c.calls[id]
	c.mu.Unlock()
	if k == nil {
		return // a call that ended: a late keepalive, or the rest of an answer its reader left
	}
	if len(m.Data) == 0 && m.Header != nil {
		// The server's own answer: no subscriber for the call (status 503, "no responders").
		k.fail(fmt.Errorf("%w: none is connected", ErrNoRig))
		return
	}
	r, err := decodeReply(m.Data)
	if err != nil {
		k.fail(err)
		return
	}
	k.deliver(r)
}

// deliver takes one message of the answer.
func (k *call) deliver(r replyMsg) {
	k.lastHeard.Store(time.Now().UnixNano())
	if r.flags&flagKeepalive != 0 {
		return
	}
	k.mu.Lock()
	if k.err != nil || k.end {
		late := r.flags&flagAccept != 0 && k.canceled && !k.accepted
		if late {
			k.accepted, k.control = true, r.control
		}
		k.mu.Unlock()
		if late { // a call given up before the rig took it: the rig is told to stop
			_ = k.c.nc.Publish(r.control, []byte{ctlCancel})
			if k.closed {
				k.c.forget(k)
			}
		}
		return
	}
	if r.seq != k.seq {
		_, twice := k.ahead[r.seq]
		k.aheadBytes += int64(len(r.data))
		if r.seq < k.seq || twice || len(k.ahead) >= maxAhead || k.queued+k.aheadBytes > k.c.opts.Window+ChunkSize {
			k.err = fmt.Errorf("%w: message %d where %d was due", ErrOutOfOrder, r.seq, k.seq)
			k.mu.Unlock()
			k.signal()
			return
		}
		if k.ahead == nil {
			k.ahead = map[uint64]replyMsg{}
		}
		k.ahead[r.seq] = r
		k.mu.Unlock()
		return
	}
	var cancelAt string
	wake := k.wantsControl
	for {
		if at := k.apply(r); at != "" {
			cancelAt = at
		}
		wake = wake || r.flags != flagAccept || len(r.data) > 0 || k.err != nil
		next, ok := k.ahead[k.seq]
		if !ok || k.err != nil || k.end {
			break
		}
		delete(k.ahead, k.seq)
		k.aheadBytes -= int64(len(next.data))
		r = next
	}
	k.mu.Unlock()
	if cancelAt != "" {
		_ = k.c.nc.Publish(cancelAt, []byte{ctlCancel})
	}
	if wake {
		k.signal()
	}
}

// apply takes the message that is due, under k.mu; it returns the control subject to cancel the call at when a
// call canceled before its acceptance is accepted.
func (k *call) apply(r replyMsg) (cancelAt string) {
	k.seq++
	if r.flags&flagAccept != 0 {
		k.accepted, k.control = true, r.control
		if k.canceled {
			cancelAt = r.control
		}
	}
	if r.flags&flagHead != 0 {
		k.head = &r
	}
	if len(r.data) > 0 {
		k.chunks = append(k.chunks, r.data)
		k.queued += int64(len(r.data))
		if k.queued > k.c.opts.Window+ChunkSize {
			k.err = fmt.Errorf("%w: the rig sent past its window", ErrProtocol)
		}
	}
	switch {
	case r.flags&flagError != 0:
		k.err = fmt.Errorf("%w: %s", ErrBroken, r.reason)
	case r.flags&flagEnd != 0:
		k.end = true
	}
	return cancelAt
}

// fail ends the call with err unless it ended already.
func (k *call) fail(err error) {
	k.mu.Lock()
	if k.err == nil && !k.end {
		k.err = err
	}
	k.mu.Unlock()
	k.signal()
}

// cancel is the caller's context ending: the rig is told, and the call ends with the context's error.
func (k *call) cancel(ctx context.Context) {
	k.mu.Lock()
	live := k.err == nil && !k.end
	if live {
		k.err = fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx))
	}
	k.canceled = true
	control := k.control
	k.mu.Unlock()
	if live && control != "" {
		_ = k.c.nc.Publish(control, []byte{ctlCancel})
	}
	k.signal()
}

// close ends the call on the gateway's side: a call not at its end is canceled at the rig.
func (k *call) close() {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	live := k.err == nil && !k.end
	if live {
		k.err = ErrCanceled
	}
	control := k.control
	// A call given up before its acceptance (timed out, canceled) may still reach a rig late: it is kept a while
	// so that a late acceptance is answered with a cancel, and the rig stops rather than serve a request its
	// gateway no longer waits for.
	k.canceled = k.canceled || control == ""
	k.chunks, k.cur = nil, nil
	k.mu.Unlock()
	if k.stopCtx != nil {
		k.stopCtx()
	}
	if live && control != "" {
		_ = k.c.nc.Publish(control, []byte{ctlCancel})
	}
	if control == "" {
		return // forgotten by the sweep after lateAcceptGrace
	}
	k.c.forget(k)
}

func (c *Caller) forget(k *call) {
	c.mu.Lock()
	delete(c.calls, k.id)
	c.mu.Unlock()
}

// callBody is a call's answer body.
type callBody call

// Read returns the answer's bytes in order; an error other than io.EOF means the answer broke off.
func (b *callBody) Read(p []byte) (int, error) {
	k := (*call)(b)
	for {
		k.mu.Lock()
		if len(k.cur) == 0 && len(k.chunks) > 0 {
			k.cur = k.chunks[0]
			k.chunks[0] = nil
			k.chunks = k.chunks[1:]
			if len(k.chunks) == 0 {
				k.chunks = k.chunks[:0:0]
			}
		}
		if len(k.cur) > 0 {
			n := copy(p, k.cur)
			k.cur = k.cur[n:]
			k.queued -= int64(n)
			k.consumed += int64(n)
			var ack []byte
			if !k.end && k.err == nil && k.consumed-k.acked >= k.c.opts.Window/4 {
				k.acked = k.consumed
				ack = binary.AppendUvarint([]byte{ctlAck}, uint64(k.consumed))
			}
			control := k.control
			k.mu.Unlock()
			if ack != nil {
				_ = k.c.nc.Publish(control, ack)
				k.lastSent.Store(time.Now().UnixNano())
			}
			return n, nil
		}
		err, end := k.err, k.end
		k.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case end:
			return 0, io.EOF
		}
		k.wait()
	}
}

// Close ends the call; before the answer's end, it cancels it at the rig.
func (b *callBody) Close() error {
	(*call)(b).close()
	return nil
}

// sweep times the calls out: no acceptance within AcceptTimeout, silence for IdleTimeout. It also keeps the
// calls alive at their agents, which cancel a call they hear nothing of.
func (c *Caller) sweep() {
	defer close(c.done)
	every := min(c.opts.AcceptTimeout, c.opts.Keepalive, c.opts.IdleTimeout) / 4
	t := time.NewTicker(every)
	defer t.Stop()
	type ping struct {
		subject string
		ack     []byte
	}
	var live []*call
	var pings []ping
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		live = live[:0]
		c.mu.Lock()
		for _, k := range c.calls {
			live = append(live, k)
		}
		c.mu.Unlock()
		pings = pings[:0]
		for _, k := range live {
			k.mu.Lock()
			over := k.err != nil || k.end
			accepted, closed, control, consumed := k.accepted, k.closed, k.control, k.consumed
			k.mu.Unlock()
			switch {
			case closed && !accepted:
				if now.Sub(k.start) > lateAcceptGrace {
					c.forget(k)
				}
			case over:
			case !accepted:
				if now.Sub(k.start) > c.opts.AcceptTimeout {
					k.fail(fmt.Errorf("%w within %s", ErrNoRig, c.opts.AcceptTimeout))
				}
			case now.UnixNano()-k.lastHeard.Load() > int64(c.opts.IdleTimeout):
				k.fail(fmt.Errorf("%w for %s", ErrIdle, c.opts.IdleTimeout))
			case now.UnixNano()-k.lastSent.Load() >= int64(c.opts.Keepalive):
				k.lastSent.Store(now.UnixNano())
				pings = append(pings, ping{control, binary.AppendUvarint([]byte{ctlAck}, uint64(consumed))})
			}
		}
		for _, p := range pings {
			_ = c.nc.Publish(p.subject, p.ack)
		}
	}
}
