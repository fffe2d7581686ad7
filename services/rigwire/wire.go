package rigwire

import (
	"encoding/binary"
	"errors"
	"net/http"
	"time"
)

// Defaults of Options.
const (
	// ChunkSize is the most body bytes one message carries, well below NATS's default 1 MiB payload limit.
	ChunkSize = 64 << 10
	// DefaultWindow is the body bytes an agent may have published and not yet acknowledged on one call.
	DefaultWindow = 1 << 20
	// DefaultAcceptTimeout bounds the wait for a rig to accept a call. A rig with no agent subscribed is known at
	// once (no responders); this bounds only a connected rig that does not answer, and is long enough that a
	// machine stalled for a moment does not give up on calls a healthy rig took (docs/rig-transport.md).
	DefaultAcceptTimeout = 3 * time.Second
	// DefaultKeepalive is how often each side tells the other that a call it is quiet on is still alive.
	DefaultKeepalive = time.Second
	// DefaultIdleTimeout is how long a side waits without a word of a call before taking it as broken.
	DefaultIdleTimeout = 3 * time.Second
	// wireVersion is the first byte of a call.
	wireVersion = 1
)

// Errors a call can end with. Each is a failure of the rig, as a refused or broken connection is.
var (
	// ErrNoRig: no agent accepted the call within AcceptTimeout, or none is subscribed.
	ErrNoRig = errors.New("rigwire: no rig accepted the call")
	// ErrIdle: the rig went silent for longer than IdleTimeout.
	ErrIdle = errors.New("rigwire: the rig went silent")
	// ErrOutOfOrder: a message of the answer is missing or came twice.
	ErrOutOfOrder = errors.New("rigwire: the answer's messages are out of order")
	// ErrBroken: the rig reported that its answer broke off.
	ErrBroken = errors.New("rigwire: the rig's answer broke off")
	// ErrProtocol: a message that does not decode.
	ErrProtocol = errors.New("rigwire: a malformed message")
	// ErrCanceled: the call was canceled by its caller.
	ErrCanceled = errors.New("rigwire: the call was canceled")
)

// Reply flags: what a message on the reply subject carries, in this order after its number.
const (
	flagAccept    = 1 << iota // the control subject
	flagHead                  // status and headers
	flagEnd                   // the body is whole after this message's data
	flagError                 // the answer broke off: a reason follows
	flagKeepalive             // nothing else: unnumbered
)

// Control kinds: the first byte of a message from the gateway on a call's control subject.
const (
	ctlBody   = 'B' // a numbered chunk of the request body
	ctlAck    = 'K' // the body bytes read so far (uvarint), also a keepalive
	ctlCancel = 'X' // the caller is gone
)

// appendString appends a length-prefixed string.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendHeader appends a header as a count of name/value pairs and the pairs.
func appendHeader(b []byte, h http.Header) []byte {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for name, vs := range h {
		for _, v := range vs {
			b = appendString(appendString(b, name), v)
		}
	}
	return b
}

// reader decodes what the append functions wrote; the first failure sticks.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// header decodes a header, its names in canonical form as net/http reads them off a connection.
func (r *reader) header() http.Header {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	h := make(http.Header, n)
	for i := uint64(0); i < n && !r.bad; i++ {
		name := http.CanonicalHeaderKey(r.string())
		h[name] = append(h[name], r.string())
	}
	return h
}

// callMsg is a call as the agent reads it.
type callMsg struct {
	method, path string
	header       http.Header
	window       int64
	bodyLen      int64
	first        []byte // the body's first part, at most ChunkSize
}

func appendCall(b []byte, method, path string, header http.Header, window int64, body []byte) []byte {
	b = append(b, wireVersion)
	b = appendString(b, method)
	b = appendString(b, path)
	b = appendHeader(b, header)
	b = binary.AppendUvarint(b, uint64(window))
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body[:min(len(body), ChunkSize)]...)
}

func decodeCall(data []byte) (callMsg, error) {
	r := reader{b: data}
	if r.byte() != wireVersion {
		return callMsg{}, ErrProtocol
	}
	c := callMsg{method: r.string(), path: r.string(), header: r.header()}
	c.window = int64(r.uvarint())
	c.bodyLen = int64(r.uvarint())
	c.first = r.b
	if r.bad || c.window <= 0 || int64(len(c.first)) > c.bodyLen || len(c.first) > ChunkSize {
		return callMsg{}, ErrProtocol
	}
	return c, nil
}

// replyMsg is one message of an answer as the gateway reads it.
type replyMsg struct {
	flags   byte
	seq     uint64
	control string
	status  int
	header  http.Header
	reason  string
	data    []byte
}

func decodeReply(data []byte) (replyMsg, error) {
	r := reader{b: data}
	m := replyMsg{flags: r.byte()}
	if m.flags&flagKeepalive != 0 {
		return m, nil
	}
	m.seq = r.uvarint()
	if m.flags&flagAccept != 0 {
		m.control = r.string()
	}
	if m.flags&flagHead != 0 {
		m.status = int(r.uvarint())
		m.header = r.header()
	}
	if m.flags&flagError != 0 {
		m.reason = r.string()
	}
	m.data = r.b
	if r.bad || (m.flags&flagHead != 0 && (m.status < 100 || m.status > 999)) {
		return replyMsg{}, ErrProtocol
	}
	return m, nil
}
