package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	eventstream "github.com/gpumarket/gpumarket/services/sse" // named apart from the tests' sse, which writes streams
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

const (
	// maxRequestBytes bounds a request body; vLLM's own default limit is of this order.
	maxRequestBytes = 32 << 20
	// maxFrameBytes bounds one server-sent event; a longer one ends the stream as an upstream error.
	maxFrameBytes = 8 << 20
	// unknownModel names the model of an event when neither the request nor the response named one.
	unknownModel = "unknown"
)

// hopHeaders are the hop-by-hop headers (RFC 9110, 7.6.1), which a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

type claimsKey struct{}

// requireTicket refuses, with 401, a request without a valid route ticket for this offering issued within
// TicketMaxAge, and hands the ticket's claims on in the request's context.
func (a *Agent) requireTicket(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.Header.Get(ticket.Header)
		c, err := a.signer.Verify(raw, a.cfg.Now(), a.cfg.TicketMaxAge)
		if err != nil {
			msg := "This server answers only requests routed to it by the GPU Market gateway, and this one carries no valid route ticket."
			switch {
			case errors.Is(err, ticket.ErrExpired):
				msg = "The route ticket of this request has expired: send the request through the gateway again."
			case errors.Is(err, ticket.ErrOffering):
				msg = "The route ticket of this request is for another offering."
			}
			a.log.Info("request refused: no valid route ticket", "path", r.URL.Path, "error", err, "ticket_present", raw != "")
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_route_ticket", msg)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, ticketed{claims: c, raw: raw})))
	})
}

// ticketed is a request's verified ticket.
type ticketed struct {
	claims ticket.Claims
	raw    string
}

// exchange is what the agent learns of one request while relaying it.
type exchange struct {
	dialect       dialect // the wire format of the answer
	status        usage.Status
	model         string         // from the response, else from the request
	usage         *tokenUsage    // the upstream's count, when it gave one
	messages      *messagesUsage // a Messages stream's count, gathered from its events
	timings       *llamaTimings  // llama.cpp's timings, when the upstream is its server
	contentChunks int64          // streamed chunks that carried output
	firstToken    time.Time      // when the first output reached the client

	report   func() // keeps the request's usage event in the outbox; nil when the request bills nothing
	reported bool
}

// counted is the upstream's count of the request's tokens in the OpenAI form, nil when it gave none.
func (x *exchange) counted() *tokenUsage {
	if x.messages != nil {
		return x.messages.tokens(x.contentChunks)
	}
	return x.usage
}

// finish reports the request, once: relay calls it as soon as the response is whole, before the client can
// learn that it is, and serveInference after relay for a request that ended otherwise.
func (x *exchange) finish() {
	if x.report != nil && !x.reported {
		x.reported = true
		x.report()
	}
}

// serveInference relays an inference request and reports its usage. streamOptions says the endpoint takes
// stream_options (chat and text completions); d is the wire format of its answers. An endpoint of a native API
// the upstream was not found to serve (probe.go) is answered 404 as an unknown path is, without calling the
// upstream.
func (a *Agent) serveInference(streamOptions bool, d dialect) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if d != dialectOpenAI && !a.nativeNow().has(d) {
			writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url",
				fmt.Sprintf("Invalid URL (%s %s): this rig's inference server does not serve it.", r.Method, r.URL.Path))
			return
		}
		t := r.Context().Value(claimsKey{}).(ticketed)
		start := a.cfg.Now()
		mark := a.meter.enter(start)
		x := &exchange{dialect: d, status: usage.StatusOK}
		x.report = func() {
			end := a.cfg.Now()
			joules, source := a.meter.leave(mark, end)
			a.report(t, x, start, end, joules, source)
		}
		a.relay(w, r, streamOptions, x)
		x.finish()
	}
}

// serveModels relays GET /v1/models; it uses no GPU and bills nothing, so it makes no event.
func (a *Agent) serveModels(w http.ResponseWriter, r *http.Request) {
	a.relay(w, r, false, &exchange{})
}

