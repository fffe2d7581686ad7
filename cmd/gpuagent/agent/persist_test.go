package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// heldOutbox holds the agent's next outbox write until the test releases it, and says when it began.
type heldOutbox struct {
	entered chan string
	release chan struct{}
}

func holdOutbox(t *testing.T, a *Agent) *heldOutbox {
	h := &heldOutbox{entered: make(chan string, 1), release: make(chan struct{})}
	a.outbox.testHookAdd = func(id string) {
		h.entered <- id
		<-h.release
	}
	// A test that fails while the write is held lets it go, so that the agent's handler can return.
	t.Cleanup(h.let)
	return h
}

func (h *heldOutbox) let() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// receiver reads a response body as it arrives and says what the client has received so far.
type receiver struct {
	mu   sync.Mutex
	got  bytes.Buffer
	done chan struct{}
	// keptAtEnd is how many events the outbox held when the client had received the body's end.
	keptAtEnd int
}

func receive(t *testing.T, resp *http.Response, outboxDir string, end func(got []byte) bool) *receiver {
	rv := &receiver{done: make(chan struct{})}
	go func() {
		defer close(rv.done)
		defer resp.Body.Close()
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			rv.mu.Lock()
			rv.got.Write(buf[:n])
			ended := end(rv.got.Bytes())
			rv.mu.Unlock()
			if ended || err != nil {
				events, _ := keptInOutbox(outboxDir)
				rv.keptAtEnd = len(events)
				return
			}
		}
	}()
	return rv
}

func (rv *receiver) bytes() []byte {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return bytes.Clone(rv.got.Bytes())
}

func (rv *receiver) wait(t *testing.T) {
	t.Helper()
	select {
	case <-rv.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the response never ended")
	}
}

func keptEvents(t *testing.T, dir string) []usage.UsageEvent {
	t.Helper()
	kept, err := keptInOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []usage.UsageEvent
	for _, raw := range kept {
		ev, err := usage.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestStreamsDoneFrameFollowsTheKeptEvent: while the outbox write of a finished stream's usage event is held, the
// client has every frame of output but not [DONE]; when the client has [DONE], the event is on disk. A crash
// between the two can only leave an event for a stream whose client never saw its end.
func TestStreamsDoneFrameFollowsTheKeptEvent(t *testing.T) {
	t.Parallel()
	frames := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":"Persist"}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":" first"}}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}`,
		`[DONE]`,
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, f := range frames {
			_, _ = w.Write([]byte("data: " + f + "\n\n"))
			_ = rc.Flush()
		}
	})
	r := setup(t, rigOptions{upstream: upstream, noRun: true}) // nothing sends: the event stays on disk
	held := holdOutbox(t, r.agent)

	resp := r.post(t, "/v1/chat/completions", r.ticket(t, "req_persist_stream"),
		`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rv := receive(t, resp, r.outboxDir, func(got []byte) bool { return bytes.Contains(got, []byte("[DONE]")) })
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never wrote the event")
	}
	// Whatever the agent had sent reaches the client within this time.
	waitFor(t, "the output frames", func() bool { return bytes.Contains(rv.bytes(), []byte(`"usage":{"prompt_tokens":4`)) })
	time.Sleep(200 * time.Millisecond)
	if got := rv.bytes(); bytes.Contains(got, []byte("[DONE]")) {
		t.Fatalf("the client saw [DONE] while the usage event was not yet kept:\n%s", got)
	}
	if n := len(keptEvents(t, r.outboxDir)); n != 0 {
		t.Fatalf("the outbox holds %d events before the write", n)
	}
	held.let()
	rv.wait(t)
	if rv.keptAtEnd != 1 {
		t.Errorf("when the client had [DONE], the outbox held %d events, want 1", rv.keptAtEnd)
	}
	evs := keptEvents(t, r.outboxDir)
	if len(evs) != 1 {
		t.Fatalf("the outbox holds %d events, want 1", len(evs))
	}
	if d := evs[0].Data; d.RequestID != "req_persist_stream" || d.Status != usage.StatusOK || d.InputTokens != 4 || d.OutputTokens != 2 {
		t.Errorf("kept %+v, want req_persist_stream, ok, 4 in and 2 out", d)
	}
}

// TestWholeResponsesLastByteFollowsTheKeptEvent: a whole response far larger than net/http buffers, with its
// Content-Length. While the outbox write is held the client is short of the response's end; when it has the last
// byte, the event is on disk.
func TestWholeResponsesLastByteFollowsTheKeptEvent(t *testing.T) {
	t.Parallel()
	body, err := json.Marshal(map[string]any{
		"id": "cmpl-big", "object": "chat.completion", "created": 1, "model": "test-model",
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]string{"role": "assistant", "content": strings.Repeat("All work and no play. ", 12_000)}}},
		"usage": map[string]int{"prompt_tokens": 9, "completion_tokens": 3000, "total_tokens": 3009},
	})
	if err != nil {
		t.Fatal(err)
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	r := setup(t, rigOptions{upstream: upstream, noRun: true})
	held := holdOutbox(t, r.agent)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.agentURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ticket.Header, r.ticket(t, "req_persist_whole"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != int64(len(body)) {
		t.Fatalf("Content-Length %d, want the upstream's %d", resp.ContentLength, len(body))
	}
	rv := receive(t, resp, r.outboxDir, func(got []byte) bool { return len(got) == len(body) })
	select {
	case <-held.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never wrote the event")
	}
	waitFor(t, "most of the body", func() bool { return len(rv.bytes()) > len(body)/2 })
	time.Sleep(200 * time.Millisecond)
	if got := len(rv.bytes()); got >= len(body) {
		t.Fatalf("the client had all %d bytes while the usage event was not yet kept", got)
	}
	held.let()
	rv.wait(t)
	if got := rv.bytes(); !bytes.Equal(got, body) {
		t.Fatalf("the client received %d bytes, want the upstream's %d unchanged", len(got), len(body))
	}
	if rv.keptAtEnd != 1 {
		t.Errorf("when the client had the last byte, the outbox held %d events, want 1", rv.keptAtEnd)
	}
	evs := keptEvents(t, r.outboxDir)
	if len(evs) != 1 {
		t.Fatalf("the outbox holds %d events, want 1", len(evs))
	}
	if d := evs[0].Data; d.RequestID != "req_persist_whole" || d.Status != usage.StatusOK || d.InputTokens != 9 || d.OutputTokens != 3000 {
		t.Errorf("kept %+v, want req_persist_whole, ok, 9 in and 3000 out", d)
	}
}

// TestSmallWholeResponsesAreRelayedWhole checks the held-back byte on bodies of one, two and a few bytes.
func TestSmallWholeResponsesAreRelayedWhole(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"x", "{}", `{"usage":{"prompt_tokens":1,"completion_tokens":2}}`} {
		upstream := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		})
		r := setup(t, rigOptions{upstream: upstream, noRun: true})
		resp := r.post(t, "/v1/chat/completions", r.ticket(t, "req_small"), `{"messages":[{"role":"user","content":"hi"}]}`)
		if got := string(readAll(t, resp)); got != body {
			t.Errorf("relayed %q, want %q", got, body)
		}
		evs := keptEvents(t, r.outboxDir)
		if len(evs) != 1 || evs[0].Data.Status != usage.StatusOK {
			t.Errorf("body %q: kept %v, want one ok event", body, evs)
			continue
		}
		want := int64(0)
		if strings.Contains(body, "usage") {
			want = 2
		}
		if got := evs[0].Data.OutputTokens; got != want {
			t.Errorf("body %q: %d output tokens, want %d", body, got, want)
		}
	}
}
