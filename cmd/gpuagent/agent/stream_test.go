package agent

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// TestStreamHeadersReachTheClientBeforeTheFirstFrame: the agent sends a stream's status and headers as soon as the
// upstream answered with them, not with the first frame, which comes when the first token does. The time to first
// token still runs to the first frame with output.
func TestStreamHeadersReachTheClientBeforeTheFirstFrame(t *testing.T) {
	t.Parallel()
	const hold = 300 * time.Millisecond // between the upstream's headers and its first frame
	release := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		select {
		case <-release: // the client has the headers
		case <-time.After(3 * time.Second): // it never will: end the stream anyway
		case <-req.Context().Done():
			return
		}
		for _, f := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			`[DONE]`,
		} {
			_, _ = w.Write([]byte("data: " + f + "\n\n"))
			_ = rc.Flush()
		}
	})
	r := setup(t, rigOptions{upstream: upstream})

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.agentURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ticket.Header, r.ticket(t, "req_headers_first"))
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	start := time.Now()
	go func() {
		resp, err := http.DefaultClient.Do(req)
		got <- answer{resp, err}
	}()
	var resp *http.Response
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatal(a.err)
		}
		resp = a.resp
	case <-time.After(2 * time.Second):
		close(release)
		t.Fatal("no response headers while the upstream holds its first frame back")
	}
	headersAfter := time.Since(start)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q; want 200 and the upstream's event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	time.Sleep(hold)
	close(release)

	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	frameAfter := time.Since(start)
	if !strings.Contains(first, `"content":"Hi"`) {
		t.Fatalf("first line %q, want the upstream's first frame", first)
	}
	if frameAfter-headersAfter < hold {
		t.Errorf("headers after %s, first frame after %s: want the headers %s or more before it", headersAfter, frameAfter, hold)
	}
	t.Logf("headers after %s, first frame after %s", headersAfter, frameAfter)
	readAll(t, resp)

	d := r.waitEvents(t, 1)[0].event.Data
	if d.Status != usage.StatusOK || d.OutputTokens != 1 || d.TTFTMillis < float64(hold.Milliseconds()) {
		t.Errorf("event %+v: want ok, 1 output token and a time to first token of %s or more (the first frame, not the headers)", d, hold)
	}
}

// TestAClientThatHangsUpAfterDoneCanceledNothing: OpenAI's SDKs close the connection as soon as they read
// "data: [DONE]". The request is complete and reported ok, even when the upstream has not closed its stream yet.
func TestAClientThatHangsUpAfterDoneCanceledNothing(t *testing.T) {
	t.Parallel()
	upstream := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, f := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			`[DONE]`,
		} {
			_, _ = w.Write([]byte("data: " + f + "\n\n"))
			_ = rc.Flush()
		}
		// The upstream lingers before it closes, as a server finishing its own bookkeeping may.
		select {
		case <-time.After(time.Second):
		case <-req.Context().Done():
		}
	})
	r := setup(t, rigOptions{upstream: upstream})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.agentURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ticket.Header, r.ticket(t, "req_hangs_up_after_done"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before [DONE]: %v", err)
		}
		if strings.TrimSpace(line) == "data: [DONE]" {
			break
		}
	}
	resp.Body.Close() // as the SDK does

	d := r.waitEvents(t, 1)[0].event.Data
	if d.Status != usage.StatusOK || d.OutputTokens != 1 {
		t.Errorf("event %+v: want ok with 1 output token: the client had the whole stream", d)
	}
}
