package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/sse"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// Sending a request to the rigs routing chose, and relaying the answer.
//
// Each attempt has a request id of its own ("req_" and random hex) and a route ticket for its
// offering, which fixes the terms the meter bills it by: the offering's asks and the tier's price
// in force now, and the bounds on its billable tokens (routing.BoundsFor). A rig that failed may
// still report its failed attempt, and the meter takes one event per request id, so a retry under
// the same id would go unbilled. The candidates are tried in routing's order (at most
// routing.MaxCandidates: a first choice and two retries); the next is tried when an attempt fails
// before its first byte: a connection error, a 5xx, a 401 or 403 (the rig refused a ticket the
// platform signed, so it is misconfigured, not the customer), a redirect (never followed), or an
// answer that is not an OpenAI response (a 2xx that is neither JSON nor, for a stream, an event
// stream; a body larger than maxResponseBytes). The rig is called over the NATS connection its
// agent holds (Config.Rigs, package rigwire): the gateway dials no rig, and a rig that is not
// connected fails within rigwire's accept timeout. Any other answer is the answer: relayed with X-GPUMarket-Request-Id,
// X-GPUMarket-Offering and X-GPUMarket-Tier, a stream frame by frame with a flush after each,
// a whole response as it comes, never held whole. Only Content-Type, Content-Length and
// Cache-Control of the rig's headers are passed on: a provider sets no cookie or other header
// on the platform's origin. A whole answer whose carbon routing estimated goes out chunked, with
// its estimate as a trailer (carbon.go).
//
// The gateway reads the usage of each response as it passes: a whole response's usage member,
// a stream's usage chunk. A streaming request that did not ask for that chunk gets
// stream_options.include_usage set on its way to the rig, and the client gets the stream it
// asked for: the usage chunk is dropped and the trailing "usage":null taken out of the others.
//
// The client's going away cancels the request to the rig (it is the client request's
// context), and the agent then reports what was produced until then. Every attempt that
// reached a rig is recorded (requestlog.RequestLog) with the usage the response reported, and
// observed by routing; the admission reservation is settled with the final attempt's id.

const (
	// statusClientClosed records an attempt the client left before the rig answered (nginx's
	// 499); no response was written.
	statusClientClosed = wire.StatusClientClosed
	// maxFrameBytes bounds one server-sent event; a longer one ends the stream as broken.
	maxFrameBytes = 8 << 20
	// maxUsageScan bounds how much of a whole response is kept to read its usage from; the
	// usage of a larger one (a big batch of embeddings) goes unseen.
	maxUsageScan = 4 << 20
	// maxResponseBytes bounds what is relayed of one answer, streamed or not; a larger one ends as
	// broken. The largest legitimate answers are big batches of embeddings.
	maxResponseBytes = 256 << 20
	// clientWriteIdle is how long a client may take to read what the gateway writes it: writing
	// pushes the connection's deadlines this far (httpx.DeadlineWriter), so a stream lasts as long as it
	// flows and a client that stops reading is let go.
	clientWriteIdle = 2 * time.Minute
)

// attempt is one try of a candidate.
type attempt struct {
	cand      routing.Candidate
	requestID string
	start     time.Time
	end       func() // routing's in-flight count
	// native says the request goes to the candidate's engine in its own dialect (native.go).
	native bool
}

// outcome is how an attempt ended, as the gateway saw it.
type outcome struct {
	httpStatus int
	status     requestlog.GatewayStatus
	usage      *admission.TokenCount
	firstToken time.Time // zero when no output came
	at         time.Time
	// What was relayed: a stream's output text in bytes and the chunks that carried any, or
	// the bytes of a whole answer (requestlog.GatewayRequest).
	outputBytes, outputChunks int64
}

