package wire

import (
	"encoding/json"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
)

// The usage member of an answer in OpenAI's shape, read from a whole answer or a stream's chunk, and the request's
// cost written into it (package gateway's cost.go).

// UsageOf reads the usage member of a whole response.
func UsageOf(body []byte) *admission.TokenCount {
	top, ok := ReadObject(body)
	if !ok {
		return nil
	}
	raw, _ := top.Get("usage")
	members, ok := SplitObject(raw) // a part of the body, which ReadObject checked
	if !ok {
		return nil // none, null, or not an object
	}
	var u Usage
	var okIn, okOut bool
	u.PromptTokens, okIn = members.Int("prompt_tokens")
	u.CompletionTokens, okOut = members.Int("completion_tokens")
	if !okIn || !okOut {
		return nil
	}
	// The cached prompt tokens, when the usage details them: a details member that is not an
	// object, or a count that is not a whole number, shows none.
	if raw, ok := members.Get("prompt_tokens_details"); ok {
		if details, ok := SplitObject(raw); ok {
			if n, ok := details.Int("cached_tokens"); ok {
				u.PromptTokensDetails = &PromptDetails{CachedTokens: n}
			}
		}
	}
	return u.Count()
}

// Usage is the usage object of a response or of a stream's usage chunk. Its
// prompt_tokens_details.cached_tokens are the prompt tokens the engine said it served from its
// cache, which the client is shown and the meter bills no fewer of at the cached price.
type Usage struct {
	PromptTokens        int64          `json:"prompt_tokens"`
	CompletionTokens    int64          `json:"completion_tokens"`
	PromptTokensDetails *PromptDetails `json:"prompt_tokens_details"`
}

// PromptDetails is what the gateway reads of a usage's prompt_tokens_details.
type PromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// UnmarshalJSON reads the details leniently: details it cannot read show no cached token, and
// never cost the chunk its usage.
func (d *PromptDetails) UnmarshalJSON(raw []byte) error {
	var v struct {
		CachedTokens int64 `json:"cached_tokens"`
	}
	if json.Unmarshal(raw, &v) == nil {
		d.CachedTokens = v.CachedTokens
	}
	return nil
}

// Count is the usage as the meter counts it: never below zero, and never more cached tokens than the prompt.
func (u *Usage) Count() *admission.TokenCount {
	c := &admission.TokenCount{Input: max(u.PromptTokens, 0), Output: max(u.CompletionTokens, 0)}
	if u.PromptTokensDetails != nil {
		c.Cached = min(max(u.PromptTokensDetails.CachedTokens, 0), c.Input)
	}
	return c
}

// WithCost returns body, a JSON object, with "cost" added to its usage member, an object; body itself when it has
// none. A cost already there (a rig's) is outvoted: a member named twice reads as its last value.
func WithCost(body []byte, cost money.Pico) []byte {
	top, ok := SplitObject(body)
	if !ok {
		return body
	}
	for i := len(top) - 1; i >= 0; i-- {
		m := top[i]
		if string(m.Name) != "usage" {
			continue
		}
		v := m.Value
		if len(v) < 2 || v[0] != '{' {
			return body
		}
		closing := m.At + len(v) - 1
		fields, _ := SplitObject(v)
		out := make([]byte, 0, len(body)+32)
		out = append(out, body[:closing]...)
		if len(fields) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"cost":`...)
		out = append(out, cost.Decimal(12)...)
		return append(out, body[closing:]...)
	}
	return body
}

// WithPayloadCost returns the frame with the cost in the usage of its payload (frame[from:to]).
func WithPayloadCost(frame []byte, from, to int, cost money.Pico) []byte {
	payload := WithCost(frame[from:to], cost)
	out := make([]byte, 0, len(frame)+len(payload)-(to-from))
	out = append(out, frame[:from]...)
	out = append(out, payload...)
	return append(out, frame[to:]...)
}

// WithResponseCost returns the frame with the cost in the usage of the response its payload (frame[from:to])
// carries.
func WithResponseCost(frame []byte, from, to int, cost money.Pico) []byte {
	top, ok := SplitObject(frame[from:to])
	if !ok {
		return frame
	}
	for i := len(top) - 1; i >= 0; i-- {
		if string(top[i].Name) != "response" {
			continue
		}
		v := top[i].Value
		nv := WithCost(v, cost)
		at := from + top[i].At
		out := make([]byte, 0, len(frame)+len(nv)-len(v))
		out = append(out, frame[:at]...)
		out = append(out, nv...)
		return append(out, frame[at+len(v):]...)
	}
	return frame
}
