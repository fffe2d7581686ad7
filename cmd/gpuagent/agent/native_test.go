package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// nativeEngine is an inference server that serves Anthropic Messages and OpenAI Responses itself, each while its
// switch is on, and 404s them otherwise as vLLM does a path it does not serve. A probe (its prompt is "ping") gets
// the smallest answer of the API; any other request gets answer, an event stream when it starts with "event:".
// With wrongShape it answers every request with a chat completion, as a server that takes any path for chat would.
type nativeEngine struct {
	messages, responses atomic.Bool
	wrongShape          bool
	answer              string

	mu       sync.Mutex
	requests []seenRequest
}

type seenRequest struct {
	path   string
	header http.Header
	body   string
	probe  bool
}

func (e *nativeEngine) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	probe := bytes.Contains(body, []byte(`"ping"`))
	e.mu.Lock()
	e.requests = append(e.requests, seenRequest{path: req.URL.Path, header: req.Header.Clone(), body: string(body), probe: probe})
	e.mu.Unlock()

	serves := req.URL.Path == "/v1/messages" && e.messages.Load() || req.URL.Path == "/v1/responses" && e.responses.Load()
	switch {
	case req.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"test-model","object":"model"}]}`)
	case e.wrongShape:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"p"}}],"usage":{"prompt_tokens":8,"completion_tokens":1}}`)
	case !serves:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	case probe && req.URL.Path == "/v1/messages":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_p","type":"message","role":"assistant","model":"test-model","content":[{"type":"text","text":"p"}],"stop_reason":"max_tokens","usage":{"input_tokens":8,"output_tokens":1}}`)
	case probe:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"resp_p","object":"response","status":"incomplete","model":"test-model","output":[],"usage":{"input_tokens":8,"output_tokens":16,"total_tokens":24}}`)
	case strings.HasPrefix(e.answer, "event:"):
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for frame := range strings.SplitAfterSeq(e.answer, "\n\n") {
			_, _ = io.WriteString(w, frame)
			_ = rc.Flush()
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, e.answer)
	}
}

// seen are the requests the engine got, probes or not.
func (e *nativeEngine) seen(probes bool) []seenRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []seenRequest
	for _, r := range e.requests {
		if r.probe == probes && r.path != "/v1/models" {
			out = append(out, r)
		}
	}
	return out
}

// sse writes events as a server does: each an event line, a data line and a blank line.
func sse(nameData ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(nameData); i += 2 {
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", nameData[i], nameData[i+1])
	}
	return b.String()
}

// awaitProbe waits until the agent has logged what its upstream serves natively, the first time.
func (r *rig) awaitProbe(t *testing.T) {
	t.Helper()
	waitFor(t, "the agent to probe its upstream", func() bool {
		return strings.Contains(r.logs.String(), "upstream serves natively: ")
	})
}

// awaitNative waits for a heartbeat that says the upstream serves exactly want natively, and returns it as sent.
func awaitNative(t *testing.T, r *rig, want ...string) []byte {
	t.Helper()
	beats := r.subscribe(t, events.HeartbeatSubject(testProvider, testOffering))
	defer func() { _ = beats.Unsubscribe() }()
	deadline := time.Now().Add(8 * time.Second)
	var last []byte
	for time.Now().Before(deadline) {
		msg, err := beats.NextMsg(time.Second)
		if err != nil {
			continue
		}
		last = msg.Data
		var hb Heartbeat
		if err := json.Unmarshal(msg.Data, &hb); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(hb.Native, want) {
			return msg.Data
		}
	}
	t.Fatalf("no heartbeat with native %q; the last: %s", want, last)
	return nil
}

func TestTheUpstreamsNativeAPIsAreFoundAndAnnounced(t *testing.T) {
	t.Parallel()
	t.Run("both", func(t *testing.T) {
		t.Parallel()
		engine := &nativeEngine{}
		engine.messages.Store(true)
		engine.responses.Store(true)
		r := setup(t, rigOptions{upstream: engine, model: testModel})
		r.awaitProbe(t)
		awaitNative(t, r, NativeMessages, NativeResponses)
		if !strings.Contains(r.logs.String(), "upstream serves natively: Anthropic Messages, OpenAI Responses") {
			t.Errorf("the log does not say what was found:\n%s", r.logs)
		}

		probes := engine.seen(true)
		byPath := map[string]seenRequest{}
		for _, p := range probes {
			byPath[p.path] = p
		}
		if len(probes) != 2 || len(byPath) != 2 {
			t.Fatalf("%d probes, of %d paths; want one each of /v1/messages and /v1/responses", len(probes), len(byPath))
		}
		m, resp := byPath["/v1/messages"], byPath["/v1/responses"]
		if m.body != `{"model":"test-model","max_tokens":1,"messages":[{"role":"user","content":"ping"}]}` ||
			m.header.Get("Anthropic-Version") != "2023-06-01" || m.header.Get("Content-Type") != "application/json" {
			t.Errorf("the Messages probe: %s %v", m.body, m.header)
		}
		if resp.body != `{"model":"test-model","input":"ping","max_output_tokens":16,"store":false}` ||
			resp.header.Get("Content-Type") != "application/json" {
			t.Errorf("the Responses probe: %s %v", resp.body, resp.header)
		}
		// The probes are the agent's own: they bill nothing.
		if s := r.agent.Stats(); s.Outbox != 0 || s.Acked != 0 || s.InFlight != 0 || r.streamCount(t) != 0 {
			t.Errorf("after the probes: %+v, %d events on the stream; want no event and nothing in flight", s, r.streamCount(t))
		}
	})

	for name, engine := range map[string]*nativeEngine{
		"a server that 404s them":         {},
		"a server that answers with chat": {wrongShape: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			engine.messages.Store(true) // the shape decides for the second
			if !engine.wrongShape {
				engine.messages.Store(false)
			}
			r := setup(t, rigOptions{upstream: engine, model: testModel})
			r.awaitProbe(t)
			if !strings.Contains(r.logs.String(), "upstream serves natively: neither Anthropic Messages nor OpenAI Responses: "+
				"the platform translates them to chat completions") {
				t.Errorf("the log does not say that neither is served:\n%s", r.logs)
			}
			if beat := awaitNative(t, r); bytes.Contains(beat, []byte(`"native"`)) {
				t.Errorf("heartbeat %s names native APIs", beat)
			}

			for _, path := range []string{"/v1/messages", "/v1/responses"} {
				resp := r.post(t, path, r.ticket(t, "req_not_native"), `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":"Hello"}],"input":"Hello"}`)
				body := readAll(t, resp)
				var shape struct {
					Error struct {
						Message string `json:"message"`
						Type    string `json:"type"`
						Code    string `json:"code"`
					} `json:"error"`
				}
				if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &shape) != nil ||
					shape.Error.Code != "unknown_url" || !strings.Contains(shape.Error.Message, path) {
					t.Errorf("%s: %d %s; want 404 in OpenAI's error shape", path, resp.StatusCode, body)
				}
				// Without a ticket it is refused as any request is.
				if resp := r.post(t, path, "", `{}`); resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s without a ticket: %d, want 401", path, resp.StatusCode)
				}
			}
			if served := engine.seen(false); len(served) != 0 {
				t.Errorf("the upstream was called for %s, which it does not serve natively", served[0].path)
			}
			if s := r.agent.Stats(); s.Outbox != 0 || s.Acked != 0 || r.streamCount(t) != 0 {
				t.Errorf("%+v, %d events on the stream: a request answered 404 by the agent bills nothing", s, r.streamCount(t))
			}
		})
	}
}

