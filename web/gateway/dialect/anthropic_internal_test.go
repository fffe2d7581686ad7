package dialect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v: %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the wanted JSON: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func TestAnthropicRequestTranslatesToAChatCompletion(t *testing.T) {
	body := `{"model":"m:batch","max_tokens":64,"stream":true,"temperature":0.5,"top_p":0.9,"top_k":40,
		"stop_sequences":["END"],"metadata":{"user_id":"u1"},"thinking":{"type":"disabled"},
		"gpumarket":{"prefer":"carbon"},"provider":{"order":["x"]},
		"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],
		"tools":[{"name":"get_weather","description":"The weather.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
			{"type":"custom","name":"now","input_schema":{"type":"object"}}],
		"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
		"messages":[
			{"role":"user","content":"Weather in Lyon?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Let me look."},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{ "city" : "Lyon" }}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Sunny."},
				{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"is_error":true},
				{"type":"text","text":"And tomorrow?"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"now","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3"}]}]}`
	got, err := Anthropic{}.ToChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "chat body", got, `{"model":"m:batch","max_tokens":64,"stream":true,"temperature":0.5,"top_p":0.9,"top_k":40,
		"stop":["END"],"gpumarket":{"prefer":"carbon"},"provider":{"order":["x"]},
		"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather.",
				"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
			{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,
		"messages":[
			{"role":"system","content":"Be brief.\nUse tools."},
			{"role":"user","content":"Weather in Lyon?"},
			{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"toolu_1","type":"function",
				"function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},
			{"role":"tool","tool_call_id":"toolu_1","content":"Sunny."},
			{"role":"tool","tool_call_id":"toolu_2","content":"a\nb"},
			{"role":"user","content":"And tomorrow?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_3","type":"function","function":{"name":"now","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"toolu_3","content":""}]}`)

	for choice, want := range map[string]string{
		`{"type":"auto"}`: `"auto"`, `{"type":"any"}`: `"required"`, `{"type":"none"}`: `"none"`,
	} {
		got, err := Anthropic{}.ToChat([]byte(`{"model":"m","max_tokens":1,"tool_choice":` + choice +
			`,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, choice, got, `{"model":"m","max_tokens":1,"tool_choice":`+want+`,"messages":[{"role":"user","content":"a\nb"}]}`)
	}
}

func TestAnthropicRequestsTheGatewayRefuses(t *testing.T) {
	for body, want := range map[string]string{
		`[]`: "not a JSON object",
		`{"model":"m","messages":[{"role":"user","content":"x"}]}`:                                                                                    "max_tokens: Field required",
		`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`:                                                                     "max_tokens: must be",
		`{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`:                                                                                 "model: Field required",
		`{"model":"m","max_tokens":5,"messages":[]}`:                                                                                                  "at least one message",
		`{"model":"m","max_tokens":5,"frequency_penalty":1,"messages":[{"role":"user","content":"x"}]}`:                                               "frequency_penalty: Extra inputs are not permitted",
		`{"model":"m","max_tokens":5,"mcp_servers":[],"messages":[{"role":"user","content":"x"}]}`:                                                    "mcp_servers: not supported",
		`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`:                                                                   "messages.0.role",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`:                                          "messages.0.content.0: image blocks are not supported",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}]}`: "messages.0.content.0.content.0: image blocks",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}]}`:                    "messages.0.content.0: content blocks of type \"tool_use\"",
		`{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`:        "tools.0: the server tool",
		`{"model":"m","max_tokens":5,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"x"}]}`:                                              "tools.0.input_schema: Field required",
		`{"model":"m","max_tokens":5,"tool_choice":{"type":"some"},"messages":[{"role":"user","content":"x"}]}`:                                       "tool_choice.type",
		`{"model":"m","max_tokens":5,"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":"x"}]}`:                                       "tool_choice.name: Field required",
		`{"model":"m","max_tokens":5,"system":5,"messages":[{"role":"user","content":"x"}]}`:                                                          "system: must be a string",
	} {
		_, err := Anthropic{}.ToChat([]byte(body))
		var ge *wire.Error
		if !errors.As(err, &ge) || ge.Status != http.StatusBadRequest || !strings.Contains(ge.Message, want) {
			t.Errorf("%s: %v, want a 400 saying %q", body, err, want)
		}
	}
}

