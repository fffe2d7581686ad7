// Package preferences reads what a /v1 request asks of routing beyond its model and tier: OpenRouter's
// "provider" object (routing.Preferences), gpumarket's own preferences in the "gpumarket" object,
// require_parameters, and the conversation the request belongs to, which routing keeps on one rig. It reads
// bodies only; the gateway (package gateway), its only importer, parses the request and routes it. It imports
// none of the gateway's packages but internal/wire.
package preferences

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// Provider preferences and conversations (docs/gateway.md, "Provider preferences" and "One conversation, one
// rig").
//
// The body object "provider" is OpenRouter's: order, only, ignore, sort, max_price, allow_fallbacks,
// require_parameters, quantizations, data_collection, zdr and enforce_distillable_text, read as OpenRouter
// documents them wherever gpumarket knows what they ask (routing.Preferences), and refused beside their name
// where it cannot keep them. gpumarket's own rules, the hardware class, the regions and a cap on carbon, are in
// the "gpumarket" object (package gateway's readGatewayOptions, then Read), so that a provider object written
// for OpenRouter means here what it meant there. Both objects are taken out of the body before it goes to the rig, and so is session_id.

// The paths of the endpoints whose parameters are known (knownParameters); the chat's also names conversations.
const (
	chatPath       = "/v1/chat/completions"
	completionPath = "/v1/completions"
	embeddingPath  = "/v1/embeddings"
)

// providerOptions is the body object "provider".
type providerOptions struct {
	Order             []string        `json:"order"`
	Only              []string        `json:"only"`
	Ignore            []string        `json:"ignore"`
	Sort              json.RawMessage `json:"sort"` // "price", "throughput", "latency", or {"by", "partition"}
	MaxPrice          json.RawMessage `json:"max_price"`
	AllowFallbacks    *bool           `json:"allow_fallbacks"`
	RequireParameters *bool           `json:"require_parameters"`
	Quantizations     []string        `json:"quantizations"`
	// What gpumarket cannot promise: accepted only at the values that ask nothing.
	DataCollection         *string `json:"data_collection"`
	ZDR                    *bool   `json:"zdr"`
	EnforceDistillableText *bool   `json:"enforce_distillable_text"`
}

// quantizations are the levels OpenRouter names. gpumarket's catalog records no offering's quantization: every
// offering's is "unknown".
var quantizations = []string{"int4", "int8", "fp4", "fp6", "fp8", "fp16", "bf16", "fp32", "unknown"}

