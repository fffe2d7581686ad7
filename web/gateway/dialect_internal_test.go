package gateway

import (
	"bytes"
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/web/gateway/dialect"
)

// TestAMessagesRequestIsParsedAsTheChatItBecomes: the chat body a Messages request translates to is what the
// gateway parses next: the tier suffix, the gpumarket object and the stream's usage.
func TestAMessagesRequestIsParsedAsTheChatItBecomes(t *testing.T) {
	chat, err := dialect.Anthropic{}.ToChat([]byte(`{"model":"m:batch","max_tokens":64,"stream":true,
		"gpumarket":{"prefer":"carbon"},"provider":{"order":["x"]},"messages":[{"role":"user","content":"Weather in Lyon?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := parseGatewayRequest(chat, messagesEndpoint, "", accounts.APIKey{})
	if err != nil {
		t.Fatal(err)
	}
	if req.route.Model != "m" || req.route.Tier != "batch" || !req.stream || !req.forcedUsage || req.bounds.MaxOutputTokens != 64 {
		t.Fatalf("parsed %+v", req)
	}
}

// TestAResponsesRequestIsParsedAsTheChatItBecomes: what the gateway reads of a Responses request is the chat
// completion's: the tier of the model's suffix, the stream, the output limit of max_output_tokens; the gpumarket
// and provider objects are taken out on the way to the rig.
func TestAResponsesRequestIsParsedAsTheChatItBecomes(t *testing.T) {
	chat, err := dialect.Responses{}.ToChat([]byte(`{"model":"llama-3-8b:realtime","instructions":"Be brief.","stream":true,
		"max_output_tokens":64,"input":"And <tomorrow>?",
		"gpumarket":{"tier":"standard","max_ttft_ms":900},"provider":{"order":["a","b"],"allow_fallbacks":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := parseGatewayRequest(chat, endpoint{path: "/v1/responses", streams: true, output: true, dialect: dialect.Responses{}},
		"", accounts.APIKey{})
	if err != nil {
		t.Fatal(err)
	}
	if req.route.Model != "llama-3-8b" || req.route.Tier != catalog.TierRealtime || !req.stream || req.bounds.MaxOutputTokens != 64 {
		t.Fatalf("read as model %q tier %q stream %v max output %d", req.route.Model, req.route.Tier, req.stream, req.bounds.MaxOutputTokens)
	}
	if bytes.Contains(req.body, []byte(`"gpumarket"`)) || bytes.Contains(req.body, []byte(`"provider"`)) {
		t.Fatalf("the rig's body: %s", req.body)
	}
}
