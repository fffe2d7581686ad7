package gateway

import (
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// A chat request of the gateway benchmark's size (make bench-gateway).
var benchRequestBody = []byte(`{"model":"gpumarket-bench/zero-latency","messages":[{"role":"user","content":"Explain in two sentences why a batch job can wait for an idle consumer GPU while a chat cannot."}],"max_tokens":8}`)

func BenchmarkParseGatewayRequest(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseGatewayRequest(benchRequestBody, chatEndpoint, "realtime", accounts.APIKey{}); err != nil {
			b.Fatal(err)
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
		whole := wire.UsageOf([]byte(`{"id":"x","usage":` + c.usage + `}`))
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
