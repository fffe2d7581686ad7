package gateway

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/gateway/preferences"
)

// TestTheProviderObjectIsReadAndTakenOut: every field of OpenRouter's provider object and gpumarket's own
// preferences reach routing as routing.Preferences; the provider and gpumarket objects and session_id do not
// reach the rig, and the rest of the body does, prompt_cache_key included.
func TestTheProviderObjectIsReadAndTakenOut(t *testing.T) {
	t.Parallel()
	body := `{"model": "m:realtime", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5,
		"prompt_cache_key": "k", "session_id": "s",
		"provider": {"order": [" Lisboa Rigs ", "off-2"], "only": ["Lisboa Rigs", "Acme"], "ignore": ["off-9"],
			"sort": {"by": "throughput", "partition": "model"}, "allow_fallbacks": false, "require_parameters": false,
			"max_price": {"prompt": 0.3, "completion": "0.6", "request": 1}, "quantizations": ["unknown", "fp8"],
			"data_collection": "allow", "zdr": false, "enforce_distillable_text": null},
		"gpumarket": {"hardware_class": "Enterprise", "region": ["NO", "fr"], "max_gco2e_per_mtok": 12.5, "max_ttft_ms": 200}}`
	req, err := parseGatewayRequest([]byte(body), chatEndpoint, "", accounts.APIKey{AccountID: "acc-1"})
	if err != nil {
		t.Fatal(err)
	}
	prompt, completion := money.MicroUSD(300_000), money.MicroUSD(600_000)
	want := &routing.Preferences{Order: []string{"Lisboa Rigs", "off-2"}, Only: []string{"Lisboa Rigs", "Acme"}, Ignore: []string{"off-9"},
		Sort: routing.SortThroughput, NoFallbacks: true, MaxPromptPrice: &prompt, MaxCompletionPrice: &completion,
		HardwareClass: routing.HardwareEnterprise, Regions: []string{"no", "fr"}, MaxGCO2ePerMTok: 12.5}
	if !reflect.DeepEqual(req.route.Preferences, want) {
		t.Errorf("preferences %+v, want %+v", *req.route.Preferences, *want)
	}
	if req.route.Model != "m" || req.route.MaxTTFTMillis != 200 || req.route.Conversation == "" || req.route.ConversationStarts {
		t.Errorf("route %+v", req.route)
	}
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(req.body, &sent); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"provider", "gpumarket", "session_id"} {
		if _, ok := sent[gone]; ok {
			t.Errorf("%s went to the rig: %s", gone, req.body)
		}
	}
	for _, kept := range []string{"messages", "temperature", "prompt_cache_key"} {
		if _, ok := sent[kept]; !ok {
			t.Errorf("%s did not go to the rig: %s", kept, req.body)
		}
	}
	if string(sent["model"]) != `"m"` {
		t.Errorf("model %s to the rig", sent["model"])
	}

	// A null provider object is no preference, and is taken out too.
	req, err = parseGatewayRequest([]byte(`{"model": "m", "prompt": "x", "provider": null}`), completionEndpoint, "", accounts.APIKey{})
	if err != nil || req.route.Preferences != nil || string(req.body) != `{"model":"m","prompt":"x"}` {
		t.Errorf("a null provider object: %v, %+v, %s", err, req.route.Preferences, req.body)
	}
}

