package simulation_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/simulation"
)

const model14B = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

// setup serves a handler in-process and returns it with its base URL.
func setup(t *testing.T, opts simulation.Options) (*simulation.Handler, string) {
	t.Helper()
	h := simulation.NewHandler(opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func zeroOptions() simulation.Options {
	return simulation.Options{Profile: simulation.Zero(), Model: "sim-model", Seed: 1,
		Now: func() time.Time { return time.Unix(1767225600, 0) }}
}

func h100Options(t *testing.T, speed float64) simulation.Options {
	t.Helper()
	p, ok := simulation.Lookup(model14B, "h100-pcie", 1)
	if !ok {
		t.Fatal("no 14B 1x H100 profile")
	}
	return simulation.Options{Profile: p, Speed: speed, Seed: 1}
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func object(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, b)
	}
	return m
}

func wantKeys(t *testing.T, what string, m any, want ...string) {
	t.Helper()
	obj, ok := m.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, not an object", what, m)
	}
	got := slices.Sorted(maps.Keys(obj))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s has keys %v, want %v", what, got, want)
	}
}

// events splits a server-sent event stream into its data payloads, checking the framing.
func events(t *testing.T, body []byte) []string {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	var out []string
	for _, frame := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(frame, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("frame %q is not one data line", frame)
		}
		out = append(out, data)
	}
	if out[len(out)-1] != "[DONE]" {
		t.Fatalf("stream ends with %q, not [DONE]", out[len(out)-1])
	}
	return out
}

func usageOf(t *testing.T, m map[string]any) (prompt, completion, total int) {
	t.Helper()
	u, ok := m["usage"].(map[string]any)
	if !ok {
		t.Fatalf("no usage object in %v", m)
	}
	wantKeys(t, "usage", u, "prompt_tokens", "completion_tokens", "total_tokens")
	return int(u["prompt_tokens"].(float64)), int(u["completion_tokens"].(float64)), int(u["total_tokens"].(float64))
}

