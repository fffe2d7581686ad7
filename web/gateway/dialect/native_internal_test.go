package dialect

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// TestANativeBodyIsTheClientsAsTheEngineKnowsIt: the model without its tier suffix, and none of the members only
// the gateway reads; everything else as the client wrote it.
func TestANativeBodyIsTheClientsAsTheEngineKnowsIt(t *testing.T) {
	body := []byte(`{"model":"qwen:batch","max_tokens":9,"gpumarket":{"prefer":"carbon"},"provider":{"sort":"price"},` +
		`"session_id":"s1","messages":[{"role":"user","content":"<b>hi</b>"}],"metadata":{"user_id":"u"}}`)
	got, err := NativeBody(body, "qwen")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"gpumarket", "provider", "session_id"} {
		if _, ok := m[gone]; ok {
			t.Errorf("the native body keeps %q: %s", gone, got)
		}
	}
	if string(m["model"]) != `"qwen"` || string(m["max_tokens"]) != "9" || string(m["metadata"]) != `{"user_id":"u"}` ||
		!bytes.Contains(got, []byte(`<b>hi</b>`)) {
		t.Fatalf("native body %s", got)
	}
	if _, err := NativeBody([]byte(`[1]`), "qwen"); err == nil {
		t.Fatal("a body that is no object made a native body")
	}
}

// TestNativeUsageIsReadInEachAPIsOwnTerms: Anthropic counts cache reads and writes apart from input_tokens, the
// Responses API within them.
func TestNativeUsageIsReadInEachAPIsOwnTerms(t *testing.T) {
	for _, c := range []struct {
		api, body string
		want      *admission.TokenCount
	}{
		{catalog.NativeMessages, `{"type":"message","usage":{"input_tokens":5,"cache_read_input_tokens":30,"cache_creation_input_tokens":2,"output_tokens":7}}`,
			&admission.TokenCount{Input: 37, Cached: 30, Output: 7}},
		{catalog.NativeMessages, `{"type":"message","usage":{"input_tokens":12,"output_tokens":0}}`, &admission.TokenCount{Input: 12}},
		{catalog.NativeMessages, `{"type":"message","usage":{"input_tokens":-4,"output_tokens":-1}}`, &admission.TokenCount{}},
		{catalog.NativeMessages, `{"type":"message","usage":{"input_tokens":12}}`, nil},
		{catalog.NativeMessages, `{"type":"message"}`, nil},
		{catalog.NativeResponses, `{"object":"response","usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":9,"total_tokens":49}}`,
			&admission.TokenCount{Input: 40, Cached: 32, Output: 9}},
		{catalog.NativeResponses, `{"object":"response","usage":{"output_tokens":9}}`, nil},
		{catalog.NativeResponses, `not json`, nil},
	} {
		got := NativeUsage(c.api, []byte(c.body))
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s usage of %s = %+v; want %+v", c.api, c.body, got, c.want)
		}
	}
}
