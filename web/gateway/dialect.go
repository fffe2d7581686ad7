package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/sse"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// APIs served by translation.
//
// A dialect is an API the gateway serves by translating it to and from OpenAI's chat completions, which every
// rig's engine serves: the Anthropic Messages API (/v1/messages) and the OpenAI Responses API (/v1/responses).
// The client's body is translated into a chat completions body before anything else reads it, so that the tier,
// the caps, the bounds of the route ticket, routing and admission are those of the chat completion it becomes;
// the rig is called on /v1/chat/completions; its agent reports the usage of a chat completion, and the meter bills
// it as it bills any. Only the answer is the dialect's: a whole answer is read (it is a chat completion of at most
// maxUsageScan bytes), its usage kept, and translated; a stream is translated chunk by chunk as it is relayed, the
// usage chunk the gateway asked for included (the dialects' own events carry usage). An error, the gateway's own
// or a rig's, goes out in the dialect's shape. See docs/gateway.md, "Anthropic Messages and OpenAI Responses".
type dialect interface {
	// toChat translates the client's request body into a chat completions body. Its errors are the client's: a
	// *gatewayError, answered in the dialect's shape.
	toChat(body []byte) ([]byte, error)
	// answer translates a whole chat completion (a 2xx JSON answer) into the dialect's answer.
	answer(chat []byte, t *translation) ([]byte, error)
	// stream returns the translator of one streamed answer.
	stream(t *translation) chunkTranslator
	// errorBody renders an error in the dialect's shape.
	errorBody(ge *gatewayError) []byte
}

// translation is what a dialect knows of the request it answers.
type translation struct {
	requestID string // the attempt's, which the answer is named by
	request   []byte // the client's body, as it came
	model     string // as the rig is asked for it: without a tier suffix
	created   time.Time
	// cost is what the request costs for the usage its answer reported (cost.go); ok is false when there is
	// none to tell. Nil tells none.
	cost func(*billing.TokenCount) (money.Pico, bool)
}

// chunkTranslator translates one chat completion stream into the dialect's events.
type chunkTranslator interface {
	// chunk takes the JSON payload of one chunk and returns the frames to send the client, server-sent events
	// each ending in a blank line; nil sends nothing.
	chunk(payload []byte) ([]byte, error)
	// end returns the frames that end the stream, once the chat stream ended with [DONE].
	end() []byte
	// fail returns the frame that ends a stream the rig broke off: the dialect's error event, with message.
	fail(message string) []byte
}

// brokenStreamMessage is what a client of a dialect reads in the error event that ends a stream its rig broke off.
const brokenStreamMessage = "The offering's answer broke off before its end; it has been logged."

// dialectKey is where a request's dialect is kept in its echo.Context, for its errors.
const dialectKey = "gateway.dialect"

func dialectOf(c echo.Context) dialect {
	d, _ := c.Get(dialectKey).(dialect)
	return d
}

