package dialect

import (
	"encoding/json"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// APIs passed through to engines that serve them.
//
// vLLM, llama.cpp's server and Ollama serve the Anthropic Messages and OpenAI Responses APIs themselves. A rig's
// agent tries each on its engine and says in its heartbeats which it found (routing.Heartbeat.Native). A request
// in a dialect routed to such a rig goes to it on the dialect's own path, as the client wrote it but for its model
// (without the tier suffix) and the gateway's own members (gpumarket, provider, session_id), which the engine
// does not know (NativeBody); its answer comes back as the engine wrote it, and the gateway reads its usage
// (NativeUsage, UsageIn, MessagesDeltaUsage) as it relays it. The relay is package gateway's (its native.go).

// NativeBody is the client's body of a dialect request as a rig whose engine serves the dialect gets it: the
// model named without its tier suffix, and without the members only the gateway reads.
func NativeBody(clientBody []byte, model string) ([]byte, error) {
	top, ok := wire.ReadObject(clientBody)
	if !ok {
		return nil, wire.InvalidRequest("", "invalid_json", "We could not parse the JSON body of your request: send a JSON object.")
	}
	members := top.Members()
	for _, name := range []string{"gpumarket", "provider", "session_id"} {
		delete(members, name)
	}
	raw, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	members["model"] = raw
	return wire.MarshalMembers(members)
}

// NativeUsage reads the usage of a whole native answer: nil when it has none the gateway can read.
func NativeUsage(api string, body []byte) *admission.TokenCount {
	var a struct {
		Usage *json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(body, &a) != nil || a.Usage == nil {
		return nil
	}
	return UsageIn(api, *a.Usage)
}

// UsageIn reads a native usage object. Anthropic counts the input read from the cache, and the input written to
// it, apart from input_tokens; the Responses API counts the cached input within input_tokens.
func UsageIn(api string, raw json.RawMessage) *admission.TokenCount {
	switch api {
	case catalog.NativeMessages:
		var u struct {
			Input       *int64 `json:"input_tokens"`
			Output      *int64 `json:"output_tokens"`
			CacheRead   int64  `json:"cache_read_input_tokens"`
			CacheCreate int64  `json:"cache_creation_input_tokens"`
		}
		if json.Unmarshal(raw, &u) != nil || u.Output == nil {
			return nil
		}
		in := max(ptrOr(u.Input), 0) + max(u.CacheRead, 0) + max(u.CacheCreate, 0)
		return &admission.TokenCount{Input: in, Output: max(*u.Output, 0), Cached: max(u.CacheRead, 0)}
	case catalog.NativeResponses:
		var u struct {
			Input   *int64 `json:"input_tokens"`
			Output  *int64 `json:"output_tokens"`
			Details struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		}
		if json.Unmarshal(raw, &u) != nil || u.Input == nil || u.Output == nil {
			return nil
		}
		return &admission.TokenCount{Input: max(*u.Input, 0), Output: max(*u.Output, 0), Cached: max(u.Details.Cached, 0)}
	}
	return nil
}

func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// MessagesDeltaUsage reads the usage of a native Messages stream's message_delta event into the usage read so far
// (nil before any): the output count is the whole so far; the input, when the event repeats it, too. ok is false
// when the event tells no output count, and usage is then as it was.
func MessagesDeltaUsage(raw json.RawMessage, usage *admission.TokenCount) (_ *admission.TokenCount, ok bool) {
	var u struct {
		Input       *int64 `json:"input_tokens"`
		Output      *int64 `json:"output_tokens"`
		CacheRead   *int64 `json:"cache_read_input_tokens"`
		CacheCreate *int64 `json:"cache_creation_input_tokens"`
	}
	if json.Unmarshal(raw, &u) != nil || u.Output == nil {
		return usage, false
	}
	if usage == nil {
		usage = &admission.TokenCount{}
	}
	usage.Output = max(*u.Output, 0)
	if u.Input != nil || u.CacheRead != nil || u.CacheCreate != nil {
		usage.Input = max(ptrOr(u.Input), 0) + max(ptrOr(u.CacheRead), 0) + max(ptrOr(u.CacheCreate), 0)
		usage.Cached = max(ptrOr(u.CacheRead), 0)
	}
	return usage, true
}
