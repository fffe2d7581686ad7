package agent

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// cachedUpstream answers as vLLM does, with the prompt tokens it served from its prefix cache
// in usage.prompt_tokens_details.cached_tokens, or, with llama, as llama.cpp's server does,
// with them only in timings.cache_n. A stream ends with its usage-only chunk.
func cachedUpstream(prompt, cached, completion int64, llama bool) http.Handler {
	usageJSON := fmt.Sprintf(`{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`,
		prompt, prompt+completion, completion, cached)
	extra := ""
	if llama {
		usageJSON = fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}`, completion, prompt, prompt+completion)
		extra = fmt.Sprintf(`,"timings":{"cache_n":%d,"prompt_n":%d,"prompt_ms":12.5,"predicted_n":%d}`, cached, prompt-cached, completion)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body := make([]byte, 4096)
		n, _ := req.Body.Read(body)
		if strings.Contains(string(body[:n]), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"test-model","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"test-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
			fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"test-model","choices":[],"usage":%s%s}`+"\n\n", usageJSON, extra)
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":"test-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":%s%s}`,
			usageJSON, extra)
	})
}

// The agent reports the prompt tokens an engine served from its cache, from vLLM's usage and
// from llama.cpp's timings, streamed and not; more of them than the prompt are taken at the
// prompt's count.
func TestCachedPromptTokensAreReported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                       string
		llama, stream              bool
		prompt, cached, wantCached int64
	}{
		{name: "vLLM, whole", prompt: 1200, cached: 1024, wantCached: 1024},
		{name: "vLLM, streamed", stream: true, prompt: 1200, cached: 1024, wantCached: 1024},
		{name: "llama.cpp, whole", llama: true, prompt: 900, cached: 640, wantCached: 640},
		{name: "llama.cpp, streamed", llama: true, stream: true, prompt: 900, cached: 640, wantCached: 640},
		{name: "no cache hit", prompt: 300, cached: 0, wantCached: 0},
		{name: "more cached than prompt", prompt: 300, cached: 512, wantCached: 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, rigOptions{upstream: cachedUpstream(c.prompt, c.cached, 2, c.llama)})
			body := `{"model":"test-model","messages":[{"role":"user","content":"Hello again."}],"max_tokens":2}`
			if c.stream {
				body = `{"model":"test-model","messages":[{"role":"user","content":"Hello again."}],"max_tokens":2,"stream":true}`
			}
			resp := r.post(t, "/v1/chat/completions", r.ticket(t, "req_cached"), body)
			got := readAll(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			d := r.waitEvents(t, 1)[0].event.Data
			if d.InputTokens != c.prompt || d.CachedInputTokens != c.wantCached || d.OutputTokens != 2 {
				t.Fatalf("event %d in (%d cached) / %d out, want %d in (%d cached) / 2 out",
					d.InputTokens, d.CachedInputTokens, d.OutputTokens, c.prompt, c.wantCached)
			}
		})
	}
}

// The scanner of a whole response keeps llama.cpp's timings wherever the body is cut.
func TestMemberScannerKeepsLlamaTimings(t *testing.T) {
	body := `{"model":"m","usage":{"prompt_tokens":10,"completion_tokens":1},"timings":{"cache_n":8,"prompt_n":2}}`
	for cut := 1; cut < len(body); cut += 7 {
		var s memberScanner
		_, _ = s.Write([]byte(body[:cut]))
		_, _ = s.Write([]byte(body[cut:]))
		u, _ := s.result(dialectOpenAI)
		if got := cachedTokens(u, s.llamaTimings()); got != 8 {
			t.Fatalf("cut at %d: %d cached tokens, want 8", cut, got)
		}
	}
}