func TestChatCompletionHasOpenAIShape(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	status, b := post(t, url+"/v1/chat/completions", `{"model":"sim-model","max_tokens":5,
		"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hello, GPU!"}]}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := object(t, b)
	wantKeys(t, "completion", m, "id", "object", "created", "model", "choices", "usage")
	if !strings.HasPrefix(m["id"].(string), "chatcmpl-") || m["object"] != "chat.completion" ||
		m["created"] != float64(1767225600) || m["model"] != "sim-model" {
		t.Errorf("header fields: %v", m)
	}
	choices := m["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("%d choices", len(choices))
	}
	wantKeys(t, "choice", choices[0], "index", "message", "logprobs", "finish_reason")
	c := choices[0].(map[string]any)
	wantKeys(t, "message", c["message"], "role", "content")
	msg := c["message"].(map[string]any)
	content := msg["content"].(string)
	if c["index"] != float64(0) || msg["role"] != "assistant" || c["finish_reason"] != "length" || c["logprobs"] != nil {
		t.Errorf("choice: %v", c)
	}
	// Prompt: "system" 1 + "Be brief." 3 + "user" 1 + "Hello, GPU!" 4.
	prompt, completion, total := usageOf(t, m)
	if prompt != 9 || completion != 5 || total != 14 || simulation.CountTokens(content) != 5 {
		t.Errorf("usage %d+%d=%d for %q, want 9+5=14", prompt, completion, total, content)
	}
}

func TestChatWithoutLimitStopsAroundTheMeanOutput(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	status, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Tell me about GPUs."}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := object(t, b)
	c := m["choices"].([]any)[0].(map[string]any)
	_, completion, _ := usageOf(t, m)
	// The zero profile's mean output is 16 tokens: lengths run from 8 to 24.
	if c["finish_reason"] != "stop" || completion < 8 || completion > 24 ||
		simulation.CountTokens(c["message"].(map[string]any)["content"].(string)) != completion {
		t.Errorf("finish %v, %d tokens", c["finish_reason"], completion)
	}
	if max := simulation.Zero().MeanOutputTokens(); max != 16 {
		t.Errorf("zero mean output %g", max)
	}
}

func TestChatStreamSendsChunksAndAUsageChunkOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	_, whole := post(t, url+"/v1/chat/completions", `{"max_tokens":30,"messages":[{"role":"user","content":"Stream it."}]}`)
	want := object(t, whole)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]

	for _, includeUsage := range []bool{false, true} {
		body := `{"max_tokens":30,"stream":true,"messages":[{"role":"user","content":"Stream it."}]}`
		if includeUsage {
			body = `{"max_tokens":30,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Stream it."}]}`
		}
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		data := events(t, b)
		chunks := data[:len(data)-1]
		var usageChunk map[string]any
		if includeUsage {
			usageChunk = object(t, []byte(chunks[len(chunks)-1]))
			chunks = chunks[:len(chunks)-1]
		}
		var text strings.Builder
		var id any
		for i, raw := range chunks {
			c := object(t, []byte(raw))
			if includeUsage {
				wantKeys(t, "chunk", c, "id", "object", "created", "model", "choices", "usage")
				if c["usage"] != nil {
					t.Fatalf("chunk %d carries usage %v before the last", i, c["usage"])
				}
			} else {
				wantKeys(t, "chunk", c, "id", "object", "created", "model", "choices")
			}
			if id == nil {
				id = c["id"]
			}
			if c["object"] != "chat.completion.chunk" || c["id"] != id || c["model"] != "sim-model" {
				t.Fatalf("chunk %d: %v", i, c)
			}
			choice := c["choices"].([]any)[0].(map[string]any)
			wantKeys(t, "chunk choice", choice, "index", "delta", "logprobs", "finish_reason")
			delta := choice["delta"].(map[string]any)
			switch {
			case i == 0:
				if !reflect.DeepEqual(delta, map[string]any{"role": "assistant", "content": ""}) || choice["finish_reason"] != nil {
					t.Fatalf("first chunk: %v", choice)
				}
			case i == len(chunks)-1:
				if len(delta) != 0 || choice["finish_reason"] != "length" {
					t.Fatalf("last chunk: %v", choice)
				}
			default:
				if choice["finish_reason"] != nil {
					t.Fatalf("chunk %d finishes early: %v", i, choice)
				}
				text.WriteString(delta["content"].(string))
			}
		}
		if text.String() != want {
			t.Errorf("streamed %q, want the non-streamed %q", text.String(), want)
		}
		if includeUsage {
			wantKeys(t, "usage chunk", usageChunk, "id", "object", "created", "model", "choices", "usage")
			if choices := usageChunk["choices"].([]any); len(choices) != 0 || usageChunk["id"] != id {
				t.Fatalf("usage chunk: %v", usageChunk)
			}
			if p, c, total := usageOf(t, usageChunk); p != 4 || c != 30 || total != 34 {
				t.Errorf("usage %d+%d=%d, want 4+30=34", p, c, total)
			}
		}
	}
}

