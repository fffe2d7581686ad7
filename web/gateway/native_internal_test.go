package gateway

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web/gateway/dialect"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// nativeRelay relays a native stream through relayNativeStream and returns what the client got, the outcome and
// the relay's error.
func nativeRelay(t *testing.T, api, stream string, cost func(*admission.TokenCount) (money.Pico, bool)) (string, outcome, error) {
	t.Helper()
	g := &Gateway{now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := httptest.NewRecorder()
	out, _ := httpx.NewDeadlineWriter(rec, time.Minute)
	var o outcome
	err := g.relayNativeStream(out, strings.NewReader(stream), api, &o, cost)
	return rec.Body.String(), o, err
}

// TestANativeMessagesStreamIsRelayedAsItCame: every frame goes out untouched; the gateway reads the input from
// message_start, the output so far from each message_delta and the output it relayed from the deltas; the stream
// ends at message_stop; one that stops short, or ends in an error event, broke off.
func TestANativeMessagesStreamIsRelayedAsItCame(t *testing.T) {
	stream := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"cache_read_input_tokens":16,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":2}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	got, o, err := nativeRelay(t, catalog.NativeMessages, stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != stream {
		t.Fatalf("relayed\n%s\nwant it as it came\n%s", got, stream)
	}
	if o.usage == nil || *o.usage != (admission.TokenCount{Input: 19, Cached: 16, Output: 2}) || o.outputChunks != 2 ||
		o.outputBytes != int64(len("Hello there")) || o.firstToken.IsZero() {
		t.Fatalf("outcome %+v, usage %+v", o, o.usage)
	}
	if _, _, err := nativeRelay(t, catalog.NativeMessages, stream[:strings.Index(stream, "event: message_stop")], nil); err == nil {
		t.Fatal("a stream without message_stop ended well")
	}
	failed := stream[:strings.Index(stream, "event: content_block_stop")] +
		"event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"
	if got, _, err := nativeRelay(t, catalog.NativeMessages, failed, nil); err == nil || got != failed {
		t.Fatalf("a stream that ended in an error event: %v, relayed %q", err, got)
	}
}