// relay forwards the request upstream and the response back, filling x.
func (a *Agent) relay(w http.ResponseWriter, r *http.Request, streamOptions bool, x *exchange) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		x.status = usage.StatusError
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("The request body is larger than %d bytes.", maxRequestBytes))
		} else {
			x.status = usage.StatusCanceled // the client went away while sending
		}
		return
	}
	req := readInferenceRequest(body, streamOptions)
	x.model = req.model

	// Cancelled when the client goes away (the server cancels r's context) or stops reading.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, a.upstream+r.URL.RequestURI(), bytes.NewReader(req.body))
	if err != nil {
		x.status = usage.StatusError
		writeError(w, http.StatusInternalServerError, "server_error", "", "The request could not be forwarded.")
		return
	}
	copyHeaders(out.Header, r.Header)
	out.Header.Del(ticket.Header)     // the platform's, not the inference server's
	out.Header.Del("Accept-Encoding") // the agent reads what it relays: identity only
	out.Header.Del("Content-Length")  // set from the body, which may have been rewritten
	out.Header.Set("X-Request-Id", r.Context().Value(claimsKey{}).(ticketed).claims.RequestID)

	resp, err := a.client.Do(out)
	if err != nil {
		if r.Context().Err() != nil {
			x.status = usage.StatusCanceled
			return
		}
		x.status = usage.StatusError
		a.log.Warn("inference server unreachable", "upstream", a.upstream, "error", err)
		writeError(w, http.StatusBadGateway, "server_error", "upstream_unavailable",
			"The inference server behind this rig could not be reached.")
		return
	}
	defer resp.Body.Close()

	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	streaming := ok && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	copyHeaders(w.Header(), resp.Header)
	if streaming {
		w.Header().Del("Content-Length") // frames may be dropped or trimmed
	}
	w.WriteHeader(resp.StatusCode)

	// settle decides the request's status; whole is called when the response is whole, before its end goes to
	// the client, and reports the request then: the usage event is in the outbox before the client can learn
	// that the request is over, so that no crash leaves a completed request unbilled.
	settle := func(rerr error) {
		switch {
		case !ok:
			// The upstream refused or failed (a 5xx before the first byte, which the gateway fails over on):
			// its status went to the client as it was, and nothing was produced.
			x.status, x.usage, x.messages, x.timings = usage.StatusError, nil, nil, nil
			x.contentChunks, x.firstToken = 0, time.Time{}
		case rerr == nil:
			// The whole response went out; a client that hangs up after its last byte canceled nothing.
		case errors.Is(rerr, errClientGone) || r.Context().Err() != nil:
			x.status = usage.StatusCanceled
		default:
			x.status = usage.StatusError
			a.log.Warn("inference response broke off", "upstream", a.upstream, "error", rerr)
		}
	}
	whole := func() {
		settle(nil)
		x.finish()
	}
	var rerr error
	if streaming {
		// The status and headers go at once, as the upstream sent them: the client sees the response begin
		// before the first token (the gateway times its first byte), not with the first frame.
		if err := http.NewResponseController(w).Flush(); err != nil {
			rerr = errClientGone
		} else {
			rerr = a.relayStream(w, resp.Body, req.forcedUsage, x, whole)
		}
	} else {
		rerr = a.relayBody(w, resp.Body, x, whole)
	}
	if !x.reported {
		// A stream that ended without [DONE] is reported here, before the handler returns and the server
		// writes the response's end; so is a response that broke off.
		settle(rerr)
	}
}

// errClientGone is a failed write to the client.
var errClientGone = errors.New("the client went away")

// relayStream relays server-sent events frame by frame as package sse reads them, flushing each, and reads each
// chunk for the model, the output and the usage. When the agent forced include_usage, the client gets the stream
// it asked for: the usage-only chunk is dropped and the usage member removed from the other chunks (OpenAI sends
// "usage":null on each chunk only when the client asked for usage); every other byte is relayed as it came. A Messages or
// Responses stream is relayed byte for byte. whole runs before the frame that ends the stream is written: [DONE],
// message_stop, or response.completed, response.incomplete or response.failed.
func (a *Agent) relayStream(w http.ResponseWriter, body io.Reader, forcedUsage bool, x *exchange, whole func()) error {
	rc := http.NewResponseController(w)
	events := eventstream.NewReader(body, maxFrameBytes)
	for {
		frame, err := events.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out, output, done := a.readFrame(frame, forcedUsage, x)
		if done {
			whole()
		}
		if out != nil {
			if _, werr := w.Write(out); werr != nil {
				return errClientGone
			}
			if werr := rc.Flush(); werr != nil {
				return errClientGone
			}
			if output && x.firstToken.IsZero() {
				x.firstToken = a.cfg.Now()
			}
		}
		if done && x.dialect == dialectOpenAI {
			// The stream is complete, its usage read: the client may hang up at once, as
			// OpenAI's SDKs (and the gateway) do on [DONE]. That is no cancellation.
			return nil
		}
		// After the event that ends a Messages or Responses stream, whatever else the upstream sends
		// is relayed too: neither API makes that event the last byte as [DONE] is. The request is
		// reported by then, so a client that hangs up on that event canceled nothing either.
	}
}