// forward tries the candidates and relays the first answer that is not a failure.
func (g *Gateway) forward(c echo.Context, key accounts.APIKey, req *gatewayRequest, candidates []routing.Candidate,
	res *admission.Reservation) error {
	ctx := c.Request().Context()
	settled := false
	settle := func(e admission.Ending) admission.Hold {
		settled = true
		return res.Settle(admission.SettlementOf(e))
	}
	defer func() {
		if !settled {
			settle(admission.Ending{}) // no attempt reached a rig
		}
	}()
	var lastErr error
	for i, cand := range candidates {
		a := &attempt{cand: cand, requestID: g.attemptID(ctx, i), start: g.now()}
		tk, err := g.cfg.Tickets.Sign(ticket.Claims{RequestID: a.requestID, AccountID: key.AccountID, APIKeyID: key.ID,
			OfferingID: cand.OfferingID, Tier: string(cand.Tier), Kind: req.ep.kind,
			AskInput: int64(cand.AskInput), AskOutput: int64(cand.AskOutput), PriceID: cand.PriceID,
			MaxInputTokens: req.bounds.MaxInputTokens, MaxOutputTokens: req.bounds.MaxOutputTokens, Stream: req.stream,
			IssuedAt: a.start})
		if err != nil {
			return g.writeGatewayError(c, err)
		}
		resp, err := g.send(ctx, req, a, tk)
		if err != nil {
			a.end()
			if ctx.Err() != nil {
				// The client went away before the rig answered; the rig may have the request
				// and report it, with nothing produced (docs/failure-cases.md, case 18).
				o := outcome{httpStatus: statusClientClosed, status: requestlog.GatewayCanceled, at: g.now()}
				g.observe(req, a, o)
				g.record(key, req, a, o, settle(admission.Ending{RequestID: a.requestID}))
				return nil
			}
			g.cfg.Router.Failure(cand.OfferingID)
			g.observe(req, a, outcome{status: requestlog.GatewayError, at: g.now()})
			// Recorded as failed over with no HTTP status: the rig did not take the call, which its
			// reliability record counts as an error (docs/reliability.md). A rig that took it late and
			// reports it is billed by its ticket, as after any failover.
			g.record(key, req, a, outcome{status: requestlog.GatewayFailedOver, at: g.now()}, admission.Hold{})
			g.log.Warn("gateway: rig unreachable; trying the next", "offering", cand.OfferingID, "request_id", a.requestID, "err", err)
			lastErr = err
			continue
		}
		if why := failedAnswer(req, resp); why != "" {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			a.end()
			g.cfg.Router.Failure(cand.OfferingID)
			o := outcome{httpStatus: resp.StatusCode, status: requestlog.GatewayFailedOver, at: g.now()}
			g.observe(req, a, o)
			g.record(key, req, a, o, admission.Hold{})
			g.log.Warn("gateway: rig failed before its first byte; trying the next", "offering", cand.OfferingID,
				"request_id", a.requestID, "status", resp.StatusCode, "why", why)
			lastErr = fmt.Errorf("offering %s answered %d: %s", cand.OfferingID, resp.StatusCode, why)
			continue
		}
		g.cfg.Router.Success(cand.OfferingID)
		g.cfg.Router.Served(req.route.Conversation, cand.OfferingID)
		o := g.relay(c, req, a, resp)
		resp.Body.Close()
		a.end()
		g.observe(req, a, o)
		// Settled before the record is written, which carries the hold it leaves.
		hold := settle(admission.Ending{RequestID: a.requestID, Answered: true, HTTPStatus: o.httpStatus,
			RelayedBytes: o.outputBytes, RelayedChunks: o.outputChunks})
		g.record(key, req, a, o, hold)
		return nil
	}
	ge := wire.New(services.CodeUnavailable, "no_capacity", "",
		fmt.Sprintf("No offering of %s in the %s tier could serve the request; retry shortly.", req.route.Model, req.route.Tier))
	ge.RetryAfter, ge.Cause = time.Second, lastErr
	return g.writeGatewayError(c, ge)
}