// TestWhatCannotBeKeptIsRefusedBesideItsField: a value gpumarket cannot keep, or preferences that contradict
// each other, are a 400 that names the field.
func TestWhatCannotBeKeptIsRefusedBesideItsField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, members string
		ep            endpoint
		param, code   string
	}{
		{"an unknown field", `"provider": {"fastest": true}`, chatEndpoint, "provider", "invalid_provider_preferences"},
		{"not an object", `"provider": ["Acme"]`, chatEndpoint, "provider", "invalid_provider_preferences"},
		{"an empty name", `"provider": {"only": [" "]}`, chatEndpoint, "provider.only", "invalid_provider_preferences"},
		{"only and ignore the same provider", `"provider": {"only": ["Acme Compute"], "ignore": ["acme-compute"]}`, chatEndpoint,
			"provider.ignore", "invalid_provider_preferences"},
		{"an order without fallbacks that ignore drops", `"provider": {"order": ["a"], "ignore": ["a"], "allow_fallbacks": false}`,
			chatEndpoint, "provider.order", "invalid_provider_preferences"},
		{"a sort that is none", `"provider": {"sort": "fastest"}`, chatEndpoint, "provider.sort", "invalid_provider_preferences"},
		{"a sort partition that is none", `"provider": {"sort": {"by": "price", "partition": "provider"}}`, chatEndpoint,
			"provider.sort", "invalid_provider_preferences"},
		{"sort and prefer", `"provider": {"sort": "price"}, "gpumarket": {"prefer": "carbon"}`, chatEndpoint, "provider.sort",
			"invalid_provider_preferences"},
		{"a negative price", `"provider": {"max_price": {"prompt": -1}}`, chatEndpoint, "provider.max_price.prompt", "invalid_price"},
		{"a price in another unit", `"provider": {"max_price": {"completion": "1e-6"}}`, chatEndpoint, "provider.max_price.completion", "invalid_price"},
		{"a price of something else", `"provider": {"max_price": {"video": 1}}`, chatEndpoint, "provider.max_price", "invalid_provider_preferences"},
		{"a quantization OpenRouter does not name", `"provider": {"quantizations": ["q4_k_m"]}`, chatEndpoint, "provider.quantizations",
			"invalid_provider_preferences"},
		{"a known quantization without unknown", `"provider": {"quantizations": ["fp8", "bf16"]}`, chatEndpoint, "provider.quantizations",
			"unsupported_provider_preference"},
		{"data collection denied", `"provider": {"data_collection": "deny"}`, chatEndpoint, "provider.data_collection", "unsupported_provider_preference"},
		{"zero data retention", `"provider": {"zdr": true}`, chatEndpoint, "provider.zdr", "unsupported_provider_preference"},
		{"distillable text", `"provider": {"enforce_distillable_text": true}`, chatEndpoint, "provider.enforce_distillable_text",
			"unsupported_provider_preference"},
		{"required parameters with tools", `"tools": [], "provider": {"require_parameters": true}`, chatEndpoint,
			"provider.require_parameters", "unsupported_parameter"},
		{"required parameters with n", `"n": 2, "provider": {"require_parameters": true}`, chatEndpoint,
			"provider.require_parameters", "unsupported_parameter"},
		{"an unknown hardware class", `"gpumarket": {"hardware_class": "datacenter"}`, chatEndpoint, "gpumarket.hardware_class",
			"invalid_provider_preferences"},
		{"an unknown region", `"gpumarket": {"region": "atlantis"}`, chatEndpoint, "gpumarket.region", "invalid_provider_preferences"},
		{"a region that is no code", `"gpumarket": {"region": 7}`, chatEndpoint, "gpumarket.region", "invalid_gpumarket_options"},
		{"a carbon cap of nothing", `"gpumarket": {"max_gco2e_per_mtok": 0}`, chatEndpoint, "gpumarket.max_gco2e_per_mtok",
			"invalid_gpumarket_options"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"model": "m", "messages": [{"role": "user", "content": "hi"}], ` + c.members + `}`
			_, err := parseGatewayRequest([]byte(body), c.ep, "", accounts.APIKey{})
			var ge *wire.Error
			if !errors.As(err, &ge) || ge.Status != 400 || ge.Param != c.param || ge.Code != c.code {
				t.Fatalf("parseGatewayRequest = %v; want 400 %s beside %s", err, c.code, c.param)
			}
		})
	}
	// What every offering takes passes, on each endpoint.
	for ep, body := range map[endpoint]string{
		chatEndpoint: `{"model": "m", "messages": [], "max_tokens": 5, "temperature": 1, "top_p": 1, "stop": null, "seed": 1,
			"stream": true, "stream_options": {"include_usage": true}, "user": "u", "prompt_cache_key": "k", "provider": {"require_parameters": true}}`,
		completionEndpoint: `{"model": "m", "prompt": "x", "max_tokens": 5, "provider": {"require_parameters": true}}`,
		embeddingEndpoint:  `{"model": "m", "input": "x", "encoding_format": "float", "provider": {"require_parameters": true}}`,
	} {
		if _, err := parseGatewayRequest([]byte(body), ep, "", accounts.APIKey{}); err != nil {
			t.Errorf("%s with the parameters every offering takes: %v", ep.path, err)
		}
	}
}

// TestAConversationIsNamedByItsSessionOrItsOpening: the X-Session-Id header, then session_id, then
// prompt_cache_key, else a chat's messages up to its first user message name the conversation, within the
// account and the model; a chat that ends there opens it.
func TestAConversationIsNamedByItsSessionOrItsOpening(t *testing.T) {
	t.Parallel()
	name := func(ep endpoint, header, account, body string) (string, bool) {
		t.Helper()
		top, ok := wire.ReadObject([]byte(body))
		if !ok {
			t.Fatalf("not an object: %s", body)
		}
		return preferences.ConversationOf(top, ep.rigPath(), ep.output, header, account, "m")
	}
	opening := `{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Name a GPU."}`
	first, starts := name(chatEndpoint, "", "a", `{"messages": [`+opening+`]}`)
	later, laterStarts := name(chatEndpoint, "", "a", `{"messages": [`+opening+`, {"role": "assistant", "content": "H100"}, {"role": "user", "content": "More?"}]}`)
	spaced, _ := name(chatEndpoint, "", "a", `{"messages": [ `+opening+` ,{"role": "user", "content": "More?"} ] }`)
	if escaped, escapedStarts := name(chatEndpoint, "", "a", `{"messages": [{"role": "\u0075ser", "content": "x"}, {"role": "assistant"}]}`); escaped == "" || escapedStarts {
		t.Errorf("a user message whose role is escaped: %q (opens %v)", escaped, escapedStarts)
	}
	if spaced != first {
		t.Errorf("the opening with space around the array's members: %q, want %q", spaced, first)
	}
	if first == "" || first != later || !starts || laterStarts {
		t.Errorf("the opening names the conversation: %q (opens %v), a later turn %q (opens %v)", first, starts, later, laterStarts)
	}
	if other, _ := name(chatEndpoint, "", "b", `{"messages": [`+opening+`]}`); other == first {
		t.Error("another account's conversation has the same name")
	}
	if other, _ := name(chatEndpoint, "", "a", `{"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Name a CPU."}]}`); other == first {
		t.Error("another opening has the same name")
	}
	session, _ := name(chatEndpoint, "", "a", `{"session_id": "s", "messages": [`+opening+`]}`)
	header, headerStarts := name(chatEndpoint, "s", "a", `{"prompt_cache_key": "k", "messages": [`+opening+`]}`)
	if session == first || header != session || headerStarts {
		t.Errorf("session_id %q and X-Session-Id %q name one conversation, not the opening's %q", session, header, first)
	}
	key, keyStarts := name(chatEndpoint, "", "a", `{"prompt_cache_key": "k", "messages": [`+opening+`]}`)
	if key == session || key == first || keyStarts {
		t.Errorf("prompt_cache_key %q", key)
	}
	if key2, _ := name(completionEndpoint, "", "a", `{"prompt_cache_key": "k", "prompt": "x"}`); key2 != key {
		t.Errorf("the same cache key on a completion: %q, want %q", key2, key)
	}
	for what, body := range map[string]string{"no user message": `{"messages": [{"role": "system", "content": "x"}]}`,
		"messages that are not an array": `{"messages": "hi"}`, "messages that are not objects": `{"messages": ["hi", {"role": "user"}]}`,
		"no messages": `{"messages": []}`} {
		if got, _ := name(chatEndpoint, "", "a", body); got != "" {
			t.Errorf("%s: %q", what, got)
		}
	}
	if got, _ := name(completionEndpoint, "", "a", `{"prompt": "x"}`); got != "" {
		t.Errorf("a completion without a key: %q", got)
	}
	if got, _ := name(embeddingEndpoint, "s", "a", `{"input": "x", "session_id": "s"}`); got != "" {
		t.Errorf("an embedding: %q", got)
	}
}