func TestCompletionsHaveOpenAIShape(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	status, b := post(t, url+"/v1/completions", `{"model":"sim-model","prompt":"Once upon a time","max_tokens":7}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := object(t, b)
	wantKeys(t, "completion", m, "id", "object", "created", "model", "choices", "usage")
	choice := m["choices"].([]any)[0].(map[string]any)
	wantKeys(t, "choice", choice, "text", "index", "logprobs", "finish_reason")
	if !strings.HasPrefix(m["id"].(string), "cmpl-") || m["object"] != "text_completion" || choice["finish_reason"] != "length" {
		t.Errorf("completion: %v", m)
	}
	if p, c, total := usageOf(t, m); p != 4 || c != 7 || total != 11 || simulation.CountTokens(choice["text"].(string)) != 7 {
		t.Errorf("usage %d+%d=%d for %q", p, c, total, choice["text"])
	}

	status, b = post(t, url+"/v1/completions", `{"prompt":["Once upon a time"],"max_tokens":7,"stream":true,"stream_options":{"include_usage":true}}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	data := events(t, b)
	var text strings.Builder
	for _, raw := range data[:len(data)-3] {
		c := object(t, []byte(raw))
		if c["object"] != "text_completion" {
			t.Fatalf("chunk %v", c)
		}
		text.WriteString(c["choices"].([]any)[0].(map[string]any)["text"].(string))
	}
	last := object(t, []byte(data[len(data)-3]))["choices"].([]any)[0].(map[string]any)
	if last["finish_reason"] != "length" || last["text"] != "" {
		t.Errorf("finishing chunk %v", last)
	}
	if text.String() != choice["text"] {
		t.Errorf("streamed %q, want %q", text.String(), choice["text"])
	}
	if _, c, _ := usageOf(t, object(t, []byte(data[len(data)-2]))); c != 7 {
		t.Errorf("streamed usage %d completion tokens", c)
	}
}

func content(t *testing.T, url, prompt string, maxTokens int) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"max_tokens": maxTokens, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	status, b := post(t, url+"/v1/chat/completions", string(body))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	return object(t, b)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

func TestSamePromptGetsSameText(t *testing.T) {
	t.Parallel()
	_, a := setup(t, zeroOptions())
	_, b := setup(t, zeroOptions())
	first := content(t, a, "What is a GPU?", 40)
	if again, other := content(t, a, "What is a GPU?", 40), content(t, b, "What is a GPU?", 40); again != first || other != first {
		t.Errorf("one prompt, different texts: %q, %q, %q", first, again, other)
	}
	if short := content(t, a, "What is a GPU?", 10); !strings.HasPrefix(first, short) {
		t.Errorf("10 tokens %q are not a prefix of 40 %q", short, first)
	}
	if diff := content(t, a, "What is a TPU?", 40); diff == first {
		t.Error("two prompts, one text")
	}
}

func TestStreamWaitsTheProfilesLatency(t *testing.T) {
	t.Parallel()
	_, url := setup(t, h100Options(t, 1))
	start := time.Now()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"max_tokens":6,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var firstToken time.Duration
	frames := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "data: ") {
			frames++
			if frames == 1 {
				firstToken = time.Since(start)
			}
		}
	}
	total := time.Since(start)
	// At one request in flight the least TTFT drawn is 35.05 (35.05/43.12)^1.25 = 27 ms, the least
	// TPOT 19 ms: at least 27 + 5 x 19 = 122 ms in all.
	if firstToken < 27*time.Millisecond || firstToken > 2*time.Second {
		t.Errorf("first token after %v", firstToken)
	}
	if total < 122*time.Millisecond || total > 3*time.Second {
		t.Errorf("stream took %v", total)
	}
	if frames < 4 {
		t.Errorf("%d frames for 6 tokens", frames)
	}

	// Ten times faster: the same stream well under the real-time minimum.
	_, fast := setup(t, h100Options(t, 10))
	start = time.Now()
	if status, _ := post(t, fast+"/v1/chat/completions", `{"max_tokens":6,"messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if took := time.Since(start); took >= 122*time.Millisecond {
		t.Errorf("at speed 10 the answer took %v", took)
	}
}

func waitIdle(t *testing.T, h *simulation.Handler, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for h.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight after %v", h.InFlight(), within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestClientDisconnectStopsGeneration(t *testing.T) {
	t.Parallel()
	h, url := setup(t, h100Options(t, 1))
	// 2000 tokens at about 20 ms each would take 40 s.
	body := `{"max_tokens":2000,"stream":true,"messages":[{"role":"user","content":"a long story"}]}`

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for tokens := 0; tokens < 3; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			tokens++
		}
	}
	if h.InFlight() != 1 {
		t.Fatalf("%d in flight during a stream", h.InFlight())
	}
	cancel()
	resp.Body.Close()
	waitIdle(t, h, time.Second)

	// A non-streaming request whose client gives up.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(strings.Replace(body, `"stream":true`, `"stream":false`, 1)))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("a 40 s answer came within 100 ms")
	}
	waitIdle(t, h, time.Second)
}

func TestInFlightCountsConcurrentRequests(t *testing.T) {
	t.Parallel()
	h, url := setup(t, h100Options(t, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 3 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"x"}]}`))
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

func TestModelsListsTheServedModel(t *testing.T) {
	t.Parallel()
	_, url := setup(t, h100Options(t, 1))
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := object(t, b)
	wantKeys(t, "list", m, "object", "data")
	data := m["data"].([]any)
	if m["object"] != "list" || len(data) != 1 {
		t.Fatalf("models: %s", b)
	}
	wantKeys(t, "model", data[0], "id", "object", "created", "owned_by")
	if card := data[0].(map[string]any); card["id"] != model14B || card["object"] != "model" {
		t.Errorf("model card %v", card)
	}
	if resp, err := http.Get(url + "/health"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("health: %v %v", resp, err)
	}
}