// TestANativeResponsesStreamCarriesItsCost: the deltas are output, response.completed carries the usage, and the
// cost goes into that usage, where a translated stream has it.
func TestANativeResponsesStreamCarriesItsCost(t *testing.T) {
	completed := `{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","object":"response","status":"completed",` +
		`"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":2,"total_tokens":42}}}`
	stream := "event: response.created\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","usage":null}}` + "\n\n" +
		"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","sequence_number":3,"delta":"Hi"}` + "\n\n" +
		"event: response.function_call_arguments.delta\n" + `data: {"type":"response.function_call_arguments.delta","sequence_number":4,"delta":"{}"}` + "\n\n" +
		"event: response.completed\n" + "data: " + completed + "\n\n"
	a := &attempt{cand: routing.Candidate{PriceInput: 150_000, PriceCachedInput: 37_500, PriceOutput: 300_000}}
	req := &gatewayRequest{ep: endpoint{path: "/v1/responses", streams: true, output: true, dialect: dialect.Responses{}},
		bounds: routing.Bounds{MaxInputTokens: 1000, MaxOutputTokens: 16}}
	got, o, err := nativeRelay(t, catalog.NativeResponses, stream, func(u *admission.TokenCount) (money.Pico, bool) { return costOf(a, req, u) })
	if err != nil {
		t.Fatal(err)
	}
	if o.usage == nil || *o.usage != (admission.TokenCount{Input: 40, Cached: 32, Output: 2}) || o.outputChunks != 2 || o.outputBytes != 4 {
		t.Fatalf("outcome %+v, usage %+v", o, o.usage)
	}
	last := got[strings.LastIndex(got, "data: ")+len("data: "):]
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			ID    string `json:"id"`
			Usage struct {
				InputTokens int64       `json:"input_tokens"`
				Cost        json.Number `json:"cost"`
			} `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(last)), &ev); err != nil {
		t.Fatalf("%v: %s", err, last)
	}
	// 8 fresh input tokens at $0.15/M, 32 cached at $0.0375/M and 2 output at $0.30/M.
	want := money.Pico(8*150_000 + 32*37_500 + 2*300_000)
	if ev.Type != "response.completed" || ev.Response.ID != "resp_1" || ev.Response.Usage.InputTokens != 40 ||
		ev.Response.Usage.Cost.String() != want.Decimal(12) {
		t.Fatalf("the last event %s; want its cost %s", last, want.Decimal(12))
	}
	if !strings.HasPrefix(got, stream[:strings.Index(stream, "event: response.completed")]) {
		t.Fatalf("the events before the last were not relayed as they came:\n%s", got)
	}
}

// TestABrokenTranslatedStreamEndsWithTheDialectsErrorEvent: a chat stream that breaks off before [DONE] ends the
// client's Messages or Responses stream with its API's error event, so that its SDK fails rather than take the
// text so far for a whole answer; the attempt is recorded as an error.
func TestABrokenTranslatedStreamEndsWithTheDialectsErrorEvent(t *testing.T) {
	chat := `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}` + "\n\n"
	for _, c := range []struct {
		ep   endpoint
		body string
		want string
	}{
		{messagesEndpoint, `{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			`event: error` + "\n" + `data: {"error":{"message":"` + brokenStreamMessage + `","type":"api_error"},"type":"error"}` + "\n\n"},
		{endpoint{path: "/v1/responses", streams: true, output: true, dialect: dialect.Responses{}},
			`{"model":"m","input":"hi","stream":true}`, `"type":"error","code":"server_error","message":"` + brokenStreamMessage + `"`},
	} {
		g := &Gateway{now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		e := echo.New()
		rec := httptest.NewRecorder()
		ctx := e.NewContext(httptest.NewRequest(http.MethodPost, c.ep.path, strings.NewReader(c.body)), rec)
		req := &gatewayRequest{ep: c.ep, clientBody: []byte(c.body), stream: true, route: routing.Request{Model: "m"}}
		a := &attempt{requestID: "req_1", start: time.Now()}
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: io.NopCloser(strings.NewReader(chat))}
		o := g.relayTranslated(ctx, req, a, resp)
		got := rec.Body.String()
		if o.status != requestlog.GatewayError || !strings.Contains(got, c.want) || !strings.HasSuffix(got, "\n\n") {
			t.Errorf("%s: status %s; the client got\n%s\nwant it to end with %s", c.ep.path, o.status, got, c.want)
		}
	}
}

// TestANativeMessagesStreamTellsItsCost: the cost goes into message_delta's usage, priced on the input message_start
// told and the output so far; nothing else of the stream changes.
func TestANativeMessagesStreamTellsItsCost(t *testing.T) {
	start := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","usage":{"input_tokens":8,"cache_read_input_tokens":32,"output_tokens":1}}}` + "\n\n"
	delta := `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`
	stream := start + "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
		"event: message_delta\ndata: " + delta + "\n\n" + "event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	a := &attempt{cand: routing.Candidate{PriceInput: 150_000, PriceCachedInput: 37_500, PriceOutput: 300_000}}
	req := &gatewayRequest{ep: messagesEndpoint, bounds: routing.Bounds{MaxInputTokens: 1000, MaxOutputTokens: 16}}
	got, _, err := nativeRelay(t, catalog.NativeMessages, stream, func(u *admission.TokenCount) (money.Pico, bool) { return costOf(a, req, u) })
	if err != nil {
		t.Fatal(err)
	}
	want := money.Pico(8*150_000 + 32*37_500 + 2*300_000)
	withCost := strings.Replace(stream, delta, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2,"cost":`+
		want.Decimal(12)+`}}`, 1)
	if got != withCost {
		t.Fatalf("relayed\n%s\nwant\n%s", got, withCost)
	}
}