// readFrame reads one event and returns what to send the client (nil to drop it), whether it carried output,
// and whether it ends the stream: [DONE], or the last event of a Messages or Responses stream. Those go to the
// client as they came.
func (a *Agent) readFrame(frame eventstream.Frame, forcedUsage bool, x *exchange) (out []byte, output, done bool) {
	if x.dialect != dialectOpenAI {
		output, done = a.readNativeFrame(frame, x)
		return frame, output, done
	}
	if frame.Done() {
		return frame, false, true
	}
	out, output = a.readChunk(frame, forcedUsage, x)
	return out, output, false
}

// readChunk reads one chunk of a chat or text completion stream and returns what to send the client (nil to drop
// it) and whether it carried output.
func (a *Agent) readChunk(frame eventstream.Frame, forcedUsage bool, x *exchange) (out []byte, output bool) {
	from, to, ok := frame.Data()
	if !ok {
		return frame, false
	}
	payload := frame[from:to]
	if len(payload) == 0 || payload[0] != '{' {
		return frame, false // not a chunk
	}
	var chunk streamChunk
	if err := json.Unmarshal(payload, &chunk); err != nil {
		return frame, false
	}
	if chunk.Model != "" {
		x.model = chunk.Model
	}
	if chunk.Usage != nil {
		x.usage = chunk.Usage
	}
	if chunk.Timings != nil {
		x.timings = chunk.Timings
	}
	output = chunk.carriesOutput()
	if output {
		x.contentChunks++
	}
	if !forcedUsage {
		return frame, output
	}
	if chunk.Usage != nil && len(chunk.Choices) == 0 {
		return nil, false // the usage-only chunk the client did not ask for
	}
	trimmed := withoutMember(payload, "usage")
	if len(trimmed) == len(payload) {
		return frame, output
	}
	out = make([]byte, 0, len(frame)-len(payload)+len(trimmed))
	return append(append(append(out, frame[:from]...), trimmed...), frame[to:]...), output
}

// relayBody relays a whole response as it comes, reading its usage and model on the way. Its last byte is
// held back until whole has run: with a Content-Length the client knows the response is whole at that byte,
// and net/http sends a large write to the connection at once, before the handler returns.
func (a *Agent) relayBody(w http.ResponseWriter, body io.Reader, x *exchange, whole func()) error {
	var scan memberScanner
	buf := make([]byte, 32<<10)
	var last []byte // the byte held back: one, once any came
	for {
		n, err := body.Read(buf)
		if n > 0 {
			_, _ = scan.Write(buf[:n])
			if err := writeAll(w, last, buf[:n-1]); err != nil {
				return err
			}
			last = append(last[:0], buf[n-1])
			if x.firstToken.IsZero() {
				x.firstToken = a.cfg.Now()
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	usage, model := scan.result(x.dialect)
	x.usage = usage
	if x.dialect == dialectOpenAI {
		x.timings = scan.llamaTimings() // the native APIs count the cache in their usage
	}
	if model != "" {
		x.model = model
	}
	whole()
	return writeAll(w, last)
}

// writeAll writes the non-empty parts to the client.
func writeAll(w io.Writer, parts ...[]byte) error {
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if _, err := w.Write(p); err != nil {
			return errClientGone
		}
	}
	return nil
}

// copyHeaders copies the end-to-end headers.
func copyHeaders(dst, src http.Header) {
	connection := src.Values("Connection")
	for name, values := range src {
		if isHopHeader(name, connection) {
			continue
		}
		dst[name] = append([]string(nil), values...)
	}
}

func isHopHeader(name string, connection []string) bool {
	for _, h := range hopHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	for _, v := range connection {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), name) {
				return true
			}
		}
	}
	return false
}
