package simulation_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/simulation"
)

// nativeOptions serve the native APIs without latency or prefix cache.
func nativeOptions() simulation.Options {
	opts := zeroOptions()
	opts.Native = true
	return opts
}

// Without Native the native paths are unknown, as on an engine that serves only OpenAI's chat
// and completions: 404 in OpenAI's shape, naming the path.
func TestNativePathsAre404WithoutNative(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		status, b := post(t, url+path, `{"model":"sim-model","max_tokens":5,"input":"hi","messages":[{"role":"user","content":"hi"}]}`)
		m := object(t, b)
		wantKeys(t, path, m, "error")
		if e := m["error"].(map[string]any); status != http.StatusNotFound || e["message"] != "Invalid URL (POST "+path+")" ||
			e["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %s", path, status, b)
		}
	}
}

// namedEvent is an event of a native stream: its name and its data.
type namedEvent struct {
	name string
	data map[string]any
}

// namedEvents splits a native stream into its events, checking each frame is an event line and
// one data line whose type is the event's name, and that no [DONE] closes it.
func namedEvents(t *testing.T, body []byte) []namedEvent {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	var out []namedEvent
	for _, frame := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		head, data, ok := strings.Cut(frame, "\n")
		name, named := strings.CutPrefix(head, "event: ")
		payload, isData := strings.CutPrefix(data, "data: ")
		if !ok || !named || !isData || strings.Contains(payload, "\n") {
			t.Fatalf("frame %q is not an event line and a data line", frame)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(payload), &m); err != nil || m["type"] != name {
			t.Fatalf("event %s carries %s (%v)", name, payload, err)
		}
		out = append(out, namedEvent{name, m})
	}
	return out
}

func number(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// On the wire, a Messages stream says the input at message_start (no output yet), pings once,
// and gives the whole usage in message_delta; a Responses stream numbers its events from 0 and
// ends with the whole Response. Neither ends with [DONE].
func TestNativeStreamsFrameEachEventByItsType(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	want := askChat(t, url, `{"model":"sim-model","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)

	status, b := post(t, url+"/v1/messages", `{"model":"sim-model","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK {
		t.Fatalf("messages: status %d: %s", status, b)
	}
	events := namedEvents(t, b)
	start, delta := events[0].data, events[len(events)-2].data
	startUsage := start["message"].(map[string]any)["usage"].(map[string]any)
	wantKeys(t, "message_start usage", startUsage, "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
	if events[0].name != "message_start" || events[1].name != "ping" || number(startUsage["input_tokens"]) != want.prompt ||
		number(startUsage["output_tokens"]) != 0 {
		t.Fatalf("start of the stream: %v, %v", events[0], events[1])
	}
	deltaUsage := delta["usage"].(map[string]any)
	if events[len(events)-2].name != "message_delta" || delta["delta"].(map[string]any)["stop_reason"] != "max_tokens" ||
		number(deltaUsage["output_tokens"]) != 5 || number(deltaUsage["input_tokens"]) != want.prompt {
		t.Fatalf("message_delta %v", delta)
	}

	status, b = post(t, url+"/v1/responses", `{"model":"sim-model","max_output_tokens":5,"stream":true,"input":"hi"}`)
	if status != http.StatusOK {
		t.Fatalf("responses: status %d: %s", status, b)
	}
	events = namedEvents(t, b)
	for i, ev := range events {
		if number(ev.data["sequence_number"]) != i {
			t.Fatalf("event %d %v", i, ev.data)
		}
	}
	last := events[len(events)-1]
	usage := last.data["response"].(map[string]any)["usage"].(map[string]any)
	if last.name != "response.incomplete" || number(usage["input_tokens"]) != want.prompt || number(usage["output_tokens"]) != 5 {
		t.Fatalf("last event %v", last)
	}
}

// The native APIs run on the chat path's latency model: a stream's first event waits the time
// to first token and its last the time per output token after each, and a native request counts
// in flight with the chat requests.
func TestNativeStreamsWaitTheProfilesLatency(t *testing.T) {
	t.Parallel()
	opts := h100Options(t, 1)
	opts.Native = true
	h, url := setup(t, opts)
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"max_tokens":6,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"max_output_tokens":6,"stream":true,"input":"hi"}`},
	} {
		start := time.Now()
		resp, err := http.Post(url+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		var first time.Duration
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			if first == 0 && strings.HasPrefix(line, "event: ") {
				first = time.Since(start)
			}
		}
		resp.Body.Close()
		total := time.Since(start)
		// As for chat (TestStreamWaitsTheProfilesLatency): at least 27 ms to the first token,
		// 27 + 5 x 19 = 122 ms in all.
		if first < 27*time.Millisecond || first > 2*time.Second || total < 122*time.Millisecond || total > 3*time.Second {
			t.Errorf("%s: first event after %v, the stream took %v", c.path, first, total)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"x"}]}`},
		{"/v1/messages", `{"max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"x"}]}`},
		{"/v1/responses", `{"stream":true,"input":"x"}`},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req) // headers come at once
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
	}
	if n := h.InFlight(); n != 3 {
		t.Fatalf("%d in flight, want 3", n)
	}
	cancel()
	waitIdle(t, h, time.Second)
}