// failedAnswer says why an answer is a failure of the rig, to fail over on, or "" when it is an
// answer to relay: a 5xx; a 401 or 403 to a ticket the platform signed; a redirect, which the
// gateway never follows; a success that is not an OpenAI response (JSON, or an event stream when
// one was asked for) or is declared larger than maxResponseBytes; an error that is not JSON.
func failedAnswer(req *gatewayRequest, resp *http.Response) string {
	status, ct := resp.StatusCode, mediaType(resp.Header.Get("Content-Type"))
	switch {
	case status >= 500:
		return "a server error"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "it refused the platform's route ticket"
	case status >= 300 && status < 400:
		return "a redirect, which the gateway does not follow"
	case status < 200:
		return "an informational status"
	case resp.ContentLength > maxResponseBytes:
		return fmt.Sprintf("an answer of %d bytes, more than %d", resp.ContentLength, maxResponseBytes)
	case status < 300 && req.stream && ct != "text/event-stream" && ct != "application/json":
		return fmt.Sprintf("a %q answer to a streaming request", ct)
	case status < 300 && !req.stream && ct != "application/json":
		return fmt.Sprintf("a %q answer where JSON was due", ct)
	case status >= 400 && ct != "application/json":
		return fmt.Sprintf("a %d error that is %q, not JSON", status, ct)
	}
	return ""
}

// mediaType is a Content-Type's media type, lower-case, without its parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// errNoRigs is a gateway built without a way to call rigs.
var errNoRigs = errors.New("the gateway has no connection to the rigs")

// send sends the request to the attempt's candidate with its route ticket, counting it in
// flight with routing until a.end is called. The endpoint's path is the platform's.
func (g *Gateway) send(ctx context.Context, req *gatewayRequest, a *attempt, tk string) (*http.Response, error) {
	a.end = func() {}
	if g.cfg.Rigs == nil {
		return nil, errNoRigs
	}
	header := http.Header{"Content-Type": {echo.MIMEApplicationJSON}, ticket.Header: {tk}}
	if req.stream {
		header["Accept"] = []string{"text/event-stream"}
	}
	a.end = g.cfg.Router.Begin(a.cand.OfferingID)
	if batchLineOf(ctx) != nil { // the admin's batch queue shows where batch lines run
		end, endLine := a.end, g.batchLoad.Begin(a.cand.OfferingID)
		a.end = func() { end(); endLine() }
	}
	path, body := req.ep.rigPath(), req.body
	if a.native = req.passesThrough(a.cand); a.native {
		path, body = req.ep.path, req.nativeBody
		for name, v := range req.nativeHeader {
			header[name] = v
		}
		if req.ep.nativeAPI() == catalog.NativeMessages && header.Get("Anthropic-Version") == "" {
			header["Anthropic-Version"] = []string{anthropicVersion}
		}
	}
	return g.cfg.Rigs.Call(ctx, a.cand.ProviderID, a.cand.OfferingID, path, header, body)
}

// The headers every answer carries, in their canonical form.
var (
	requestIDHeader = http.CanonicalHeaderKey("X-GPUMarket-Request-Id")
	offeringHeader  = http.CanonicalHeaderKey("X-GPUMarket-Offering")
	tierHeader      = http.CanonicalHeaderKey("X-GPUMarket-Tier")
	hardwareHeader  = http.CanonicalHeaderKey("X-GPUMarket-Hardware")
)