// Answers of the native APIs as engines give them: Anthropic's input_tokens leave out the cache reads and writes,
// OpenAI's Responses input_tokens include the cached ones.
var (
	messagesWhole = `{"id":"msg_1","type":"message","role":"assistant","model":"answer-model","content":[{"type":"text","text":"Hello there"}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":30,"cache_read_input_tokens":1024,"output_tokens":5}}`

	messagesStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"answer-model","content":[],"stop_reason":null,` +
		`"usage":{"input_tokens":12,"cache_creation_input_tokens":30,"cache_read_input_tokens":1024,"output_tokens":1}}}`
	blockStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	delta      = func(text string) string {
		return `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}`
	}
	blockStop   = `{"type":"content_block_stop","index":0}`
	messageStop = `{"type":"message_stop"}`

	responsesUsage1200 = `{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1204}`
	responsesWhole     = `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"answer-model","output":[{"type":"message","id":"m1","status":"completed","role":"assistant",` +
		`"content":[{"type":"output_text","text":"Hello there","annotations":[]}]}],"usage":` + responsesUsage1200 + `}`
	responseCreated = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"answer-model","output":[],"usage":null}}`
	textDelta       = func(text string) string {
		return `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m1","output_index":0,"content_index":0,"delta":"` + text + `"}`
	}
	responseEnd = func(event, usage string) string {
		return `{"type":"` + event + `","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"x","model":"answer-model","output":[],"usage":` + usage + `}}`
	}
)