func TestEmbeddingsAreDeterministicUnitVectors(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	status, b := post(t, url+"/v1/embeddings", `{"model":"sim-model","input":["hello world","hello"],"dimensions":8}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := object(t, b)
	wantKeys(t, "list", m, "object", "data", "model", "usage")
	u := m["usage"].(map[string]any)
	if m["object"] != "list" || u["prompt_tokens"] != float64(3) || u["total_tokens"] != float64(3) {
		t.Errorf("embeddings: %v", m)
	}
	data := m["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("%d embeddings for 2 inputs", len(data))
	}
	var vectors [][]float64
	for i, d := range data {
		wantKeys(t, "embedding", d, "object", "index", "embedding")
		item := d.(map[string]any)
		var v []float64
		var norm float64
		for _, x := range item["embedding"].([]any) {
			v = append(v, x.(float64))
			norm += x.(float64) * x.(float64)
		}
		if item["object"] != "embedding" || item["index"] != float64(i) || len(v) != 8 || math.Abs(norm-1) > 1e-5 {
			t.Errorf("embedding %d: %v (norm %g)", i, item, norm)
		}
		vectors = append(vectors, v)
	}

	status, b = post(t, url+"/v1/embeddings", `{"input":"hello world","dimensions":8,"encoding_format":"base64"}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	raw, err := base64.StdEncoding.DecodeString(object(t, b)["data"].([]any)[0].(map[string]any)["embedding"].(string))
	if err != nil || len(raw) != 32 {
		t.Fatalf("base64 embedding: %v, %d bytes", err, len(raw))
	}
	for i := range 8 {
		if x := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); x != float32(vectors[0][i]) {
			t.Fatalf("base64 component %d is %g, float %g", i, x, vectors[0][i])
		}
	}
}

func TestFailRateOneAnswers500BeforeAnyByte(t *testing.T) {
	t.Parallel()
	opts := zeroOptions()
	opts.FailRate = 1
	h, url := setup(t, opts)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings"} {
		status, b := post(t, url+path, `{"stream":true,"prompt":"x","input":"x","messages":[{"role":"user","content":"x"}]}`)
		m := object(t, b)
		wantKeys(t, "error body", m, "error")
		wantKeys(t, "error", m["error"], "message", "type", "param", "code")
		if status != http.StatusInternalServerError || m["error"].(map[string]any)["type"] != "server_error" {
			t.Errorf("%s: %d %s", path, status, b)
		}
	}
	if h.InFlight() != 0 {
		t.Error("failed requests count as in flight")
	}
	if resp, err := http.Get(url + "/v1/models"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("models under fail rate 1: %v %v", resp, err)
	}
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		param, code              any
	}{
		{"bad JSON", "POST", "/v1/chat/completions", `{"messages":`, 400, nil, nil},
		{"other model", "POST", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, 404, "model", "model_not_found"},
		{"no messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", nil},
		{"bad content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, 400, "messages[0].content", nil},
		{"two choices", "POST", "/v1/chat/completions", `{"n":2,"messages":[{"role":"user","content":"x"}]}`, 400, "n", nil},
		{"zero tokens", "POST", "/v1/chat/completions", `{"max_completion_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, "max_completion_tokens", nil},
		{"two prompts", "POST", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", nil},
		{"no prompt", "POST", "/v1/completions", `{}`, 400, "prompt", nil},
		{"too many dims", "POST", "/v1/embeddings", `{"input":"x","dimensions":100000}`, 400, "dimensions", nil},
		{"unknown path", "POST", "/v1/nothing", `{}`, 404, nil, nil},
		{"wrong method", "GET", "/v1/chat/completions", ``, 404, nil, nil},
	} {
		req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := object(t, b)
		wantKeys(t, c.name, m["error"], "message", "type", "param", "code")
		e := m["error"].(map[string]any)
		if resp.StatusCode != c.status || e["type"] != "invalid_request_error" || e["param"] != c.param ||
			e["code"] != c.code || e["message"] == "" {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, b)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	ok := zeroOptions()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]simulation.Options{
		"no model":       {Profile: simulation.Zero()},
		"negative rate":  {Model: "m", FailRate: -0.1},
		"rate above 1":   {Model: "m", FailRate: 1.5},
		"negative speed": {Model: "m", Speed: -1},
	} {
		if o.Validate() == nil {
			t.Errorf("%s: valid", name)
		}
	}
}