func TestAnthropicAnswerTranslatesAChatCompletion(t *testing.T) {
	tr := &Translation{RequestID: "req_0123", Model: "m", Created: time.Unix(1767225600, 0)}
	cases := []struct{ chat, want string }{
		{`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},
			"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
			`{"id":"msg_0123","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hello there."}],
			"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":9,"output_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`},
		// vLLM names the stop string that ended the answer; the prompt's cached tokens are counted apart.
		{`{"choices":[{"message":{"content":"Up to"},"finish_reason":"stop","stop_reason":"END"}],
			"usage":{"prompt_tokens":100,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":64}}}`,
			`{"id":"msg_0123","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Up to"}],
			"stop_reason":"stop_sequence","stop_sequence":"END",
			"usage":{"input_tokens":36,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":64}}`},
		{`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_ab","type":"function",
			"function":{"name":"get_weather","arguments":"{\"city\":\"example\"}"}}]},"finish_reason":"tool_calls"}],
			"usage":{"prompt_tokens":5,"completion_tokens":9}}`,
			`{"id":"msg_0123","type":"message","role":"assistant","model":"m",
			"content":[{"type":"tool_use","id":"call_ab","name":"get_weather","input":{"city":"example"}}],
			"stop_reason":"tool_use","stop_sequence":null,
			"usage":{"input_tokens":5,"output_tokens":9,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`},
		// Arguments cut by the token limit are not an object: the input is {}.
		{`{"choices":[{"message":{"content":"","tool_calls":[{"id":"call_cd","function":{"name":"f","arguments":"{\"city\":\"ex"}}]},
			"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":6}}`,
			`{"id":"msg_0123","type":"message","role":"assistant","model":"m",
			"content":[{"type":"tool_use","id":"call_cd","name":"f","input":{}}],"stop_reason":"max_tokens","stop_sequence":null,
			"usage":{"input_tokens":5,"output_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`},
	}
	for _, c := range cases {
		got, err := Anthropic{}.Answer([]byte(c.chat), tr)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "answer", got, c.want)
		var m anthropic.Message
		if err := json.Unmarshal(got, &m); err != nil || m.ID != "msg_0123" || len(m.Content) != 1 {
			t.Fatalf("the SDK reads %+v, %v", m, err)
		}
	}
	if _, err := (Anthropic{}).Answer([]byte(`{"choices":[]}`), tr); err == nil {
		t.Error("a chat completion without a choice translated")
	}
}

// sseEvents splits the frames a translator wrote into (event, data) pairs, checking each is one event line and one
// data line.
func sseEvents(t *testing.T, out []byte) (names []string, data [][]byte) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i := 0; i+2 < len(lines)+1; i += 3 {
		name, ok1 := strings.CutPrefix(lines[i], "event: ")
		payload, ok2 := strings.CutPrefix(lines[i+1], "data: ")
		if !ok1 || !ok2 || (i+2 < len(lines) && lines[i+2] != "") {
			t.Fatalf("frame at line %d is not an event and a data line: %q", i, lines[i:])
		}
		var typed struct{ Type string }
		if json.Unmarshal([]byte(payload), &typed) != nil || typed.Type != name {
			t.Fatalf("event %s carries %s", name, payload)
		}
		names, data = append(names, name), append(data, []byte(payload))
	}
	return names, data
}

// translateStream runs chat chunks through the stream translator and accumulates the events as the SDK does.
func translateStream(t *testing.T, chunks ...string) ([]string, anthropic.Message) {
	t.Helper()
	tr := Anthropic{}.Stream(&Translation{RequestID: "req_77", Model: "m"})
	var out []byte
	for _, c := range chunks {
		b, err := tr.Chunk([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	out = append(out, tr.End()...)
	names, data := sseEvents(t, out)
	var msg anthropic.Message
	for i, d := range data {
		var ev anthropic.MessageStreamEventUnion
		if err := json.Unmarshal(d, &ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("event %d %s: %v", i, d, err)
		}
	}
	return names, msg
}

func TestAnthropicStreamOfText(t *testing.T) {
	names, msg := translateStream(t,
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}],"usage":null}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}],"usage":null}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}`,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`)
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if !slicesEqual(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if msg.ID != "msg_77" || msg.Model != "m" || len(msg.Content) != 1 || msg.Content[0].Text != "Hello there" ||
		msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.InputTokens != 7 || msg.Usage.OutputTokens != 2 {
		t.Fatalf("accumulated %+v", msg)
	}
}

func TestAnthropicStreamOfTextThenToolCalls(t *testing.T) {
	names, msg := translateStream(t,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Looking."}}]}`,
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"example\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":4}}}`)
	want := []string{"message_start",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if !slicesEqual(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if len(msg.Content) != 3 || msg.Content[0].Text != "Looking." || msg.Content[1].Type != "tool_use" ||
		msg.Content[1].ID != "call_1" || msg.Content[1].Name != "get_weather" || string(msg.Content[1].Input) != `{"city":"example"}` ||
		msg.Content[2].Name != "now" || string(msg.Content[2].Input) != `{}` {
		t.Fatalf("accumulated content %+v", msg.Content)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Usage.InputTokens != 7 || msg.Usage.CacheReadInputTokens != 4 ||
		msg.Usage.OutputTokens != 12 {
		t.Fatalf("stop %q, usage %+v", msg.StopReason, msg.Usage)
	}
}

func TestAnthropicStreamEndsWhenNothingCame(t *testing.T) {
	names, msg := translateStream(t)
	if !slicesEqual(names, []string{"message_start", "message_delta", "message_stop"}) || len(msg.Content) != 0 ||
		msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("events %v, message %+v", names, msg)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestAnthropicErrorsHaveAnthropicsShape(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
		403: "permission_error", 404: "not_found_error", 409: "invalid_request_error", 413: "request_too_large",
		429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "timeout_error"} {
		got := Anthropic{}.ErrorBody(&wire.Error{Status: status, Type: "server_error", Code: "x", Message: "Why."})
		sameJSON(t, http.StatusText(status), got, `{"type":"error","error":{"type":"`+typ+`","message":"Why."}}`)
	}
}