// The agent relays a native answer as the engine wrote it and reports the usage the engine counted in it, whole
// and streamed, with the cache as each API counts it, bounded as chat's is; without usage, the streamed deltas.
func TestNativeAnswersAreRelayedAndCounted(t *testing.T) {
	t.Parallel()
	const (
		messagesRequest  = `{"model":"test-model","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"Say <hello> & go"}]}`
		messagesStream   = `{"model":"test-model","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
		responsesRequest = `{"model":"test-model","input":"Say hello","max_output_tokens":64}`
		responsesStream  = `{"model":"test-model","input":"Say hello","stream":true}`
	)
	for _, c := range []struct {
		name, path, request, answer string
		in, cached, out             int64
		model                       string
		status                      usage.Status
	}{
		{name: "Messages, whole", path: "/v1/messages", request: messagesRequest, answer: messagesWhole,
			in: 1066, cached: 1024, out: 5, model: "answer-model", status: usage.StatusOK},
		{name: "Messages, streamed", path: "/v1/messages", request: messagesStream,
			answer: sse("message_start", messagesStart, "content_block_start", blockStart, "ping", `{"type": "ping"}`,
				"content_block_delta", delta("Hel"), "content_block_delta", delta("lo"), "content_block_delta", delta(" there"),
				"content_block_stop", blockStop,
				"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`,
				"message_stop", messageStop),
			in: 1066, cached: 1024, out: 5, model: "answer-model", status: usage.StatusOK},
		{name: "Messages, streamed, input counted in message_delta", path: "/v1/messages", request: messagesStream,
			answer: sse("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"answer-model","content":[],"usage":{"input_tokens":0,"output_tokens":0}}}`,
				"content_block_delta", delta("Hi"),
				"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":40,"cache_read_input_tokens":20,"output_tokens":3}}`,
				"message_stop", messageStop),
			in: 60, cached: 20, out: 3, model: "answer-model", status: usage.StatusOK},
		{name: "Messages, streamed without usage", path: "/v1/messages", request: messagesStream,
			answer: sse("message_start", `{"type":"message_start","message":{"id":"msg_3","type":"message","role":"assistant","model":"answer-model","content":[]}}`,
				"content_block_delta", delta("One"), "content_block_delta", delta(" two"), "content_block_delta", delta(" three"),
				"message_stop", messageStop),
			in: 0, cached: 0, out: 3, model: "answer-model", status: usage.StatusOK},
		{name: "Messages, stream ending in an error", path: "/v1/messages", request: messagesStream,
			answer: sse("message_start", messagesStart, "content_block_delta", delta("Hel"), "content_block_delta", delta("lo"),
				"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			in: 1066, cached: 1024, out: 2, model: "answer-model", status: usage.StatusError},
		{name: "Messages, streamed usage out of bounds", path: "/v1/messages", request: messagesStream,
			answer: sse("message_start", `{"type":"message_start","message":{"id":"msg_4","type":"message","role":"assistant","model":"answer-model","content":[],`+
				`"usage":{"input_tokens":-5,"cache_read_input_tokens":7,"cache_creation_input_tokens":-1,"output_tokens":1}}}`,
				"content_block_delta", delta("Hi"),
				"message_delta", `{"type":"message_delta","delta":{},"usage":{"output_tokens":20000000}}`,
				"message_stop", messageStop),
			in: 7, cached: 7, out: usage.MaxTokens, model: "answer-model", status: usage.StatusOK},
		{name: "Responses, whole", path: "/v1/responses", request: responsesRequest, answer: responsesWhole,
			in: 1200, cached: 1024, out: 4, model: "answer-model", status: usage.StatusOK},
		{name: "Responses, streamed", path: "/v1/responses", request: responsesStream,
			answer: sse("response.created", responseCreated, "response.output_text.delta", textDelta("Hel"),
				"response.output_text.delta", textDelta("lo"), "response.completed", responseEnd("response.completed", responsesUsage1200)),
			in: 1200, cached: 1024, out: 4, model: "answer-model", status: usage.StatusOK},
		{name: "Responses, streamed and incomplete", path: "/v1/responses", request: responsesStream,
			answer: sse("response.created", responseCreated, "response.output_text.delta", textDelta("Hel"),
				"response.incomplete", responseEnd("response.incomplete", `{"input_tokens":50,"output_tokens":64}`)),
			in: 50, cached: 0, out: 64, model: "answer-model", status: usage.StatusOK},
		{name: "Responses, stream that failed", path: "/v1/responses", request: responsesStream,
			answer: sse("response.created", responseCreated, "response.output_text.delta", textDelta("Hel"),
				"response.failed", responseEnd("response.failed", `{"input_tokens":50,"input_tokens_details":{"cached_tokens":16},"output_tokens":1}`)),
			in: 50, cached: 16, out: 1, model: "answer-model", status: usage.StatusError},
		{name: "Responses, stream cut off before its usage", path: "/v1/responses", request: responsesStream,
			answer: sse("response.created", responseCreated, "response.output_text.delta", textDelta("Hel"),
				"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":"fc1","output_index":1,"delta":"{\"city\":"}`,
				"response.output_text.delta", textDelta("lo")),
			in: 0, cached: 0, out: 3, model: "answer-model", status: usage.StatusOK},
		{name: "Responses, streamed usage out of bounds", path: "/v1/responses", request: responsesStream,
			answer: sse("response.created", responseCreated, "response.output_text.delta", textDelta("Hi"),
				"response.completed", responseEnd("response.completed", `{"input_tokens":300,"input_tokens_details":{"cached_tokens":512},"output_tokens":-4}`)),
			in: 300, cached: 300, out: 0, model: "answer-model", status: usage.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			engine := &nativeEngine{answer: c.answer}
			engine.messages.Store(true)
			engine.responses.Store(true)
			r := setup(t, rigOptions{upstream: engine, model: testModel})
			r.awaitProbe(t)

			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.agentURL+c.path, strings.NewReader(c.request))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(ticket.Header, r.ticket(t, "req_native"))
			req.Header.Set("Anthropic-Version", "2023-06-01")
			req.Header.Set("Anthropic-Beta", "prompt-caching-2024-07-31")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(readAll(t, resp)); resp.StatusCode != http.StatusOK || got != c.answer {
				t.Errorf("the client got %d\n%s\nthe engine wrote\n%s", resp.StatusCode, got, c.answer)
			}

			served := engine.seen(false)
			if len(served) != 1 {
				t.Fatalf("the engine served %d requests, want 1", len(served))
			}
			up := served[0]
			if up.path != c.path || up.body != c.request {
				t.Errorf("upstream got %s %s, want %s as the client sent it: %s", up.path, up.body, c.path, c.request)
			}
			if up.header.Get("Anthropic-Version") != "2023-06-01" || up.header.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" ||
				up.header.Get(ticket.Header) != "" || up.header.Get("X-Request-Id") != "req_native" {
				t.Errorf("upstream headers %v: want Anthropic's forwarded, the request id and no ticket", up.header)
			}

			ev := r.waitEvents(t, 1)[0].event
			d := ev.Data
			if d.RequestID != "req_native" || d.InputTokens != c.in || d.CachedInputTokens != c.cached || d.OutputTokens != c.out ||
				d.Model != c.model || d.Status != c.status {
				t.Errorf("event %s: %d in (%d cached) / %d out, model %q, %s; want %d (%d) / %d, %q, %s", d.RequestID,
					d.InputTokens, d.CachedInputTokens, d.OutputTokens, d.Model, d.Status, c.in, c.cached, c.out, c.model, c.status)
			}
			if (d.TTFTMillis > 0) != (d.OutputTokens > 0) || d.TTFTMillis > d.DurationMillis {
				t.Errorf("ttft %g ms of %g ms with %d output tokens", d.TTFTMillis, d.DurationMillis, d.OutputTokens)
			}
			if err := usage.Validate(ev, events.UsageSubject(testProvider, testOffering), time.Now()); err != nil {
				t.Errorf("the event breaks the contract: %v", err)
			}
			r.expectStreamHolds(t, 1)
		})
	}
}

