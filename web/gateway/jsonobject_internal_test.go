package gateway

import (
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
)

func TestUsageOfReadsTheLastUsageMemberOfAValidAnswer(t *testing.T) {
	for _, c := range []struct {
		body    string
		in, out int64
		none    bool
	}{
		{body: `{"id":"x","choices":[{"message":{"content":"\"usage\":{}"}}],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24}}`, in: 16, out: 8},
		{body: `{"usage":{"prompt_tokens":3,"completion_tokens":1},"usage":{"prompt_tokens":30,"completion_tokens":10}}`, in: 30, out: 10},
		{body: `{"usage":{"prompt_tokens":null,"completion_tokens":5}}`, in: 0, out: 5},
		{body: `{"usage":{"prompt_tokens":-4,"completion_tokens":5}}`, in: 0, out: 5}, // counted as none, never below
		{body: `{"usage":{"completion_tokens":5}}`, in: 0, out: 5},
		{body: `{"usage":{"prompt_tokens":1.5,"completion_tokens":5}}`, none: true},
		{body: `{"usage":{"prompt_tokens":"7","completion_tokens":5}}`, none: true},
		{body: `{"usage":{"prompt_tokens":99999999999999999999,"completion_tokens":5}}`, none: true},
		{body: `{"usage":null}`, none: true},
		{body: `{"usage":[1]}`, none: true},
		{body: `{"choices":[{"usage":{"prompt_tokens":1,"completion_tokens":1}}]}`, none: true},
		{body: `{"usage":{"prompt_tokens":1,"completion_tokens":1}`, none: true}, // cut short
		{body: `not json`, none: true},
	} {
		u := usageOf([]byte(c.body))
		switch {
		case c.none && u != nil:
			t.Errorf("%s: usage %+v, want none", c.body, *u)
		case !c.none && (u == nil || u.Input != c.in || u.Output != c.out):
			t.Errorf("%s: usage %+v, want %d in, %d out", c.body, u, c.in, c.out)
		}
	}
}

// A chat request and answer of the gateway benchmark's size (make bench-gateway).
var (
	benchRequestBody = []byte(`{"model":"gpumarket-bench/zero-latency","messages":[{"role":"user","content":"Explain in two sentences why a batch job can wait for an idle consumer GPU while a chat cannot."}],"max_tokens":8}`)
	benchAnswerBody  = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764680000,"model":"gpumarket-bench/zero-latency","choices":[{"index":0,"message":{"role":"assistant","content":"A batch job tolerates minutes of queueing, so"},"finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24}}`)
)

func BenchmarkParseGatewayRequest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseGatewayRequest(benchRequestBody, chatEndpoint, "realtime", accounts.APIKey{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUsageOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if usageOf(benchAnswerBody) == nil {
			b.Fatal("no usage")
		}
	}
}

// The cached prompt tokens of an answer's usage (vLLM's and SGLang's
// prompt_tokens_details.cached_tokens) are read with it, whole and streamed, never more than
// the prompt; details that cannot be read show none and keep the usage.
func TestUsageKeepsCachedPromptTokens(t *testing.T) {
	for _, c := range []struct {
		usage               string
		in, cached, wantOut int64
	}{
		{usage: `{"prompt_tokens":1200,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":1024}}`, in: 1200, cached: 1024, wantOut: 8},
		{usage: `{"prompt_tokens":1200,"completion_tokens":8,"prompt_tokens_details":null}`, in: 1200, cached: 0, wantOut: 8},
		{usage: `{"prompt_tokens":1200,"completion_tokens":8}`, in: 1200, cached: 0, wantOut: 8},
		{usage: `{"prompt_tokens":100,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":512}}`, in: 100, cached: 100, wantOut: 8},
		{usage: `{"prompt_tokens":100,"completion_tokens":8,"prompt_tokens_details":{"cached_tokens":-3}}`, in: 100, cached: 0, wantOut: 8},
		{usage: `{"prompt_tokens":100,"completion_tokens":8,"prompt_tokens_details":"many"}`, in: 100, cached: 0, wantOut: 8},
	} {
		whole := usageOf([]byte(`{"id":"x","usage":` + c.usage + `}`))
		if whole == nil || whole.Input != c.in || whole.Cached != c.cached || whole.Output != c.wantOut {
			t.Errorf("whole answer, usage %s: read %+v, want %d in (%d cached), %d out", c.usage, whole, c.in, c.cached, c.wantOut)
		}
		var o outcome
		readChunk([]byte(`data: {"id":"x","choices":[],"usage":`+c.usage+"}\n\n"), false, &o, nil)
		if o.usage == nil || o.usage.Input != c.in || o.usage.Cached != c.cached || o.usage.Output != c.wantOut {
			t.Errorf("streamed, usage %s: read %+v, want %d in (%d cached), %d out", c.usage, o.usage, c.in, c.cached, c.wantOut)
		}
	}
}
