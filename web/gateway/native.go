package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/sse"
	"github.com/gpumarket/gpumarket/web/gateway/dialect"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// APIs passed through to engines that serve them.
//
// vLLM, llama.cpp's server and Ollama serve the Anthropic Messages and OpenAI Responses APIs themselves. A rig's
// agent tries each on its engine and says in its heartbeats which it found (routing.Heartbeat.Native). A request
// in a dialect routed to such a rig goes to it on the dialect's own path, as the client wrote it but for its model
// (without the tier suffix) and the gateway's own members (gpumarket, provider, session_id), which the engine
// does not know; its answer comes back as the engine wrote it. Every other rig gets the chat completion it
// translates to (dialect.go). Everything before the rig is the same for both: the tier, the caps, routing and
// admission are those of the chat completion, and the route ticket bounds the input by the longer of the two
// bodies, so that the hold covers the request whichever way it goes. The gateway reads the usage of the answer
// as it relays it (dialect.NativeUsage), for its record and for the cost it adds to the answer's usage, as a translated
// one carries it (a stream's in the event that ends with the whole usage: message_delta, response.completed); the agent reports the same usage, and the meter bills it as it bills any chat.

// nativeAPI is the name by which agents say their engine serves the endpoint's dialect natively; "" for an
// endpoint without a dialect.
func (ep endpoint) nativeAPI() string {
	if ep.dialect == nil {
		return ""
	}
	return ep.dialect.NativeAPI()
}

// passesThrough says whether the request goes to the candidate's engine in its own dialect.
func (req *gatewayRequest) passesThrough(cand routing.Candidate) bool {
	api := req.ep.nativeAPI()
	return api != "" && req.nativeBody != nil && slices.Contains(cand.Native, api)
}

// Headers of the Messages API passed on to an engine that serves it, and the version named when the client named
// none (the one the gateway's own translation speaks).
var anthropicHeaders = []string{"Anthropic-Version", "Anthropic-Beta"}

const anthropicVersion = "2023-06-01"

// relayNative answers the client with the native answer of a rig whose engine serves the request's dialect.
func (g *Gateway) relayNative(c echo.Context, req *gatewayRequest, a *attempt, resp *http.Response) outcome {
	api := req.ep.nativeAPI()
	w := c.Response()
	h := w.Header()
	o := outcome{httpStatus: resp.StatusCode, status: requestlog.GatewayOK}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	streaming := ok && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
	out, _ := httpx.NewDeadlineWriter(w, clientWriteIdle)
	cost := func(u *admission.TokenCount) (money.Pico, bool) { return costOf(a, req, u) }
	var err error
	if streaming {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		setCarbonHeaders(h, a.cand, false)
		w.WriteHeader(resp.StatusCode)
		_ = out.Flush()
		err = g.relayNativeStream(out, &boundedReader{r: resp.Body, left: maxResponseBytes}, api, &o, cost)
	} else {
		var body []byte
		body, err = io.ReadAll(&boundedReader{r: resp.Body, left: maxUsageScan, err: errAnswerTooLarge})
		if len(body) > 0 {
			o.firstToken = g.now()
		}
		switch {
		case err != nil:
			// Nothing was written yet: the client gets an error in its dialect's shape.
			body = req.ep.dialect.ErrorBody(wire.New(httperr.CodeBadGateway, "", "", "The offering's answer could not be read; it has been logged."))
			resp.StatusCode = http.StatusBadGateway
		case ok:
			o.usage = dialect.NativeUsage(api, body)
			if o.usage != nil {
				if c, cok := cost(o.usage); cok {
					body = wire.WithCost(body, c)
				}
			}
		}
		err = writeWhole(h, w, out, a, &o, resp.StatusCode, body, int64(len(body)), ok, err)
	}
	g.endAnswer(c, a, &o, ok, err, "a rig's native answer broke off")
	return o
}