// Every ten minutes the agent asks again: an engine restarted as another version may serve more or less, and the
// heartbeat, the log and what the agent serves follow.
func TestTheReprobeNoticesAChange(t *testing.T) {
	t.Parallel()
	engine := &nativeEngine{answer: messagesWhole}
	r := setup(t, rigOptions{upstream: engine, model: testModel, reprobe: 100 * time.Millisecond})
	r.awaitProbe(t)
	request := `{"model":"test-model","max_tokens":8,"messages":[{"role":"user","content":"Hello"}]}`
	if resp := r.post(t, "/v1/messages", r.ticket(t, "req_before"), request); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("before the engine serves Messages: %d, want 404", resp.StatusCode)
	}

	engine.messages.Store(true)
	awaitNative(t, r, NativeMessages)
	if !strings.Contains(r.logs.String(), "what the upstream serves natively changed: now Anthropic Messages; "+
		"the platform translates OpenAI Responses to chat completions") {
		t.Errorf("the log does not say what changed:\n%s", r.logs)
	}
	resp := r.post(t, "/v1/messages", r.ticket(t, "req_after"), request)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || string(body) != messagesWhole {
		t.Fatalf("once the engine serves Messages: %d %s", resp.StatusCode, body)
	}
	if d := r.waitEvents(t, 1)[0].event.Data; d.RequestID != "req_after" || d.InputTokens != 1066 || d.OutputTokens != 5 {
		t.Errorf("event %+v", d)
	}

	engine.messages.Store(false)
	awaitNative(t, r)
	if resp := r.post(t, "/v1/messages", r.ticket(t, "req_gone"), request); resp.StatusCode != http.StatusNotFound {
		t.Errorf("once the engine no longer serves Messages: %d, want 404", resp.StatusCode)
	}
	// Many probes since, and only the one request billed.
	if probes := len(engine.seen(true)); probes < 6 {
		t.Errorf("%d probes, want a pair every 100 ms", probes)
	}
	r.expectStreamHolds(t, 1)
}

