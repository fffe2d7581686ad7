package simulation

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// maxBodyBytes bounds a request body; larger ones are refused with 413.
	maxBodyBytes = 8 << 20
	// maxCompletionTokens bounds a requested completion length.
	maxCompletionTokens = 32768
	// defaultEmbeddingDims is the length of an embedding when the request names none, that of
	// OpenAI's text-embedding-3-small.
	defaultEmbeddingDims = 1536
	maxEmbeddingDims     = 4096
	// maxTokensPerFrame bounds how many tokens one streamed frame carries when the stream is
	// behind its schedule (timer granularity, a fast -speed, the zero profile).
	maxTokensPerFrame = 8
)

// Options configure a simulated inference server.
type Options struct {
	Profile  Profile          // the GPU configuration to behave like; Zero() for no latency
	Model    string           // the served model's name; Profile.Model when empty
	Speed    float64          // time runs this many times faster: 10 makes every wait a tenth; 0 means 1
	FailRate float64          // fraction of inference requests answered 500 before any byte, in [0, 1]
	Seed     uint64           // seeds latencies, failures, output lengths, text and embeddings
	Now      func() time.Time // the clock of the "created" fields; time.Now when nil
	// PrefixCache reports the prompt tokens a simulated prefix cache served
	// (prefix_cache.go) in usage.prompt_tokens_details.cached_tokens, as vLLM does with its
	// prefix caching and prompt token details on; without it usage has no details.
	PrefixCache bool
	// Native serves /v1/messages and /v1/responses natively, as vLLM does: the Anthropic
	// Messages API and OpenAI's Responses API, answered as the chat they stand for is (see the
	// package doc). Without it those paths are 404, as on an engine that serves only OpenAI's
	// chat and completions.
	Native bool
}

// Validate reports what is wrong with the options, if anything.
func (o Options) Validate() error {
	switch {
	case o.Model == "" && o.Profile.Model == "":
		return errors.New("simulation: name the model to serve")
	case o.Speed < 0 || math.IsNaN(o.Speed) || math.IsInf(o.Speed, 0):
		return fmt.Errorf("simulation: speed %g is not a positive factor", o.Speed)
	case !(o.FailRate >= 0 && o.FailRate <= 1):
		return fmt.Errorf("simulation: fail rate %g is not in [0, 1]", o.FailRate)
	}
	return nil
}

