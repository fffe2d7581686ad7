package agent

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// The OpenAI wire format, as much of it as the agent reads or rewrites. Everything else passes through untouched.

// tokenUsage is the usage object of a response or of a stream's last chunk. PromptTokensDetails.CachedTokens
// are the prompt tokens the engine served from its prefix cache (vLLM, SGLang, and llama.cpp's server of late
// report them there); null or absent when the engine says nothing of a cache.
type tokenUsage struct {
	PromptTokens        int64          `json:"prompt_tokens"`
	CompletionTokens    int64          `json:"completion_tokens"`
	PromptTokensDetails *cachedDetails `json:"prompt_tokens_details"`
}

// cachedDetails says how many of the prompt tokens the engine served from its cache: OpenAI's
// prompt_tokens_details in chat and text completions, input_tokens_details in Responses.
type cachedDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// llamaTimings is what the agent reads of the timings object llama.cpp's server adds to a response and to a
// stream's last chunk: cache_n is the prompt tokens it took from its cache (prompt_n those it evaluated).
type llamaTimings struct {
	CacheN *int64 `json:"cache_n"`
}

// cachedTokens are the prompt tokens the engine says it served from its cache: usage's
// prompt_tokens_details.cached_tokens when the usage has it, else llama.cpp's timings.cache_n, else none.
func cachedTokens(u *tokenUsage, t *llamaTimings) int64 {
	switch {
	case u == nil:
		return 0 // no prompt count: nothing of it was cached
	case u.PromptTokensDetails != nil:
		return u.PromptTokensDetails.CachedTokens
	case t != nil && t.CacheN != nil:
		return *t.CacheN
	}
	return 0
}

// inferenceRequest is what the agent reads of a request body, and the body it sends upstream.
type inferenceRequest struct {
	model  string
	stream bool
	// forcedUsage says the agent set stream_options.include_usage for its own count: the client did not ask
	// for the usage chunk and must not see it.
	forcedUsage bool
	body        []byte
}

// readInferenceRequest reads the model and the stream flag, and on a streaming request of an endpoint that
// takes stream_options (forceUsage) makes sure include_usage is true, noting when the client had not set it. A
// body that is not a JSON object goes upstream unchanged, to be refused there in the server's own words.
func readInferenceRequest(body []byte, forceUsage bool) inferenceRequest {
	req := inferenceRequest{body: body}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return req
	}
	_ = json.Unmarshal(top["model"], &req.model)
	_ = json.Unmarshal(top["stream"], &req.stream)
	if !req.stream || !forceUsage {
		return req
	}
	options := map[string]json.RawMessage{}
	if raw, ok := top["stream_options"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &options) != nil || options == nil {
			return req // malformed stream_options: the upstream refuses it
		}
	}
	var asked bool
	if json.Unmarshal(options["include_usage"], &asked) == nil && asked {
		return req
	}
	options["include_usage"] = json.RawMessage("true")
	rewritten, err := marshalObject(options)
	if err != nil {
		return req
	}
	top["stream_options"] = rewritten
	if rewritten, err = marshalObject(top); err != nil {
		return req
	}
	req.body, req.forcedUsage = rewritten, true
	return req
}