// Each input figure of Anthropic's usage is bounded before they are summed, so that none can take from another.
func TestMessagesUsageIsBoundedFigureByFigure(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name             string
		u                messagesUsage
		streamed         int64
		in, cached, outp int64
	}{
		{"as Anthropic counts", messagesUsage{n(12), n(1024), n(30), n(5)}, 9, 1066, 1024, 5},
		{"no output count: the deltas", messagesUsage{InputTokens: n(12)}, 9, 12, 0, 9},
		{"a negative figure", messagesUsage{n(-100), n(50), nil, n(2)}, 0, 50, 50, 2},
		{"figures past the bound", messagesUsage{n(usage.MaxTokens + 1), n(usage.MaxTokens), n(1 << 62), n(1)}, 0,
			3 * usage.MaxTokens, usage.MaxTokens, 1},
	} {
		got := c.u.tokens(c.streamed)
		if got.PromptTokens != c.in || got.PromptTokensDetails.CachedTokens != c.cached || got.CompletionTokens != c.outp {
			t.Errorf("%s: %d in (%d cached) / %d out, want %d (%d) / %d", c.name, got.PromptTokens,
				got.PromptTokensDetails.CachedTokens, got.CompletionTokens, c.in, c.cached, c.outp)
		}
	}
}

func TestEventNameIsTheEventLines(t *testing.T) {
	for frame, want := range map[string]string{
		"event: error\ndata: {\"error\":{}}\n\n":            "error",
		"event:message_stop\r\ndata: {}\r\n\r\n":            "message_stop",
		"data: {\"type\":\"message_stop\"}\n\n":             "",
		": comment\nevent: ping\ndata: {\"type\":\"ping\"}": "ping",
	} {
		if got := eventName([]byte(frame)); got != want {
			t.Errorf("eventName(%q) = %q, want %q", frame, got, want)
		}
	}
}