// Handler is an OpenAI-compatible inference server that behaves like its profile:
//
//	POST /v1/chat/completions   streaming (server-sent events) and not; tool calls (see the package doc)
//	POST /v1/completions        streaming and not
//	POST /v1/embeddings         deterministic unit vectors
//	POST /v1/messages           with Options.Native: the Anthropic Messages API, streaming and not
//	POST /v1/responses          with Options.Native: OpenAI's Responses API, stateless, streaming and not
//	GET  /v1/models             the served model
//	GET  /health                200 when up, as vLLM answers it
//
// Each inference request counts as in flight from its arrival to its last byte; the number in
// flight when it arrives, itself included, is the concurrency at which the profile's model
// draws its latencies. It waits its time to first token, then emits a token every time per
// output token, and stops as soon as its client goes away.
type Handler struct {
	opts     Options
	model    string
	latency  *Model
	mux      *http.ServeMux
	inFlight atomic.Int64
	started  int64

	mu       sync.Mutex
	failRng  *rand.Rand
	prefixes prefixCache
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the server of the options. It panics on options that Validate refuses:
// commands validate their flags first.
func NewHandler(opts Options) *Handler {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if opts.Speed == 0 {
		opts.Speed = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{
		opts:    opts,
		model:   cmp.Or(opts.Model, opts.Profile.Model),
		latency: NewModel(opts.Profile, opts.Seed),
		failRng: rand.New(rand.NewPCG(opts.Seed, 0xfa11)),
		started: opts.Now().Unix(),
	}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("POST /v1/chat/completions", openAIErrors.serve(h.chatCompletions))
	h.mux.HandleFunc("POST /v1/completions", openAIErrors.serve(h.completions))
	h.mux.HandleFunc("POST /v1/embeddings", openAIErrors.serve(h.embeddings))
	if opts.Native {
		h.mux.HandleFunc("POST /v1/messages", anthropicErrors.serve(h.messages))
		h.mux.HandleFunc("POST /v1/responses", openAIErrors.serve(h.responses))
	}
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	h.mux.HandleFunc("/", openAIErrors.serve(func(w http.ResponseWriter, r *http.Request) *requestError {
		return &requestError{status: http.StatusNotFound, typ: "invalid_request_error",
			message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}
	}))
	return h
}

// ServeHTTP serves the endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// InFlight is the number of inference requests being served now.
func (h *Handler) InFlight() int { return int(h.inFlight.Load()) }

// Model is the served model's name.
func (h *Handler) Model() string { return h.model }

// generation is one answer being produced: what it will say, how long, and how fast.
type generation struct {
	id               string
	created          int64
	promptTokens     int
	cachedTokens     int  // of promptTokens, served from the prefix cache
	prefixCache      bool // usage reports cachedTokens
	completionTokens int
	finishReason     string
	text             tokenSource
	latency          Latency // already scaled by the speed
	includeUsage     bool
	// call, when set, is the tool call the answer is: text then holds its arguments.
	call *toolCall
}

// tokenSource hands out an answer's text one token at a time.
type tokenSource interface{ next() string }

func (g *generation) usage() usage {
	u := usage{PromptTokens: g.promptTokens, CompletionTokens: g.completionTokens, TotalTokens: g.promptTokens + g.completionTokens}
	if g.prefixCache {
		u.PromptTokensDetails = &promptDetails{CachedTokens: g.cachedTokens}
	}
	return u
}

// limitRule is what a request's token limit does to its answer's length.
type limitRule int

const (
	// limitSets makes the answer as long as the limit: on the OpenAI paths a client, a benchmark
	// say, gets the output length it asks for.
	limitSets limitRule = iota
	// limitCaps cuts the answer's drawn length at the limit: on the native APIs, whose clients
	// send a limit with nearly every request (Anthropic's requires one) as a bound, as a real
	// engine takes it. Any limit of 1 or more is taken there, however high: it only bounds.
	limitCaps
)

// plan sizes the answer to a prompt: a length drawn around the profile's mean output, finishing
// for "stop", unless the request sets a limit, which sets or caps that length by the rule; an
// answer the limit sets or cuts finishes for "length". The length is drawn in either case, so
// that a limited answer is a prefix of the unlimited one.
func (h *Handler) plan(idPrefix, prompt string, promptTokens int, limit *int, rule limitRule) *generation {
	rng := keyedRand(h.opts.Seed, h.model+"\x00"+prompt)
	g := &generation{
		id:               idPrefix + crand.Text(),
		created:          h.opts.Now().Unix(),
		promptTokens:     promptTokens,
		completionTokens: outputLength(rng, h.opts.Profile.MeanOutputTokens()),
		finishReason:     "stop",
	}
	if limit != nil && (rule == limitSets || *limit < g.completionTokens) {
		g.completionTokens, g.finishReason = *limit, "length"
	}
	g.text = newTextGen(rng)
	return g
}

// planToolCall makes the generation a call of the tool: its output is the call's placeholder
// arguments, one token at a time, cut at the limit when the request sets a lower one (finishing
// for "length"), else whole (finishing for "tool_calls").
func (g *generation) planToolCall(tool *chatTool, limit *int) {
	pieces := tokenPieces(placeholderArguments(tool.Function.Parameters))
	g.finishReason = "tool_calls"
	if limit != nil && *limit < len(pieces) {
		pieces, g.finishReason = pieces[:*limit], "length"
	}
	g.completionTokens = len(pieces)
	g.text = &pieceSource{pieces: pieces}
	g.call = &toolCall{ID: "call_" + randomHex(12), Type: "function", Function: functionCall{Name: tool.Function.Name}}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// enter counts a request in flight and draws its latency at the concurrency it found; the
// returned function counts it out.
func (h *Handler) enter() (Latency, func()) {
	c := h.inFlight.Add(1)
	l := h.latency.Draw(int(c))
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) / h.opts.Speed) }
	return Latency{TTFT: scale(l.TTFT), TPOT: scale(l.TPOT)}, func() { h.inFlight.Add(-1) }
}

// failure is the 500 of a request the fail rate picks, drawn before the request is read.
func (h *Handler) failure() *requestError {
	if h.opts.FailRate == 0 {
		return nil
	}
	h.mu.Lock()
	fail := h.failRng.Float64() < h.opts.FailRate
	h.mu.Unlock()
	if !fail {
		return nil
	}
	return &requestError{status: http.StatusInternalServerError, typ: "server_error",
		message: "The server had an error while processing your request. Sorry about that!"}
}

