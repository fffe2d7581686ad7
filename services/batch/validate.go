package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
)

// Checking a batch's lines before any is sent, as OpenAI does: each line is a JSON object with a
// custom_id unique in the file, method POST, a url that is the batch's endpoint, and a body that
// names a model the catalog offers. Any error fails the whole batch, with every error (up to
// maxLineErrors) named by its line; nothing is sent and nothing charged.

const (
	// maxLineBytes bounds one line: the gateway's own bound on a request body, with room for the
	// custom_id, method and url around it.
	maxLineBytes = 1<<20 + 4<<10
	// maxLineErrors is how many errors a failed batch lists.
	maxLineErrors = 1000
)

// inputLine is one line of a batch's input file.
type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// lineBody is what admission reads of a request body.
type lineBody struct {
	Model               string `json:"model"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	N                   *int64 `json:"n"`
}

// lineRef is where an accepted line is in the input file.
type lineRef struct {
	line     int
	customID string
	offset   int64
	length   int
}

// checked is the outcome of checking a file.
type checked struct {
	lines    []lineRef
	errors   []LineError
	estimate money.Pico // the bound on the cost of every line at the batch price
}

func (c *checked) fail(line int, code, param, format string, args ...any) {
	if len(c.errors) >= maxLineErrors {
		return
	}
	e := LineError{Code: code, Message: fmt.Sprintf(format, args...)}
	if line > 0 {
		e.Line = &line
	}
	if param != "" {
		e.Param = &param
	}
	c.errors = append(c.errors, e)
}

// checkLines reads the file r line by line, never more than one line in memory, and checks each
// for a batch to endpoint. The estimate bounds each line's tokens as the gateway bounds an
// interactive request's (routing.BoundsFor): its body's bytes plus the template allowance for input,
// its max_tokens (or the model's output limit) times its choices for output.
func checkLines(r io.Reader, endpoint string, offered func(string) bool, priceOf func(model string) (catalog.Price, bool)) (*checked, error) {
	c := &checked{}
	seen := map[string]bool{}
	br := bufio.NewReaderSize(r, 64<<10)
	var offset int64
	for n := 1; ; n++ {
		raw, size, tooLong, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if size == 0 && errors.Is(err, io.EOF) {
			break
		}
		start := offset
		offset += int64(size)
		trimmed := bytes.TrimSpace(raw)
		switch {
		case tooLong:
			c.fail(n, "line_too_long", "", "Line %d is longer than %d bytes.", n, maxLineBytes)
		case len(trimmed) == 0:
			// a blank line, at the end of a file most often, is no request
		default:
			c.checkLine(n, trimmed, start, len(raw), endpoint, offered, priceOf, seen)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(c.lines) == 0 && len(c.errors) == 0 {
		c.fail(0, "empty_file", "", "The input file has no requests.")
	}
	return c, nil
}

func (c *checked) checkLine(n int, raw []byte, offset int64, length int, endpoint string, offered func(string) bool,
	priceOf func(model string) (catalog.Price, bool), seen map[string]bool) {
	var in inputLine
	if err := json.Unmarshal(raw, &in); err != nil {
		c.fail(n, "invalid_json_line", "", "Line %d is not a JSON object: %v.", n, err)
		return
	}
	switch {
	case in.CustomID == "":
		c.fail(n, "missing_required_parameter", "custom_id", "Line %d has no custom_id.", n)
		return
	case len(in.CustomID) > 512:
		c.fail(n, "invalid_custom_id", "custom_id", "Line %d has a custom_id longer than 512 characters.", n)
		return
	case seen[in.CustomID]:
		c.fail(n, "duplicate_custom_id", "custom_id", "The custom_id %q of line %d is on an earlier line too; each must be unique.", in.CustomID, n)
		return
	}
	seen[in.CustomID] = true
	if in.Method != "POST" {
		c.fail(n, "invalid_method", "method", "Line %d: the method must be POST.", n)
		return
	}
	if !validEndpoint(in.URL) {
		c.fail(n, "invalid_url", "url", "Line %d: the url must be /v1/chat/completions, /v1/completions or /v1/embeddings.", n)
		return
	}
	if in.URL != endpoint {
		c.fail(n, "mismatched_endpoint", "url", "Line %d: the url %s is not the batch's endpoint %s.", n, in.URL, endpoint)
		return
	}
	var body lineBody
	if len(in.Body) == 0 || json.Unmarshal(in.Body, &body) != nil {
		c.fail(n, "invalid_body", "body", "Line %d: the body must be a JSON object.", n)
		return
	}
	model := body.Model
	if i := strings.LastIndexByte(model, ':'); i >= 0 && catalog.Tier(model[i+1:]).Valid() {
		model = model[:i]
	}
	if model == "" {
		c.fail(n, "missing_required_parameter", "body.model", "Line %d: the body names no model.", n)
		return
	}
	if !offered(model) {
		c.fail(n, "model_not_found", "body.model", "Line %d: the model %s is not offered; GET /v1/models lists those that are.", n, model)
		return
	}
	output := in.URL != "/v1/embeddings"
	limit := body.MaxCompletionTokens
	if limit == nil {
		limit = body.MaxTokens
	}
	choices := int64(1)
	if body.N != nil {
		choices = *body.N
	}
	if (limit != nil && *limit < 0) || choices < 1 || choices > routing.MaxChoices {
		c.fail(n, "invalid_body", "body", "Line %d: max_tokens must be 0 or more and n from 1 to %d.", n, routing.MaxChoices)
		return
	}
	price, ok := priceOf(model)
	if !ok {
		c.fail(n, "model_not_found", "body.model", "Line %d: the model %s has no batch price in force.", n, model)
		return
	}
	b := routing.BoundsFor(model, len(in.Body), limit, choices, output)
	in1, err1 := money.ChargeFor(b.MaxInputTokens, price.Input)
	out1, err2 := money.ChargeFor(b.MaxOutputTokens, price.Output)
	sum, err3 := c.estimate.Add(in1)
	if err1 == nil && err2 == nil && err3 == nil {
		sum, err3 = sum.Add(out1)
	}
	if err1 != nil || err2 != nil || err3 != nil {
		c.fail(n, "invalid_body", "body", "Line %d asks for more tokens than can be priced.", n)
		return
	}
	c.estimate = sum
	c.lines = append(c.lines, lineRef{line: n, customID: in.CustomID, offset: offset, length: length})
}

// readLine reads one line, its newline included in size but not in the bytes returned; a line
// longer than maxLineBytes is read to its end and dropped, reported as tooLong.
func readLine(br *bufio.Reader) (line []byte, size int, tooLong bool, err error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		size += len(frag)
		if !tooLong {
			if len(buf)+len(frag) > maxLineBytes {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(buf, []byte{'\n'}), size, tooLong, err
	}
}