// relayTranslated answers the client with the rig's chat completion translated into the request's dialect.
func (g *Gateway) relayTranslated(c echo.Context, req *gatewayRequest, a *attempt, resp *http.Response) outcome {
	d := req.ep.dialect
	w := c.Response()
	h := w.Header()
	t := &translation{requestID: a.requestID, request: req.clientBody, model: req.route.Model, created: a.start,
		cost: func(u *billing.TokenCount) (money.Pico, bool) { return costOf(a, req, u) }}
	o := outcome{httpStatus: resp.StatusCode, status: billing.GatewayOK}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	streaming := ok && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
	out, _ := httpx.NewDeadlineWriter(w, clientWriteIdle)
	var err error
	if streaming {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		setCarbonHeaders(h, a.cand, false)
		w.WriteHeader(resp.StatusCode)
		_ = out.Flush()
		tr := d.stream(t)
		err = g.relayTranslatedStream(out, &boundedReader{r: resp.Body, left: maxResponseBytes}, tr, &o)
		if err != nil && !errors.Is(err, errClientGone) && c.Request().Context().Err() == nil {
			// The stream stays well formed to its end: the client's SDK reads the break as an error, not as
			// an answer that merely stopped.
			if _, werr := out.Write(tr.fail(brokenStreamMessage)); werr == nil {
				_ = out.Flush()
			}
		}
	} else {
		var body []byte
		body, err = io.ReadAll(&boundedReader{r: resp.Body, left: maxUsageScan, err: errAnswerTooLarge})
		if len(body) > 0 {
			o.firstToken = g.now()
		}
		var translated []byte
		if err == nil && ok {
			o.usage = usageOf(body)
			if translated, err = d.answer(body, t); err != nil {
				err = fmt.Errorf("the rig's answer does not translate: %w", err)
			}
		}
		switch {
		case err != nil:
			// The answer broke off or is not a chat completion: nothing was written yet, so the client gets an
			// error in its dialect's shape, and the attempt is recorded as an error.
			translated = d.errorBody(&gatewayError{status: http.StatusBadGateway, typ: "server_error",
				message: "The offering's answer could not be read; it has been logged."})
			resp.StatusCode = http.StatusBadGateway
		case !ok:
			translated = d.errorBody(rigError(resp.StatusCode, body))
		}
		setCarbonHeaders(h, a.cand, false)
		if ok && err == nil {
			setCarbonTrailer(h, a.cand, o)
		}
		h.Set("Content-Type", echo.MIMEApplicationJSON)
		h.Set("Content-Length", strconv.Itoa(len(translated)))
		w.WriteHeader(resp.StatusCode)
		o.outputBytes = int64(len(body))
		if _, werr := out.Write(translated); werr != nil && err == nil {
			err = errClientGone
		} else if werr == nil {
			_ = out.Flush()
		}
	}
	o.at = g.now()
	switch {
	case err == nil && ok:
	case c.Request().Context().Err() != nil || errors.Is(err, errClientGone):
		o.status = billing.GatewayCanceled
	case err != nil:
		o.status = billing.GatewayError
		g.log.Warn("gateway: a rig's response broke off", "offering", a.cand.OfferingID, "request_id", a.requestID, "err", err)
	default:
		o.status = billing.GatewayError
	}
	return o
}

// errAnswerTooLarge ends a whole answer to translate that is longer than maxUsageScan.
var errAnswerTooLarge = fmt.Errorf("a whole answer longer than %d bytes", maxUsageScan)

// rigError is a rig's error answer (an OpenAI error body, else its status alone) as the gateway answers it.
func rigError(status int, body []byte) *gatewayError {
	var e openAIError
	ge := &gatewayError{status: status, typ: "invalid_request_error", message: http.StatusText(status)}
	if status >= 500 {
		ge.typ = "server_error"
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		ge.message = e.Error.Message
		if e.Error.Type != "" {
			ge.typ = e.Error.Type
		}
		if e.Error.Code != nil {
			ge.code = *e.Error.Code
		}
		if e.Error.Param != nil {
			ge.param = *e.Error.Param
		}
	}
	return ge
}

// relayTranslatedStream relays a chat completion stream translated frame by frame, flushing after each: every
// chunk is read for the output it carried and the usage (readChunk), then translated; the chat stream's [DONE]
// ends the dialect's stream.
func (g *Gateway) relayTranslatedStream(w *httpx.DeadlineWriter, body io.Reader, tr chunkTranslator, o *outcome) error {
	events := sse.NewReader(body, maxFrameBytes)
	send := func(out []byte) error {
		if len(out) == 0 {
			return nil
		}
		if _, err := w.Write(out); err != nil {
			return errClientGone
		}
		if w.Flush() != nil {
			return errClientGone
		}
		return nil
	}
	for {
		frame, err := events.Next()
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF // a chat stream ends with [DONE]: one that stops short broke off
		}
		if err != nil {
			return err
		}
		if frame.Done() {
			return send(tr.end())
		}
		_, output := readChunk(frame, false, o, nil)
		if payload := frame.Payload(); len(payload) > 0 && payload[0] == '{' {
			out, terr := tr.chunk(bytes.Clone(payload))
			if terr != nil {
				return fmt.Errorf("a chunk that does not translate: %w", terr)
			}
			if serr := send(out); serr != nil {
				return serr
			}
		}
		if output > 0 {
			o.outputChunks++
			o.outputBytes += output
			if o.firstToken.IsZero() {
				o.firstToken = g.now()
			}
		}
	}
}