// ReadProvider reads the body object "provider" into the ask, refusing a field it does not know or a
// value it cannot keep, beside the field's name. It reports whether the request asks that only offerings known
// to take each of its parameters serve it (require_parameters).
func ReadProvider(raw json.RawMessage, ask *routing.Ask) (requireParameters bool, err error) {
	var opts providerOptions
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&opts); err != nil {
		return false, wire.InvalidRequest("provider", "invalid_provider_preferences",
			`The "provider" object takes order, only, ignore, sort, max_price, allow_fallbacks, require_parameters, quantizations, data_collection, zdr and enforce_distillable_text: %v.`, err)
	}
	p := preferencesOf(ask)
	for _, list := range []struct {
		field string
		in    []string
		out   *[]string
	}{{"provider.order", opts.Order, &p.Order}, {"provider.only", opts.Only, &p.Only}, {"provider.ignore", opts.Ignore, &p.Ignore}} {
		for _, e := range list.in {
			if e = strings.TrimSpace(e); e == "" {
				return false, wire.InvalidRequest(list.field, "invalid_provider_preferences", "%s holds an empty name.", list.field)
			}
			*list.out = append(*list.out, e)
		}
	}
	if p.Sort, err = readSort(opts.Sort); err != nil {
		return false, err
	}
	if err := readMaxPrice(opts.MaxPrice, p); err != nil {
		return false, err
	}
	p.NoFallbacks = opts.AllowFallbacks != nil && !*opts.AllowFallbacks
	if len(opts.Quantizations) > 0 {
		for _, q := range opts.Quantizations {
			if !slices.Contains(quantizations, q) {
				return false, wire.InvalidRequest("provider.quantizations", "invalid_provider_preferences",
					"provider.quantizations takes %s; %q is none of them.", strings.Join(quantizations, ", "), q)
			}
		}
		if !slices.Contains(opts.Quantizations, "unknown") {
			return false, wire.InvalidRequest("provider.quantizations", "unsupported_provider_preference",
				`gpumarket's catalog does not record the quantization an offering runs, so every offering's is "unknown": include "unknown" in provider.quantizations, or leave it out.`)
		}
	}
	switch {
	case opts.DataCollection != nil && *opts.DataCollection != "allow":
		return false, wire.InvalidRequest("provider.data_collection", "unsupported_provider_preference",
			`provider.data_collection can only be "allow": gpumarket's rigs are run by independent providers, and the platform cannot promise what one keeps.`)
	case opts.ZDR != nil && *opts.ZDR:
		return false, wire.InvalidRequest("provider.zdr", "unsupported_provider_preference",
			"provider.zdr can only be false: gpumarket cannot promise that an independent provider's rig retains no prompt.")
	case opts.EnforceDistillableText != nil && *opts.EnforceDistillableText:
		return false, wire.InvalidRequest("provider.enforce_distillable_text", "unsupported_provider_preference",
			"provider.enforce_distillable_text can only be false: gpumarket's catalog does not record the models' licences.")
	}
	return opts.RequireParameters != nil && *opts.RequireParameters, nil
}

// preferencesOf is the ask's preferences, made when it has none.
func preferencesOf(ask *routing.Ask) *routing.Preferences {
	if ask.Preferences == nil {
		ask.Preferences = &routing.Preferences{}
	}
	return ask.Preferences
}

// readSort reads provider.sort: a string, or OpenRouter's object {"by", "partition"}, whose partition changes
// nothing here, since a request routes one model.
func readSort(raw json.RawMessage) (routing.Sort, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var by string
	if json.Unmarshal(raw, &by) != nil {
		var obj struct {
			By        string  `json:"by"`
			Partition *string `json:"partition"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(&obj) != nil || (obj.Partition != nil && *obj.Partition != "model" && *obj.Partition != "none") {
			return "", wire.InvalidRequest("provider.sort", "invalid_provider_preferences",
				`provider.sort is "price", "throughput" or "latency", or an object {"by": one of them, "partition": "model" or "none"}.`)
		}
		by = obj.By
	}
	if s := routing.Sort(by); s.Valid() {
		return s, nil
	}
	return "", wire.InvalidRequest("provider.sort", "invalid_provider_preferences", `provider.sort must be "price", "throughput" or "latency".`)
}

// readMaxPrice reads provider.max_price: prompt and completion in dollars per million tokens, as numbers or
// strings, as OpenRouter takes them. gpumarket charges per token alone, so a cap on the price per request,
// image or audio unit is met by every offering and changes nothing.
func readMaxPrice(raw json.RawMessage, p *routing.Preferences) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var mp struct {
		Prompt     json.RawMessage `json:"prompt"`
		Completion json.RawMessage `json:"completion"`
		Request    json.RawMessage `json:"request"`
		Image      json.RawMessage `json:"image"`
		Audio      json.RawMessage `json:"audio"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&mp); err != nil {
		return wire.InvalidRequest("provider.max_price", "invalid_provider_preferences",
			"provider.max_price takes prompt and completion, in dollars per million tokens (and request, image and audio, which gpumarket does not charge): %v.", err)
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		out  **money.MicroUSD
	}{
		{"prompt", mp.Prompt, &p.MaxPromptPrice}, {"completion", mp.Completion, &p.MaxCompletionPrice},
		{"request", mp.Request, nil}, {"image", mp.Image, nil}, {"audio", mp.Audio, nil},
	} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		v, err := money.ParseMicroUSD(strings.Trim(string(f.raw), `"`))
		if err != nil {
			return wire.InvalidRequest("provider.max_price."+f.name, "invalid_price",
				"provider.max_price.%s is dollars per million tokens, like 0.15: %v.", f.name, err)
		}
		if f.out != nil {
			*f.out = &v
		}
	}
	return nil
}