// read admits an inference request: it fails it as often as the fail rate says, else decodes
// its JSON body into v, refusing one it cannot parse (400) or too large (413).
func (h *Handler) read(w http.ResponseWriter, r *http.Request, v any) *requestError {
	if e := h.failure(); e != nil {
		return e
	}
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(v)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &requestError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
			message: fmt.Sprintf("The request body is larger than %d bytes.", maxBodyBytes)}
	case err != nil:
		return invalid("", "We could not parse the JSON body of your request. (%v)", err)
	}
	return nil
}

// servesModel refuses (404) a request that names a model other than the served one. A request
// that names none gets the served model, as vLLM does.
func (h *Handler) servesModel(model string) *requestError {
	if model == "" || model == h.model {
		return nil
	}
	return &requestError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
		message: fmt.Sprintf("The model `%s` does not exist.", model)}
}

// validLimit refuses a token limit out of range, and an n other than 1.
func validLimit(param string, limit, n *int) *requestError {
	if n != nil && *n != 1 {
		return invalid("n", "This server returns one choice per request: set n to 1 or leave it out.")
	}
	if limit != nil && (*limit < 1 || *limit > maxCompletionTokens) {
		return invalid(param, "%s must be between 1 and %d.", param, maxCompletionTokens)
	}
	return nil
}

// planChat plans the answer to a chat: its prompt's tokens (each message's role and content, and
// the calls an assistant message carries), the share of them the prefix cache served, and text
// or a call of a tool (tools.go), limited by limit, when set, by the rule. The native APIs' requests
// come here as the chat they stand for (messages.go, responses.go), so that every API answers
// the same conversation alike.
func (h *Handler) planChat(req chatRequest, limit *int, rule limitRule, idPrefix string) (*generation, *requestError) {
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages must hold at least one message.")
	}
	var prompt strings.Builder
	tokens := 0
	parts := make([]promptPart, 0, len(req.Messages))
	for i, m := range req.Messages {
		text, err := m.text()
		if err != nil {
			return nil, invalid(fmt.Sprintf("messages[%d].content", i), "%s", err)
		}
		n := CountTokens(m.Role) + CountTokens(text)
		tokens += n
		prompt.WriteString(m.Role + "\x00" + text + "\x00")
		// The calls an assistant made are its content: their names and arguments count.
		for _, c := range m.ToolCalls {
			k := CountTokens(c.Function.Name) + CountTokens(c.Function.Arguments)
			tokens, n = tokens+k, n+k
			text += "\x00" + c.Function.Name + "\x00" + c.Function.Arguments
			prompt.WriteString(c.Function.Name + "\x00" + c.Function.Arguments + "\x00")
		}
		parts = append(parts, promptPart{text: m.Role + "\x00" + text, tokens: n})
	}
	tool, call, param, err := toolToCall(req)
	if err != nil {
		return nil, invalid(param, "%s", err)
	}
	g := h.plan(idPrefix, prompt.String(), tokens, limit, rule)
	if h.opts.PrefixCache {
		g.prefixCache, g.cachedTokens = true, h.prefixes.serve(h.model, parts)
	}
	if call {
		g.planToolCall(tool, limit)
	}
	return g, nil
}