// TestMessageStopFollowsTheKeptEvent: as a chat stream's [DONE], the event that ends a Messages stream reaches the
// client only once the request's usage event is on disk.
func TestMessageStopFollowsTheKeptEvent(t *testing.T) {
	t.Parallel()
	engine := &nativeEngine{answer: sse("message_start", messagesStart, "content_block_delta", delta("Persist"),
		"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
		"message_stop", messageStop)}
	engine.messages.Store(true)
	r := setup(t, rigOptions{upstream: engine, noRun: true}) // nothing sends: the event stays on disk
	r.agent.native.Store(1 << dialectMessages)               // as a probe would have found
	held := holdOutbox(t, r.agent)

	resp := r.post(t, "/v1/messages", r.ticket(t, "req_persist_messages"),
		`{"model":"test-model","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rv := receive(t, resp, r.outboxDir, func(got []byte) bool { return bytes.Contains(got, []byte("message_stop")) })
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never wrote the event")
	}
	waitFor(t, "the output frames", func() bool { return bytes.Contains(rv.bytes(), []byte(`"message_delta"`)) })
	time.Sleep(200 * time.Millisecond)
	if got := rv.bytes(); bytes.Contains(got, []byte("message_stop")) {
		t.Fatalf("the client saw message_stop while the usage event was not yet kept:\n%s", got)
	}
	held.let()
	rv.wait(t)
	if rv.keptAtEnd != 1 {
		t.Errorf("when the client had message_stop, the outbox held %d events, want 1", rv.keptAtEnd)
	}
	if got := string(rv.bytes()); got != engine.answer {
		t.Errorf("the client got\n%s\nthe engine wrote\n%s", got, engine.answer)
	}
	evs := keptEvents(t, r.outboxDir)
	if len(evs) != 1 {
		t.Fatalf("the outbox holds %d events, want 1", len(evs))
	}
	if d := evs[0].Data; d.RequestID != "req_persist_messages" || d.Status != usage.StatusOK || d.InputTokens != 1066 || d.OutputTokens != 1 {
		t.Errorf("kept %+v, want req_persist_messages, ok, 1066 in and 1 out", d)
	}
}