// relay answers the client with the rig's response and reads its usage on the way.
func (g *Gateway) relay(c echo.Context, req *gatewayRequest, a *attempt, resp *http.Response) outcome {
	w := c.Response()
	h := w.Header()
	// Set under their canonical names, as Header.Set would, without canonicalising each anew.
	h[requestIDHeader] = []string{a.requestID}
	h[offeringHeader] = []string{a.cand.OfferingID}
	h[tierHeader] = []string{string(a.cand.Tier)}
	if a.cand.GPUName != "" {
		h[hardwareHeader] = []string{strconv.Itoa(a.cand.GPUCount) + "x " + a.cand.GPUName}
	}
	if a.native {
		return g.relayNative(c, req, a, resp)
	}
	if req.ep.dialect != nil {
		return g.relayTranslated(c, req, a, resp)
	}
	for _, name := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(name); v != "" {
			h.Set(name, v)
		}
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	streaming := ok && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
	// A whole answer of known, small length is read before it is relayed, so that its own
	// carbon goes in a header; any other whole answer's goes in a trailer, which needs it
	// chunked: the rig's Content-Length is then not passed on.
	small := ok && !streaming && resp.ContentLength >= 0 && resp.ContentLength <= maxUsageScan
	trailer := setCarbonHeaders(h, a.cand, ok && !streaming && !small)
	if small {
		return g.relaySmall(c, req, a, resp)
	}
	if streaming {
		h.Set("X-Accel-Buffering", "no") // a reverse proxy in front must not hold frames back
	} else if resp.ContentLength >= 0 && !trailer {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	// The connection's deadlines were lifted while the rig worked; from here each write moves
	// them on.
	out, _ := httpx.NewDeadlineWriter(w, clientWriteIdle)
	w.WriteHeader(resp.StatusCode)
	if streaming {
		// The headers go at once, as the rig sent them: the client knows the stream started
		// (and where it is served) before the first token.
		_ = out.Flush()
	}

	o := outcome{httpStatus: resp.StatusCode, status: requestlog.GatewayOK}
	body := &boundedReader{r: resp.Body, left: maxResponseBytes}
	var err error
	if streaming {
		err = g.relayStream(out, body, req.forcedUsage, &o, func(u *admission.TokenCount) (money.Pico, bool) { return costOf(a, req, u) })
	} else {
		err = g.relayBody(out, body, ok, &o)
	}
	if trailer {
		setCarbonTrailer(h, a.cand, o)
	}
	o.at = g.now()
	switch {
	case err == nil && ok:
		// The whole response went out; a client that hangs up after its last byte canceled
		// nothing.
	case c.Request().Context().Err() != nil || errors.Is(err, errClientGone):
		o.status = requestlog.GatewayCanceled
	case err != nil:
		o.status = requestlog.GatewayError
		g.log.Warn("gateway: a rig's response broke off", "offering", a.cand.OfferingID, "request_id", a.requestID, "err", err)
	case !ok:
		o.status = requestlog.GatewayError
	}
	return o
}

// relaySmall reads a whole answer of known length at most maxUsageScan, sets the request's
// carbon from its usage as a header, puts its cost in its usage (cost.go), and relays it with its length.
func (g *Gateway) relaySmall(c echo.Context, req *gatewayRequest, a *attempt, resp *http.Response) outcome {
	w := c.Response()
	o := outcome{httpStatus: resp.StatusCode, status: requestlog.GatewayOK}
	// Read into a buffer one byte longer than announced, so that the read goes on to the body's
	// end, where a longer answer shows. The body stops at its end.
	body := make([]byte, resp.ContentLength+1)
	n, err := io.ReadFull(resp.Body, body)
	body = body[:n]
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil // it ended: at its length, or short of it, which the check below tells
	}
	if len(body) > 0 {
		o.firstToken = g.now()
	}
	if err == nil && int64(len(body)) != resp.ContentLength {
		err = fmt.Errorf("the answer is %d bytes, not the %d it announced", len(body), resp.ContentLength)
	}
	if err == nil {
		o.usage = wire.UsageOf(body)
		setCarbonTrailer(w.Header(), a.cand, o)
		if cost, ok := costOf(a, req, o.usage); ok && resp.StatusCode < 300 {
			body = wire.WithCost(body, cost)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	// One write, bounded by a write deadline; the read deadline stays lifted (serve), so the
	// connection's background read goes on watching for the client's leaving.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(clientWriteIdle))
	w.WriteHeader(resp.StatusCode)
	o.outputBytes = int64(len(body)) // what was relayed, its cost included
	// Flushed at once: the answer is whole, and the client need not wait for the gateway's
	// records of it (observe, record, settle), which follow.
	_, werr := w.Write(body)
	if werr == nil {
		werr = rc.Flush()
	}
	if werr != nil && err == nil {
		err = errClientGone
	}
	o.at = g.now()
	switch {
	case err == nil:
	case c.Request().Context().Err() != nil || errors.Is(err, errClientGone):
		o.status = requestlog.GatewayCanceled
	default:
		o.status = requestlog.GatewayError
		g.log.Warn("gateway: a rig's response broke off", "offering", a.cand.OfferingID, "request_id", a.requestID, "err", err)
	}
	return o
}

// errClientGone is a failed write to the client.
var errClientGone = errors.New("the client went away")

// errTooLarge ends an answer longer than maxResponseBytes.
var errTooLarge = fmt.Errorf("the answer is longer than %d bytes", maxResponseBytes)

// boundedReader reads at most left bytes, then fails with err (errTooLarge when nil).
type boundedReader struct {
	r    io.Reader
	left int64
	err  error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.err != nil {
			return 0, b.err
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// relayBuffers holds relayBody's copy buffers for reuse: one made for every response would be
// most of what the gateway allocates for a small one.
var relayBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// relayBody copies a whole response as it comes, keeping up to maxUsageScan bytes of it to
// read the usage from once it is over.
func (g *Gateway) relayBody(w *httpx.DeadlineWriter, body io.Reader, ok bool, o *outcome) error {
	var kept bytes.Buffer
	overflow := false
	pooled := relayBuffers.Get().(*[32 << 10]byte)
	defer relayBuffers.Put(pooled)
	buf := pooled[:]
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if o.firstToken.IsZero() {
				o.firstToken = g.now()
			}
			o.outputBytes += int64(n)
			if _, werr := w.Write(buf[:n]); werr != nil {
				return errClientGone
			}
			if !overflow && kept.Len()+n <= maxUsageScan {
				kept.Write(buf[:n])
			} else {
				overflow = true
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if ok && !overflow {
		o.usage = wire.UsageOf(kept.Bytes())
	}
	return nil
}

// relayStream relays server-sent events frame by frame as package sse reads them, flushing after
// each. It reads every chunk for its output text (what was relayed, and the time to first token)
// and the usage, and drops the usage chunk the gateway asked for when the client had not.
func (g *Gateway) relayStream(w *httpx.DeadlineWriter, body io.Reader, forcedUsage bool, o *outcome,
	costFor func(*admission.TokenCount) (money.Pico, bool)) error {
	events := sse.NewReader(body, maxFrameBytes)
	for {
		frame, err := events.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out, output := readChunk(frame, forcedUsage, o, costFor)
		if out != nil {
			if _, werr := w.Write(out); werr != nil {
				return errClientGone
			}
			if w.Flush() != nil {
				return errClientGone
			}
			if output > 0 {
				o.outputChunks++
				o.outputBytes += output
				if o.firstToken.IsZero() {
					o.firstToken = g.now()
				}
			}
		}
		if frame.Done() {
			// The stream is complete: the client has it all, and may hang up at once, as
			// OpenAI's SDKs do on [DONE]. That is no cancellation.
			return nil
		}
	}
}

// streamChunk is what the gateway reads of a streamed chunk.
type streamChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        string          `json:"reasoning"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *wire.Usage `json:"usage"`
}

var usageNullTail = []byte(`,"usage":null}`)

// readChunk reads one frame and returns what to send the client (nil to drop it) and the bytes
// of output text it carried, which bound the tokens its rig may bill for it: every chunk is
// parsed. The usage chunk a client asked for gets the request's cost from costFor, when given.
func readChunk(frame sse.Frame, forcedUsage bool, o *outcome, costFor func(*admission.TokenCount) (money.Pico, bool)) (out []byte, output int64) {
	from, to, ok := frame.Data()
	if !ok || to == from || frame[from] != '{' {
		return frame, 0 // a comment, [DONE], or not a chunk
	}
	payload := frame[from:to]
	var chunk streamChunk
	if json.Unmarshal(payload, &chunk) != nil {
		return frame, 0
	}
	for _, ch := range chunk.Choices {
		d := ch.Delta
		output += int64(len(ch.Text) + len(d.Content) + len(d.ReasoningContent) + len(d.Reasoning))
		if len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null" && string(d.ToolCalls) != "[]" {
			output += int64(len(d.ToolCalls))
		}
	}
	if chunk.Usage != nil {
		o.usage = chunk.Usage.Count()
	}
	if !forcedUsage {
		if chunk.Usage != nil && costFor != nil {
			if cost, ok := costFor(o.usage); ok {
				with := wire.WithCost(payload, cost)
				out = make([]byte, 0, len(frame)+len(with)-len(payload))
				return append(append(append(out, frame[:from]...), with...), frame[to:]...), output
			}
		}
		return frame, output
	}
	if chunk.Usage != nil && len(chunk.Choices) == 0 {
		return nil, 0 // the usage chunk the client did not ask for
	}
	// The usage member OpenAI-compatible servers add, null, to every other chunk once usage is
	// asked for: taken out when it ends the chunk, as they write it.
	if bytes.HasSuffix(payload, usageNullTail) {
		out = make([]byte, 0, len(frame)-len(usageNullTail)+1)
		out = append(append(append(out, frame[:to-len(usageNullTail)]...), '}'), frame[to:]...)
		return out, output
	}
	return frame, output
}

// observe reports an attempt to routing. Only a streamed answer's first token is a time to first token: a
// whole answer's first byte comes with its last, and routing keeps it out of the tier's latency (Streamed).
func (g *Gateway) observe(req *gatewayRequest, a *attempt, o outcome) {
	obs := routing.Observation{RequestID: a.requestID, At: o.at, Duration: o.at.Sub(a.start), Status: usage.StatusOK,
		Streamed: req.stream}
	switch o.status {
	case requestlog.GatewayCanceled:
		obs.Status = usage.StatusCanceled
	case requestlog.GatewayError, requestlog.GatewayFailedOver:
		obs.Status = usage.StatusError
	}
	if !o.firstToken.IsZero() {
		obs.TTFT = o.firstToken.Sub(a.start)
	}
	if o.usage != nil {
		obs.InputTokens, obs.OutputTokens = o.usage.Input, o.usage.Output
	}
	g.cfg.Router.Observe(a.cand.OfferingID, obs)
}

// record keeps what the gateway saw of an attempt that reached a rig, with what admission holds
// for it until the meter bills it.
func (g *Gateway) record(key accounts.APIKey, req *gatewayRequest, a *attempt, o outcome, hold admission.Hold) {
	if g.cfg.Requests == nil {
		return
	}
	r := requestlog.GatewayRequest{RequestID: a.requestID, AccountID: key.AccountID, APIKeyID: key.ID,
		OfferingID: a.cand.OfferingID, Tier: a.cand.Tier, Model: req.route.Model, HTTPStatus: o.httpStatus,
		Status: o.status, Usage: o.usage, Duration: o.at.Sub(a.start), At: o.at,
		InputBytes: int64(len(req.body)), MaxInputTokens: req.bounds.MaxInputTokens,
		MaxOutputTokens: req.bounds.MaxOutputTokens, Streamed: req.stream,
		RelayedOutputBytes: o.outputBytes, RelayedOutputChunks: o.outputChunks, Hold: hold}
	if !o.firstToken.IsZero() && req.stream { // a whole answer has no time to first token
		r.TTFT = o.firstToken.Sub(a.start)
	}
	g.cfg.Requests.Record(r)
}