func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request) *requestError {
	var req chatRequest
	if e := h.read(w, r, &req); e != nil {
		return e
	}
	if e := h.servesModel(req.Model); e != nil {
		return e
	}
	limit, param := req.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = req.MaxTokens, "max_tokens"
	}
	if e := validLimit(param, limit, req.N); e != nil {
		return e
	}
	g, e := h.planChat(req, limit, limitSets, "chatcmpl-")
	if e != nil {
		return e
	}
	g.includeUsage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	var leave func()
	g.latency, leave = h.enter()
	defer leave()

	if !req.Stream {
		text, err := g.whole(r.Context())
		if err != nil {
			return nil // the client is gone
		}
		reply := assistantReply{Role: "assistant", Content: &text}
		if g.call != nil {
			c := *g.call
			c.Function.Arguments = text
			reply = assistantReply{Role: "assistant", ToolCalls: []toolCall{c}}
		}
		return writeJSON(w, http.StatusOK, chatCompletion{
			ID: g.id, Object: "chat.completion", Created: g.created, Model: h.model,
			Choices: []chatChoice{{Message: reply, FinishReason: g.finishReason}},
			Usage:   g.usage(),
		})
	}
	s := h.startStream(w, g, "chat.completion.chunk")
	first := true
	err := g.stream(r.Context(), func(text string) error {
		if g.call != nil {
			if first {
				first = false
				head := toolDeltaChoice{Delta: toolCallDelta{Role: "assistant", Content: jsonNull,
					ToolCalls: []toolCallDeltaItem{{ID: g.call.ID, Type: g.call.Type,
						Function: functionCallDelta{Name: g.call.Function.Name}}}}}
				if err := s.send(head); err != nil {
					return err
				}
			}
			return s.send(toolDeltaChoice{Delta: toolCallDelta{
				ToolCalls: []toolCallDeltaItem{{Function: functionCallDelta{Arguments: text}}}}})
		}
		if first {
			first = false
			if err := s.send(chatDelta{Delta: deltaContent{Role: "assistant", Content: new("")}}); err != nil {
				return err
			}
		}
		return s.send(chatDelta{Delta: deltaContent{Content: &text}})
	})
	if err == nil {
		s.finish(chatDelta{FinishReason: &g.finishReason})
	}
	return nil
}

func (h *Handler) completions(w http.ResponseWriter, r *http.Request) *requestError {
	var req completionRequest
	if e := h.read(w, r, &req); e != nil {
		return e
	}
	if e := h.servesModel(req.Model); e != nil {
		return e
	}
	if e := validLimit("max_tokens", req.MaxTokens, req.N); e != nil {
		return e
	}
	prompts, tokens, err := texts(req.Prompt)
	if err == nil && len(prompts) != 1 {
		err = errors.New("must hold exactly one prompt: this server answers one prompt per request")
	}
	if err != nil {
		return invalid("prompt", "prompt %s", err)
	}
	g := h.plan("cmpl-", prompts[0], tokens[0], req.MaxTokens, limitSets)
	if h.opts.PrefixCache {
		g.prefixCache, g.cachedTokens = true, h.prefixes.serve(h.model, []promptPart{{text: prompts[0], tokens: tokens[0]}})
	}
	g.includeUsage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	var leave func()
	g.latency, leave = h.enter()
	defer leave()

	if !req.Stream {
		text, err := g.whole(r.Context())
		if err != nil {
			return nil
		}
		return writeJSON(w, http.StatusOK, textCompletion{
			ID: g.id, Object: "text_completion", Created: g.created, Model: h.model,
			Choices: []textChoice{{Text: text, FinishReason: &g.finishReason}},
			Usage:   g.usage(),
		})
	}
	s := h.startStream(w, g, "text_completion")
	if err := g.stream(r.Context(), func(text string) error { return s.send(textChoice{Text: text}) }); err == nil {
		s.finish(textChoice{FinishReason: &g.finishReason})
	}
	return nil
}

func (h *Handler) embeddings(w http.ResponseWriter, r *http.Request) *requestError {
	var req embeddingRequest
	if e := h.read(w, r, &req); e != nil {
		return e
	}
	if e := h.servesModel(req.Model); e != nil {
		return e
	}
	inputs, tokens, err := texts(req.Input)
	if err == nil && len(inputs) == 0 {
		err = errors.New("must not be empty")
	}
	if err != nil {
		return invalid("input", "input %s", err)
	}
	dims := defaultEmbeddingDims
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	if dims < 1 || dims > maxEmbeddingDims {
		return invalid("dimensions", "dimensions must be between 1 and %d.", maxEmbeddingDims)
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		return invalid("encoding_format", "encoding_format must be float or base64.")
	}
	// An embedding is a prefill without output: it waits one time to first token.
	latency, leave := h.enter()
	defer leave()
	if sleep(r.Context(), latency.TTFT) != nil {
		return nil
	}
	out := embeddingList{Object: "list", Model: h.model}
	for i, in := range inputs {
		v := embedding(h.opts.Seed, in, dims)
		item := embeddingItem{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 0, 4*len(v))
			for _, x := range v {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
			}
			item.Embedding = base64.StdEncoding.EncodeToString(b)
		}
		out.Data = append(out.Data, item)
		out.Usage.PromptTokens += tokens[i]
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	return writeJSON(w, http.StatusOK, out)
}

