package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// sample is what one request measured: sent is an offset from the start of the run, the other
// times are durations.
type sample struct {
	wasSent   bool
	ok        bool
	usage     bool // the endpoint reported the tokens; else output counts content chunks
	sent      time.Duration
	lag       time.Duration // how late it was sent after it was due
	ttft      time.Duration // streams only
	tpot      time.Duration // streams of two tokens or more only
	latency   time.Duration
	inTokens  int
	outTokens int
}

// Failure kinds other than an HTTP status, which is its own kind ("500", "429", ...).
const (
	failTimeout    = "timeout"      // the request's own timeout
	failCanceled   = "canceled"     // the run was stopped
	failConnection = "connection"   // no answer: refused, reset, DNS, TLS
	failIncomplete = "incomplete"   // the response broke off or ended a stream without [DONE]
	failNoContent  = "no content"   // a stream that finished without any content
	failStream     = "stream error" // an error event in the stream
	failMalformed  = "malformed"    // a 200 whose body is not the API's JSON
	// An answer that does not say it came from the pinned offering: it is in no figure, since
	// they are the offering's.
	failOtherOffering = "other offering"
)

// offeringHeader names the offering that served an answer of the gateway.
const offeringHeader = "X-GPUMarket-Offering"

// worker sends requests one after the other, reusing its buffers.
type worker struct {
	r     *runner
	buf   bytes.Buffer
	br    *bufio.Reader
	line  []byte
	chunk streamChunk
	whole wholeResponse
	// servedBy is the offering the last answer named (offeringHeader), "" when it named none.
	servedBy string
}

func newWorker(r *runner) *worker {
	return &worker{r: r, br: bufio.NewReaderSize(nil, 4096)}
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type apiError struct {
	Message string `json:"message"`
}

// wholeResponse is what a non-streamed answer is read for: decoding skips the rest without
// allocating it.
type wholeResponse struct {
	Usage *usage `json:"usage"`
}

// streamChunk is one chunk of a chat or text completion stream, as much as is measured of it.
type streamChunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"` // vLLM's reasoning parsers
		} `json:"delta"`
	} `json:"choices"`
	Usage *usage    `json:"usage"`
	Error *apiError `json:"error"`
}

func (c *streamChunk) hasContent() bool {
	for _, ch := range c.Choices {
		if ch.Text != "" || ch.Delta.Content != "" || ch.Delta.ReasoningContent != "" {
			return true
		}
	}
	return false
}

// do sends request i and records its sample, or its failure.
func (w *worker) do(ctx context.Context, i int) {
	r := w.r
	s := &r.samples[i]
	runCtx := ctx
	if r.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.bodies[i%len(r.bodies)]))
	if err != nil {
		r.fail(failConnection, err.Error())
		return
	}
	req.Header = r.header

	s.wasSent, s.sent = true, time.Since(r.start)
	s.lag = s.sent - r.schedule[i]
	r.sent.Add(1)
	if n := r.inFlight.Add(1); n > r.maxInFlight.Load() {
		for m := r.maxInFlight.Load(); n > m && !r.maxInFlight.CompareAndSwap(m, n); m = r.maxInFlight.Load() {
		}
	}
	defer r.inFlight.Add(-1)

	kind, msg := w.exchange(req, s)
	if kind == "" && r.opts.Offering != "" && w.servedBy != r.opts.Offering {
		kind, msg = failOtherOffering, "the gateway answered from offering "+strconv.Quote(w.servedBy)+", not the pinned "+r.opts.Offering
		if w.servedBy == "" {
			kind, msg = failOtherOffering, "the answer does not name the offering that served it ("+offeringHeader+"): is -url the platform's gateway?"
		}
	}
	if kind != "" {
		switch {
		case runCtx.Err() != nil:
			kind = failCanceled
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			kind = failTimeout
		}
		r.fail(kind, msg)
		return
	}
	s.ok = true
	r.completed.Add(1)
}