// knownParameters are the members of a request that every offering is known to take, by endpoint: what every
// OpenAI-compatible server gpuagent fronts (vLLM, llama.cpp's server) takes without options of its own, and
// the gateway's own members. gpumarket's catalog records no rig's server or its options, so a request that
// requires its parameters may carry only these (docs/gateway.md, "require_parameters").
var knownParameters = map[string][]string{
	chatPath: {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "seed",
		"presence_penalty", "frequency_penalty", "stream", "stream_options", "user"},
	completionPath: {"model", "prompt", "max_tokens", "temperature", "top_p", "stop", "seed",
		"presence_penalty", "frequency_penalty", "stream", "stream_options", "user"},
	embeddingPath: {"model", "input", "encoding_format", "user"},
}

// gatewayMembers are the members the gateway itself reads, on every endpoint.
var gatewayMembers = []string{"gpumarket", "provider", "session_id", "prompt_cache_key"}

// RequireKnownParameters refuses a request to path that requires its parameters when one of them is not known to
// be taken by every offering: no offering is then known to support it. rigPath is the path its rig is called
// on: a dialect's body is a chat by now.
func RequireKnownParameters(top wire.Object, path, rigPath string) error {
	known := knownParameters[rigPath]
	if known == nil {
		return wire.InvalidRequest("provider.require_parameters", "unsupported_parameter",
			"provider.require_parameters is not taken on %s: gpumarket knows of no offering's parameters there.", path)
	}
	for _, m := range top {
		name := string(m.Name)
		if !slices.Contains(known, name) && !slices.Contains(gatewayMembers, name) && string(m.Value) != "null" {
			return wire.InvalidRequest("provider.require_parameters", "unsupported_parameter",
				"No offering is known to support %s, and provider.require_parameters is true: gpumarket's catalog does not record a rig's inference server, so only %s are known to be taken by every offering. Leave %s out, or require_parameters false.",
				name, strings.Join(known, ", "), name)
		}
	}
	return nil
}

// ConversationOf names the conversation of a request, for routing to keep it on one rig (routing.Request's
// Conversation), and says whether the request opens it (ConversationStarts, writeOpening): the first of the X-Session-Id
// header, the body's session_id, its prompt_cache_key, else, for a chat, its messages up to and including the
// first user message (the system prompt and the opening question, which every later turn of the conversation
// repeats). A chat whose messages end there opens its conversation; named by a session or a cache key, a request
// continues it, whichever turn it is. The name is a digest of the account, the model and that value, so that two
// accounts' conversations never share a name. An embedding (output false), or a completion that names none,
// belongs to no conversation. rigPath is the path the request's rig is called on: a dialect's body is a chat by
// now.
func ConversationOf(top wire.Object, rigPath string, output bool, header, accountID, model string) (name string, starts bool) {
	if !output {
		return "", false
	}
	value := strings.TrimSpace(header)
	source := "session"
	if value == "" {
		// session_id and the header name the same conversations.
		for _, m := range []struct{ member, source string }{{"session_id", "session"}, {"prompt_cache_key", "prompt_cache_key"}} {
			raw, ok := top.Get(m.member)
			if !ok {
				continue
			}
			if s, ok := wire.String(raw); ok && strings.TrimSpace(s) != "" {
				value, source = strings.TrimSpace(s), m.source
				break
			}
		}
	}
	h := sha256.New()
	for _, part := range []string{accountID, model} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	switch {
	case value != "":
		h.Write([]byte(source))
		h.Write([]byte{0})
		h.Write([]byte(value))
	case rigPath == chatPath:
		raw, _ := top.Get("messages")
		h.Write([]byte("messages\x00"))
		var ok bool
		if ok, starts = writeOpening(h, raw); !ok {
			return "", false
		}
	default:
		return "", false
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), starts
}