func (h *Handler) models(w http.ResponseWriter, r *http.Request) {
	_ = writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{
		{ID: h.model, Object: "model", Created: h.started, OwnedBy: "gpumarket"},
	}})
}

// whole waits the answer's full time, its TTFT and a TPOT per further token, and returns its
// text; it returns early with the context's error when the client goes away.
func (g *generation) whole(ctx context.Context) (string, error) {
	wait := g.latency.TTFT + time.Duration(max(0, g.completionTokens-1))*g.latency.TPOT
	if err := sleep(ctx, wait); err != nil {
		return "", err
	}
	var b strings.Builder
	for range g.completionTokens {
		b.WriteString(g.text.next())
	}
	return b.String(), nil
}

// stream hands the answer's tokens to emit on their schedule: token k is due TTFT + k TPOT
// after the start. Every token due when one is sent goes in the same frame, up to
// maxTokensPerFrame, so that a stream behind its schedule catches up instead of drifting. It
// stops at the first error of emit or of the context.
func (g *generation) stream(ctx context.Context, emit func(text string) error) error {
	start := time.Now()
	due := func(k int) time.Time { return start.Add(g.latency.TTFT + time.Duration(k)*g.latency.TPOT) }
	for k := 0; k < g.completionTokens; {
		if err := sleep(ctx, time.Until(due(k))); err != nil {
			return err
		}
		var b strings.Builder
		now := time.Now()
		for n := 0; n < maxTokensPerFrame && k < g.completionTokens && !due(k).After(now); n++ {
			b.WriteString(g.text.next())
			k++
		}
		if err := emit(b.String()); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d, or less when the context ends first; it returns the context's error then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// eventWriter writes server-sent events, flushing each: a data line, after an event line when
// the event is named, as Anthropic and the Responses API frame their streams (OpenAI's chat
// streams name none).
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startEvents sends the response headers at once, as vLLM does: the status is known before the
// first token.
func startEvents(w http.ResponseWriter) *eventWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	e := &eventWriter{w: w, rc: http.NewResponseController(w)}
	_ = e.rc.Flush()
	return e
}

// send writes v as the data of an event named event ("" for none).
func (e *eventWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write(event, b)
}

// namedEvent is an event to send: its name and its data.
type namedEvent struct {
	name string
	data any
}

// sendAll sends the events in order, stopping at the first that fails.
func (e *eventWriter) sendAll(events ...namedEvent) error {
	for _, ev := range events {
		if err := e.send(ev.name, ev.data); err != nil {
			return err
		}
	}
	return nil
}

func (e *eventWriter) write(event string, data []byte) error {
	var b bytes.Buffer
	b.Grow(len(event) + len(data) + 16)
	if event != "" {
		b.WriteString("event: ")
		b.WriteString(event)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := e.w.Write(b.Bytes()); err != nil {
		return err
	}
	return e.rc.Flush()
}

// sseStream writes a chat or text completion stream in OpenAI's framing: chunks, then [DONE].
type sseStream struct {
	events *eventWriter
	g      *generation
	object string
	model  string
}

func (h *Handler) startStream(w http.ResponseWriter, g *generation, object string) *sseStream {
	return &sseStream{events: startEvents(w), g: g, object: object, model: h.model}
}

// send writes one chunk with one choice.
func (s *sseStream) send(choice any) error {
	c := streamChunk{ID: s.g.id, Object: s.object, Created: s.g.created, Model: s.model, Choices: []any{choice}}
	if s.g.includeUsage {
		c.Usage = jsonNull
	}
	return s.events.send("", c)
}

// finish writes the chunk that carries the finish reason, the usage chunk (no choices) when
// the client asked for it, and the closing [DONE].
func (s *sseStream) finish(choice any) {
	if s.send(choice) != nil {
		return
	}
	if s.g.includeUsage {
		u, _ := json.Marshal(s.g.usage())
		c := streamChunk{ID: s.g.id, Object: s.object, Created: s.g.created, Model: s.model, Choices: []any{}, Usage: u}
		if s.events.send("", c) != nil {
			return
		}
	}
	_ = s.events.write("", []byte("[DONE]"))
}

// writeJSON answers v with the status; it returns the 500 to write instead when v does not
// encode.
func writeJSON(w http.ResponseWriter, status int, v any) *requestError {
	b, err := json.Marshal(v)
	if err != nil {
		return &requestError{status: http.StatusInternalServerError, typ: "server_error", message: "The response could not be encoded."}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}
