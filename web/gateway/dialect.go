package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/sse"
	"github.com/gpumarket/gpumarket/web/gateway/dialect"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// APIs served by translation (package dialect): the relay of their answers, translated as they go, and the
// Anthropic Messages API's endpoints.

// messagesEndpoint is POST /v1/messages.
var messagesEndpoint = endpoint{path: "/v1/messages", streams: true, output: true, dialect: dialect.Anthropic{}}

// brokenStreamMessage is what a client of a dialect reads in the error event that ends a stream its rig broke off.
const brokenStreamMessage = "The offering's answer broke off before its end; it has been logged."

// dialectKey is where a request's dialect is kept in its echo.Context, for its errors.
const dialectKey = "gateway.dialect"

func dialectOf(c echo.Context) dialect.Dialect {
	d, _ := c.Get(dialectKey).(dialect.Dialect)
	return d
}

// relayTranslated answers the client with the rig's chat completion translated into the request's dialect.
func (g *Gateway) relayTranslated(c echo.Context, req *gatewayRequest, a *attempt, resp *http.Response) outcome {
	d := req.ep.dialect
	w := c.Response()
	h := w.Header()
	t := &dialect.Translation{RequestID: a.requestID, Request: req.clientBody, Model: req.route.Model, Created: a.start,
		Cost: func(u *admission.TokenCount) (money.Pico, bool) { return costOf(a, req, u) }}
	o := outcome{httpStatus: resp.StatusCode, status: requestlog.GatewayOK}
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
		tr := d.Stream(t)
		err = g.relayTranslatedStream(out, &boundedReader{r: resp.Body, left: maxResponseBytes}, tr, &o)
		if err != nil && !errors.Is(err, errClientGone) && c.Request().Context().Err() == nil {
			// The stream stays well formed to its end: the client's SDK reads the break as an error, not as
			// an answer that merely stopped.
			if _, werr := out.Write(tr.Fail(brokenStreamMessage)); werr == nil {
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
			o.usage = wire.UsageOf(body)
			if translated, err = d.Answer(body, t); err != nil {
				err = fmt.Errorf("the rig's answer does not translate: %w", err)
			}
		}
		switch {
		case err != nil:
			// The answer broke off or is not a chat completion: nothing was written yet, so the client gets an
			// error in its dialect's shape, and the attempt is recorded as an error.
			translated = d.ErrorBody(wire.New(httperr.CodeBadGateway, "", "", "The offering's answer could not be read; it has been logged."))
			resp.StatusCode = http.StatusBadGateway
		case !ok:
			translated = d.ErrorBody(rigError(resp.StatusCode, body))
		}
		err = writeWhole(h, w, out, a, &o, resp.StatusCode, translated, int64(len(body)), ok, err)
	}
	g.endAnswer(c, a, &o, ok, err, "a rig's response broke off")
	return o
}

// writeWhole answers the client with a whole answer of a dialect, translated or native, as JSON of known length:
// the carbon headers (and the trailer, for an answer the rig gave whole), the status, the body. relayed is what the
// rig's answer counted (o.outputBytes). It returns err, or errClientGone when the write failed and err was nil.
func writeWhole(h http.Header, w *echo.Response, out *httpx.DeadlineWriter, a *attempt, o *outcome, status int,
	body []byte, relayed int64, ok bool, err error) error {
	setCarbonHeaders(h, a.cand, false)
	if ok && err == nil {
		setCarbonTrailer(h, a.cand, *o)
	}
	h.Set("Content-Type", echo.MIMEApplicationJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	o.outputBytes = relayed
	if _, werr := out.Write(body); werr != nil && err == nil {
		return errClientGone
	} else if werr == nil {
		_ = out.Flush()
	}
	return err
}

// endAnswer stamps how a dialect's answer ended: ok when it went out whole, canceled when the client went, an
// error (logged as broke) when it broke off or the rig answered an error.
func (g *Gateway) endAnswer(c echo.Context, a *attempt, o *outcome, ok bool, err error, broke string) {
	o.at = g.now()
	switch {
	case err == nil && ok:
	case c.Request().Context().Err() != nil || errors.Is(err, errClientGone):
		o.status = requestlog.GatewayCanceled
	case err != nil:
		o.status = requestlog.GatewayError
		g.log.Warn("gateway: "+broke, "offering", a.cand.OfferingID, "request_id", a.requestID, "err", err)
	default:
		o.status = requestlog.GatewayError
	}
}

// errAnswerTooLarge ends a whole answer to translate that is longer than maxUsageScan.
var errAnswerTooLarge = fmt.Errorf("a whole answer longer than %d bytes", maxUsageScan)

// rigError is a rig's error answer (an OpenAI error body, else its status alone) as the gateway answers it.
func rigError(status int, body []byte) *wire.Error {
	var e wire.OpenAIError
	ge := &wire.Error{Status: status, Type: httperr.Fallback(status).OpenAIType, Message: http.StatusText(status)}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		ge.Message = e.Error.Message
		if e.Error.Type != "" {
			ge.Type = e.Error.Type
		}
		if e.Error.Code != nil {
			ge.Code = *e.Error.Code
		}
		if e.Error.Param != nil {
			ge.Param = *e.Error.Param
		}
	}
	return ge
}

// relayTranslatedStream relays a chat completion stream translated frame by frame, flushing after each: every
// chunk is read for the output it carried and the usage (readChunk), then translated; the chat stream's [DONE]
// ends the dialect's stream.
func (g *Gateway) relayTranslatedStream(w *httpx.DeadlineWriter, body io.Reader, tr dialect.ChunkTranslator, o *outcome) error {
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
			return send(tr.End())
		}
		_, output := readChunk(frame, false, o, nil)
		if payload := frame.Payload(); len(payload) > 0 && payload[0] == '{' {
			out, terr := tr.Chunk(bytes.Clone(payload))
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

// countAnthropicTokens answers POST /v1/messages/count_tokens with {"input_tokens": N}. The platform holds no
// tokenizer of the models on offer, so N is the bound the gateway itself puts on the request's input (routing.BoundsFor
// on the chat completion it translates to): the most input tokens such a request can be billed for, an upper bound of
// what a rig's tokenizer counts. Nothing is sent to a rig and nothing is billed.
func (g *Gateway) countAnthropicTokens(c echo.Context) error {
	c.Set(dialectKey, messagesEndpoint.dialect)
	key, err := g.admitKey(c)
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	body, err := readGatewayBody(c, g.cfg.MaxBodyBytes)
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	if body, err = dialect.AnthropicToChat(body, false); err != nil {
		return g.writeGatewayError(c, err)
	}
	req, err := parseGatewayRequest(body, messagesEndpoint, c.Request().Header.Get(TierHeader), key)
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	if g.cfg.Router != nil {
		if _, err := g.cfg.Router.Pick(req.route); errors.Is(err, routing.ErrUnknownModel) {
			return g.writeGatewayError(c, err)
		}
	}
	return c.JSON(http.StatusOK, map[string]int64{"input_tokens": req.bounds.MaxInputTokens})
}