// writeOpening writes to w the messages of a chat up to and including the first user message, as written, and
// says whether they are all of its messages; ok is false when there is no user message or the messages are not
// an array of objects. The body is valid JSON (wire.ReadObject): it is read in place, as its members are.
func writeOpening(w io.Writer, messages json.RawMessage) (ok, all bool) {
	i := wire.SkipSpace(messages, 0)
	if i == len(messages) || messages[i] != '[' {
		return false, false
	}
	for i = wire.SkipSpace(messages, i+1); i < len(messages) && messages[i] != ']'; {
		end := wire.ValueEnd(messages, i)
		m := messages[i:end]
		obj, isObject := wire.SplitObject(m)
		if !isObject {
			return false, false
		}
		_, _ = w.Write(m)
		_, _ = w.Write([]byte{'\n'})
		if i = wire.SkipSpace(messages, end); i < len(messages) && messages[i] == ',' {
			i = wire.SkipSpace(messages, i+1)
		}
		if raw, _ := obj.Get("role"); raw != nil {
			if role, _ := wire.String(raw); role == "user" {
				return true, i < len(messages) && messages[i] == ']'
			}
		}
	}
	return false, false
}

// Check answers the first problem with the request's preferences beside its field, and a routing
// order asked for twice.
func Check(route routing.Request, preferGiven bool) error {
	if field, problem := route.Preferences.Check(); field != "" {
		return wire.InvalidRequest(field, "invalid_provider_preferences", "%s", problem)
	}
	if preferGiven && route.Preferences != nil && route.Preferences.Sort != "" {
		return wire.InvalidRequest("provider.sort", "invalid_provider_preferences",
			"provider.sort and gpumarket.prefer both order the offerings: give one of them.")
	}
	return nil
}

// Options are gpumarket's own provider preferences (routing.Preferences), members of the body object "gpumarket":
// the GPU's class, consumer or enterprise; the regions, a code or a list of codes; a cap on the estimated grams
// of CO2e per million tokens.
type Options struct {
	HardwareClass   string          `json:"hardware_class"`
	Region          json.RawMessage `json:"region"`
	MaxGCO2ePerMTok *float64        `json:"max_gco2e_per_mtok"`
}

// Read reads gpumarket's own provider preferences into the ask. Their values are checked with the rest (Check).
func Read(opts Options, ask *routing.Ask) error {
	if opts.HardwareClass != "" {
		preferencesOf(ask).HardwareClass = strings.ToLower(strings.TrimSpace(opts.HardwareClass))
	}
	if len(opts.Region) > 0 && string(opts.Region) != "null" {
		var regions []string
		if code, ok := wire.String(opts.Region); ok {
			regions = []string{code}
		} else if json.Unmarshal(opts.Region, &regions) != nil || len(regions) == 0 {
			return wire.InvalidRequest("gpumarket.region", "invalid_gpumarket_options",
				`gpumarket.region is a region's code, like "no", or a list of codes.`)
		}
		for i := range regions {
			regions[i] = strings.ToLower(strings.TrimSpace(regions[i]))
		}
		preferencesOf(ask).Regions = regions
	}
	if g := opts.MaxGCO2ePerMTok; g != nil {
		if math.IsNaN(*g) || math.IsInf(*g, 0) || *g <= 0 {
			return wire.InvalidRequest("gpumarket.max_gco2e_per_mtok", "invalid_gpumarket_options",
				"gpumarket.max_gco2e_per_mtok is grams of CO2e per million tokens, more than 0.")
		}
		preferencesOf(ask).MaxGCO2ePerMTok = *g
	}
	return nil
}
