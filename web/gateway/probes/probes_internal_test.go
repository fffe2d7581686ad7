package probes

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
)

// TestAProbesAnswerMustBeTheListedModelsStream: a qualifying probe passes only on a whole OpenAI stream of chat
// completion chunks naming the listed model, with a token, the usage and the end marker.
func TestAProbesAnswerMustBeTheListedModelsStream(t *testing.T) {
	chunk := func(object, model string) string {
		return `data: {"id":"c1","object":"` + object + `","model":"` + model + `","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n"
	}
	usage := `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1}}` + "\n\n"
	done := "data: [DONE]\n\n"
	now, tokens := time.Now(), &admission.TokenCount{Input: 9, Output: 1}
	for _, c := range []struct {
		name       string
		stream     string
		firstToken time.Time
		usage      *admission.TokenCount
		want       string
	}{
		{"valid", ": keep-alive\n\n" + chunk("chat.completion.chunk", "m") + usage + done, now, tokens, ""},
		{"valid with CRLF", "data: {\"object\":\"chat.completion.chunk\",\"model\":\"m\"}\r\n\r\n" + usage + "data: [DONE]\r\n\r\n", now, tokens, ""},
		{"another model", chunk("chat.completion.chunk", "other") + usage + done, now, tokens,
			`its answer named the model "other", not the listed "m"`},
		{"not a chunk", chunk("text_completion", "m") + usage + done, now, tokens,
			`its answer is not an OpenAI stream: a chunk is a "text_completion", not a chat.completion.chunk`},
		{"not JSON", "data: hello\n\n" + done, now, tokens, "its answer is not an OpenAI stream: a line is not a data line of JSON"},
		{"no end", chunk("chat.completion.chunk", "m") + usage, now, tokens, "its answer ended without data: [DONE]"},
		{"after the end", chunk("chat.completion.chunk", "m") + done + usage, now, tokens, "its answer went on after data: [DONE]"},
		{"no token", usage + done, time.Time{}, tokens, "its answer carried no token"},
		{"no usage", chunk("chat.completion.chunk", "m") + done, now, nil,
			"its answer carried no usage chunk with the tokens it produced"},
	} {
		if got := Problem([]byte(c.stream), "m", c.firstToken, c.usage); got != c.want {
			t.Errorf("%s: Problem = %q, want %q", c.name, got, c.want)
		}
	}
}