// nativeEvent is what the gateway reads of one server-sent event of a native stream.
type nativeEvent struct {
	Type string `json:"type"`
	// Messages: message_start's message, content_block_delta's delta, message_delta's usage.
	Message *struct {
		Usage json.RawMessage `json:"usage"`
	} `json:"message"`
	Delta json.RawMessage `json:"delta"`
	Usage json.RawMessage `json:"usage"`
	// Responses: the response of response.completed, response.incomplete and response.failed.
	Response *struct {
		Usage json.RawMessage `json:"usage"`
	} `json:"response"`
}

// errNativeFailed is a native stream that ended with its dialect's error event.
var errNativeFailed = errors.New("the engine's stream ended with an error event")

// relayNativeStream relays a native stream frame by frame as the engine wrote it, flushing after each, and reads
// each frame's output and usage on the way: Messages' message_start carries the input (and the model's first
// output count), message_delta the output so far, and the request's cost goes into its usage; message_stop ends
// it; the Responses API's last event (response.completed, response.incomplete, response.failed) carries the whole
// usage, and the cost goes into it. A stream that stops before its end broke off.
func (g *Gateway) relayNativeStream(w *httpx.DeadlineWriter, body io.Reader, api string, o *outcome,
	cost func(*admission.TokenCount) (money.Pico, bool)) error {
	events := sse.NewReader(body, maxFrameBytes)
	for {
		frame, err := events.Next()
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		out, end, failed := g.readNativeFrame(frame, api, o, cost)
		if _, werr := w.Write(out); werr != nil {
			return errClientGone
		}
		if w.Flush() != nil {
			return errClientGone
		}
		switch {
		case failed:
			return errNativeFailed
		case end:
			return nil
		}
	}
}

// readNativeFrame reads one frame of a native stream into o and returns it as it goes to the client (with the
// cost in a Responses stream's final usage), and whether it ends the stream, failed or not.
func (g *Gateway) readNativeFrame(frame sse.Frame, api string, o *outcome, cost func(*admission.TokenCount) (money.Pico, bool)) (out []byte, end, failed bool) {
	from, to, ok := frame.Data()
	if !ok || to <= from || frame[from] != '{' {
		return frame, false, false
	}
	payload := frame[from:to]
	var ev nativeEvent
	if json.Unmarshal(payload, &ev) != nil {
		return frame, false, false
	}
	output := func(delta string) {
		if delta == "" {
			return
		}
		o.outputChunks++
		o.outputBytes += int64(len(delta))
		if o.firstToken.IsZero() {
			o.firstToken = g.now()
		}
	}
	switch api {
	case catalog.NativeMessages:
		switch ev.Type {
		case "message_start":
			if ev.Message != nil && len(ev.Message.Usage) > 0 {
				if u := dialect.UsageIn(api, ev.Message.Usage); u != nil {
					o.usage = u
				}
			}
		case "content_block_delta":
			var d struct {
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				Thinking    string `json:"thinking"`
			}
			if json.Unmarshal(ev.Delta, &d) == nil {
				output(d.Text + d.PartialJSON + d.Thinking)
			}
		case "message_delta":
			if u, ok := dialect.MessagesDeltaUsage(ev.Usage, o.usage); ok {
				o.usage = u
				if c, ok := costOr(cost, o.usage); ok {
					frame = wire.WithPayloadCost(frame, from, to, c)
				}
			}
		case "message_stop":
			return frame, true, false
		case "error":
			return frame, true, true
		}
	case catalog.NativeResponses:
		switch ev.Type {
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_text.delta":
			var d string
			if json.Unmarshal(ev.Delta, &d) == nil {
				output(d)
			}
		case "response.completed", "response.incomplete", "response.failed":
			if ev.Response != nil && len(ev.Response.Usage) > 0 {
				if u := dialect.UsageIn(api, ev.Response.Usage); u != nil {
					o.usage = u
					if c, ok := costOr(cost, u); ok {
						frame = wire.WithResponseCost(frame, from, to, c)
					}
				}
			}
			return frame, true, ev.Type == "response.failed"
		case "error":
			return frame, true, true
		}
	}
	return frame, false, false
}

// costOr is cost(u), or none without a cost to tell.
func costOr(cost func(*admission.TokenCount) (money.Pico, bool), u *admission.TokenCount) (money.Pico, bool) {
	if cost == nil || u == nil {
		return 0, false
	}
	return cost(u)
}