// exchange sends the request and reads its answer into the sample; on failure it returns the
// failure's kind and a message that explains it.
func (w *worker) exchange(req *http.Request, s *sample) (kind, msg string) {
	resp, err := w.r.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			return failTimeout, err.Error()
		}
		return failConnection, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return strconv.Itoa(resp.StatusCode), errorMessage(resp)
	}
	w.servedBy = resp.Header.Get(offeringHeader)
	if w.r.opts.Stream {
		return w.readStream(resp.Body, s)
	}
	w.buf.Reset()
	if _, err := w.buf.ReadFrom(resp.Body); err != nil {
		return failIncomplete, err.Error()
	}
	s.latency = time.Since(w.r.start) - s.sent
	w.whole.Usage = nil
	if err := json.Unmarshal(w.buf.Bytes(), &w.whole); err != nil {
		return failMalformed, err.Error()
	}
	if u := w.whole.Usage; u != nil {
		s.usage, s.inTokens, s.outTokens = true, u.PromptTokens, u.CompletionTokens
	}
	return "", ""
}

var (
	dataPrefix = []byte("data:")
	doneData   = []byte("[DONE]")
)

// readStream reads server-sent events until [DONE], timing the content chunks, then what follows
// it, so that the connection can serve another request.
func (w *worker) readStream(body io.Reader, s *sample) (kind, msg string) {
	w.br.Reset(body)
	defer w.br.Reset(nil)
	var first, last time.Duration
	chunks := 0
	for {
		line, err := w.readLine()
		if data, ok := bytes.CutPrefix(line, dataPrefix); ok {
			data = bytes.TrimSpace(data)
			if bytes.Equal(data, doneData) {
				s.latency = time.Since(w.r.start) - s.sent
				_, _ = io.Copy(io.Discard, io.LimitReader(w.br, 64<<10))
				break
			}
			// Decoding appends to Choices in place: clear what the last chunk left there.
			clear(w.chunk.Choices[:cap(w.chunk.Choices)])
			w.chunk = streamChunk{Choices: w.chunk.Choices[:0]}
			if err := json.Unmarshal(data, &w.chunk); err != nil {
				return failMalformed, err.Error()
			}
			if w.chunk.Error != nil {
				return failStream, w.chunk.Error.Message
			}
			if w.chunk.hasContent() {
				now := time.Since(w.r.start)
				if chunks == 0 {
					first = now
				}
				last = now
				chunks++
			}
			if u := w.chunk.Usage; u != nil {
				s.usage, s.inTokens, s.outTokens = true, u.PromptTokens, u.CompletionTokens
			}
		}
		if err == io.EOF {
			return failIncomplete, "the stream ended without [DONE]"
		}
		if err != nil {
			return failIncomplete, err.Error()
		}
	}
	if chunks == 0 {
		return failNoContent, "the stream finished without a content chunk"
	}
	if !s.usage {
		s.outTokens = chunks
	}
	s.ttft = first - s.sent
	if s.outTokens > 1 {
		s.tpot = (last - first) / time.Duration(s.outTokens-1)
	}
	return "", ""
}

// readLine returns the next line, newline included, without copying it unless it is longer
// than the reader's buffer. The line is valid until the next call.
func (w *worker) readLine() ([]byte, error) {
	line, err := w.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	w.line = append(w.line[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = w.br.ReadSlice('\n')
		w.line = append(w.line, line...)
	}
	return w.line, err
}

// errorMessage is the message of an error answer: OpenAI's error.message when the body has it,
// else the start of the body.
func errorMessage(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" {
		return resp.Status + ": " + e.Error.Message
	}
	if b = bytes.TrimSpace(b); len(b) > 200 {
		b = b[:200]
	}
	if len(b) == 0 {
		return resp.Status
	}
	return resp.Status + ": " + string(b)
}

// fail counts a failed request under its kind, keeping the first message as an example.
func (r *runner) fail(kind, msg string) {
	r.failed.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failures[kind]
	if f == nil {
		f = &Failure{Kind: kind, Example: msg}
		r.failures[kind] = f
	}
	f.Count++
}