// marshalObject encodes members without escaping <, > and &, which a prompt holds as it is.
func marshalObject(members map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(members); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// streamChunk is what the agent reads of a streamed chunk (chat.completion.chunk or text_completion).
type streamChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        string          `json:"reasoning"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage   *tokenUsage   `json:"usage"`
	Timings *llamaTimings `json:"timings"`
}

// carriesOutput says whether the chunk holds generated output: text, reasoning or a tool call. The first such
// chunk marks the first token; a chunk with only a role or a finish reason does not count.
func (c *streamChunk) carriesOutput() bool {
	for _, ch := range c.Choices {
		d := ch.Delta
		if ch.Text != "" || d.Content != "" || d.ReasoningContent != "" || d.Reasoning != "" ||
			(len(d.ToolCalls) > 0 && string(d.ToolCalls) != "null" && string(d.ToolCalls) != "[]") {
			return true
		}
	}
	return false
}

// withoutMember returns obj, a JSON object, without its top-level member name, every other byte as it was. It
// returns obj itself when the member is not there or obj is not an object.
func withoutMember(obj []byte, name string) []byte {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return obj
	}
	afterBrace := dec.InputOffset()
	prevEnd := afterBrace // where the previous member's value ends: its comma follows
	for first := true; dec.More(); first = false {
		key, err := dec.Token()
		if err != nil {
			return obj
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return obj
		}
		end := dec.InputOffset()
		if key != name {
			prevEnd = end
			continue
		}
		from, to := prevEnd, end // `,"name":value`
		if first {
			// The first member: cut from the brace through the comma that follows, if another member does.
			from = afterBrace
			rest := obj[end:]
			if i := bytes.IndexFunc(rest, func(r rune) bool { return r != ' ' && r != '\t' && r != '\n' && r != '\r' }); i >= 0 && rest[i] == ',' {
				to = end + int64(i) + 1
			}
		}
		out := make([]byte, 0, int64(len(obj))-(to-from))
		return append(append(out, obj[:from]...), obj[to:]...)
	}
	return obj
}

// memberScanner reads a JSON object as it streams past (it is an io.Writer) and keeps the raw values of the
// top-level members usage, model and timings (llama.cpp's), so that a response of any size is relayed without being held in memory.
type memberScanner struct {
	depth    int
	inString bool
	escaped  bool
	str      []byte // the string being read at depth 1, up to maxKey bytes
	long     bool   // that string is longer than any member name the scanner wants
	lastStr  string // the last string completed at depth 1: a member name when a colon follows
	capture  *[]byte
	overflow bool
	usage    []byte
	model    []byte
	timings  []byte
}

const (
	maxKey     = 16
	maxCapture = 4 << 10
)

func (s *memberScanner) Write(p []byte) (int, error) {
	for _, c := range p {
		s.step(c)
	}
	return len(p), nil
}

func (s *memberScanner) step(c byte) {
	if s.capture != nil && s.depth == 1 && !s.inString && (c == ',' || c == '}') {
		s.capture = nil // the value ended
	}
	if s.capture != nil && !s.overflow {
		if len(*s.capture) >= maxCapture {
			*s.capture, s.overflow = nil, true
		} else {
			*s.capture = append(*s.capture, c)
		}
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.depth == 1 && s.capture == nil {
				s.lastStr = ""
				if !s.long {
					s.lastStr = string(s.str)
				}
			}
			return
		}
		if s.depth == 1 && s.capture == nil {
			if len(s.str) < maxKey {
				s.str = append(s.str, c)
			} else {
				s.long = true
			}
		}
		return
	}
	switch c {
	case '"':
		s.inString, s.str, s.long = true, s.str[:0], false
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
	case ':':
		if s.depth == 1 && s.capture == nil {
			switch s.lastStr {
			case "usage":
				s.usage, s.capture, s.overflow = nil, &s.usage, false
			case "model":
				s.model, s.capture, s.overflow = nil, &s.model, false
			case "timings":
				s.timings, s.capture, s.overflow = nil, &s.timings, false
			}
		}
	}
}

// result decodes what was kept: the usage, read as the dialect writes it, when the body had one, and the model
// name.
func (s *memberScanner) result(d dialect) (usage *tokenUsage, model string) {
	_ = json.Unmarshal(s.model, &model)
	return d.usageOf(s.usage), model
}

// llamaTimings decodes the timings object that was kept, nil when the body had none.
func (s *memberScanner) llamaTimings() *llamaTimings {
	var t llamaTimings
	if len(s.timings) == 0 || json.Unmarshal(s.timings, &t) != nil {
		return nil
	}
	return &t
}

// writeError answers in OpenAI's error shape.
func writeError(w http.ResponseWriter, status int, typ, code, message string) {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{Message: message, Type: typ, Code: code}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
