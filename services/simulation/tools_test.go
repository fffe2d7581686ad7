package simulation_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/simulation"
)

// weatherTools offers two functions: get_weather, with two required properties and an
// optional one, and describe, with every type required and one property without a type.
const weatherTools = `"tools":[
	{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object",
		"properties":{"city":{"type":"string"},"days":{"type":"integer"},"units":{"type":"string","enum":["c","f"]}},
		"required":["city","days"]}}},
	{"type":"function","function":{"name":"describe","parameters":{"type":"object",
		"properties":{"s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},
			"a":{"type":"array","items":{"type":"string"}},"o":{"type":"object"},"maybe":{"type":["null","string"]},"any":{}},
		"required":["s","n","i","b","a","o","maybe","any"]}}},
	{"type":"function","function":{"name":"now"}}]`

var callID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// toolCallOf returns the choice of a whole answer and its single tool call.
func toolCallOf(t *testing.T, m map[string]any) (choice, call map[string]any) {
	t.Helper()
	choices := m["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("%d choices", len(choices))
	}
	choice = choices[0].(map[string]any)
	wantKeys(t, "message", choice["message"], "role", "content", "tool_calls")
	msg := choice["message"].(map[string]any)
	calls := msg["tool_calls"].([]any)
	if msg["role"] != "assistant" || msg["content"] != nil || len(calls) != 1 {
		t.Fatalf("message %v", msg)
	}
	wantKeys(t, "tool call", calls[0], "id", "type", "function")
	call = calls[0].(map[string]any)
	wantKeys(t, "function", call["function"], "name", "arguments")
	if !callID.MatchString(call["id"].(string)) || call["type"] != "function" {
		t.Fatalf("tool call %v", call)
	}
	return choice, call
}

func TestChatWithToolsAnswersOneCallOfTheFirstTool(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	status, b := post(t, url+"/v1/chat/completions", `{"model":"sim-model",`+weatherTools+`,
		"messages":[{"role":"user","content":"Weather in Lyon?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := object(t, b)
	choice, call := toolCallOf(t, m)
	fn := call["function"].(map[string]any)
	const args = `{"city":"example","days":1}`
	if fn["name"] != "get_weather" || fn["arguments"] != args || choice["finish_reason"] != "tool_calls" {
		t.Fatalf("call %v, finish %v", call, choice["finish_reason"])
	}
	// The arguments are the output: { " city " : " example " , " days " : 1 } is 15 tokens.
	// The prompt is "user" 1 + "Weather in Lyon?" 4; the tools do not count.
	prompt, completion, total := usageOf(t, m)
	if simulation.CountTokens(args) != 15 || prompt != 5 || completion != 15 || total != 20 {
		t.Errorf("usage %d+%d=%d, want 5+15=20", prompt, completion, total)
	}
}

func TestToolChoiceNamesTheFunctionAndTypesGivePlaceholders(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	for _, c := range []struct{ choice, name, args string }{
		{`{"type":"function","function":{"name":"describe"}}`, "describe",
			`{"s":"example","n":1,"i":1,"b":true,"a":[],"o":{},"maybe":"example","any":null}`},
		{`{"type":"function","function":{"name":"now"}}`, "now", `{}`},
		{`"required"`, "get_weather", `{"city":"example","days":1}`},
		{`"auto"`, "get_weather", `{"city":"example","days":1}`},
	} {
		status, b := post(t, url+"/v1/chat/completions", `{`+weatherTools+`,"tool_choice":`+c.choice+`,
			"messages":[{"role":"user","content":"Go."}]}`)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.choice, status, b)
		}
		m := object(t, b)
		choice, call := toolCallOf(t, m)
		fn := call["function"].(map[string]any)
		if fn["name"] != c.name || fn["arguments"] != c.args || choice["finish_reason"] != "tool_calls" {
			t.Errorf("%s: call %v, finish %v", c.choice, call, choice["finish_reason"])
		}
		if _, completion, _ := usageOf(t, m); completion != simulation.CountTokens(c.args) {
			t.Errorf("%s: %d completion tokens for %s", c.choice, completion, c.args)
		}
	}
}

func TestToolCallIsCutAtTheTokenLimit(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	status, b := post(t, url+"/v1/chat/completions", `{"max_completion_tokens":7,`+weatherTools+`,
		"messages":[{"role":"user","content":"Weather?"}]}`)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := object(t, b)
	choice, call := toolCallOf(t, m)
	if args := call["function"].(map[string]any)["arguments"]; args != `{"city":"example` || choice["finish_reason"] != "length" {
		t.Fatalf("arguments %v, finish %v", args, choice["finish_reason"])
	}
	if _, completion, _ := usageOf(t, m); completion != 7 {
		t.Errorf("%d completion tokens, want the limit 7", completion)
	}
	// A limit above the arguments' length leaves them whole.
	status, b = post(t, url+"/v1/chat/completions", `{"max_tokens":100,`+weatherTools+`,
		"messages":[{"role":"user","content":"Weather?"}]}`)
	m = object(t, b)
	if choice, _ := toolCallOf(t, m); status != http.StatusOK || choice["finish_reason"] != "tool_calls" {
		t.Fatalf("status %d, finish %v", status, choice["finish_reason"])
	}
	if _, completion, _ := usageOf(t, m); completion != 15 {
		t.Errorf("%d completion tokens, want 15", completion)
	}
}

func TestToolResultsAndNoneAreAnsweredWithText(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	for name, body := range map[string]string{
		"tool_choice none": `{"max_tokens":6,` + weatherTools + `,"tool_choice":"none","messages":[{"role":"user","content":"Hi."}]}`,
		"after a tool result": `{"max_tokens":6,` + weatherTools + `,"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
				"function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\",\"days\":2}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"Sunny, 21 C."}]}`,
		"after a tool result in parts": `{"max_tokens":6,` + weatherTools + `,"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"Sunny."}]}]}`,
	} {
		status, b := post(t, url+"/v1/chat/completions", body)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", name, status, b)
		}
		m := object(t, b)
		c := m["choices"].([]any)[0].(map[string]any)
		wantKeys(t, name+": message", c["message"], "role", "content")
		text, _ := c["message"].(map[string]any)["content"].(string)
		if c["finish_reason"] != "length" || simulation.CountTokens(text) != 6 {
			t.Errorf("%s: %v", name, c)
		}
		prompt, _, _ := usageOf(t, m)
		want := 3 // "user" 1 + "Hi." 2
		switch name {
		case "after a tool result":
			// "user" 1 + "Weather?" 2; "assistant" 1 + "get_weather" 3 + {"city":"Lyon","days":2} 15;
			// "tool" 1 + "Sunny, 21 C." 5.
			want = 3 + 19 + 6
		case "after a tool result in parts":
			want = 3 + 1 + 3 + 2 + 1 + 2 // ... "{}" 2; "tool" 1 + "Sunny." 2
		}
		if prompt != want {
			t.Errorf("%s: %d prompt tokens, want %d", name, prompt, want)
		}
	}
}

func TestToolCallStreamsAsOpenAIDoes(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,
		"stream_options":{"include_usage":true},`+weatherTools+`,"messages":[{"role":"user","content":"Weather in Lyon?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	data := events(t, b)
	// A head, the arguments in pieces (the zero profile's tokens are all due at once: at most 8
	// a frame), the finish.
	chunks := data[:len(data)-2]
	if len(chunks) < 1+2+1 {
		t.Fatalf("%d chunks, want a head, the arguments in pieces and the finish: %q", len(chunks), chunks)
	}
	var args strings.Builder
	var id string
	for i, raw := range chunks {
		c := object(t, []byte(raw))
		choice := c["choices"].([]any)[0].(map[string]any)
		wantKeys(t, "chunk choice", choice, "index", "delta", "logprobs", "finish_reason")
		delta := choice["delta"].(map[string]any)
		switch {
		case i == 0:
			call := delta["tool_calls"].([]any)[0].(map[string]any)
			id, _ = call["id"].(string)
			want := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"index": float64(0), "id": id, "type": "function",
				"function": map[string]any{"name": "get_weather", "arguments": ""}}}}
			if !reflect.DeepEqual(delta, want) || !callID.MatchString(id) || choice["finish_reason"] != nil {
				t.Fatalf("head chunk %v", choice)
			}
		case i == len(chunks)-1:
			if len(delta) != 0 || choice["finish_reason"] != "tool_calls" {
				t.Fatalf("last chunk %v", choice)
			}
		default:
			wantKeys(t, "delta", delta, "tool_calls")
			calls := delta["tool_calls"].([]any)
			if len(calls) != 1 || choice["finish_reason"] != nil {
				t.Fatalf("chunk %d: %v", i, choice)
			}
			wantKeys(t, "piece", calls[0], "index", "function")
			call := calls[0].(map[string]any)
			wantKeys(t, "piece function", call["function"], "arguments")
			piece := call["function"].(map[string]any)["arguments"].(string)
			if n := simulation.CountTokens(piece); call["index"] != float64(0) || n < 1 || n > 8 {
				t.Fatalf("chunk %d carries %q", i, piece)
			}
			args.WriteString(piece)
		}
	}
	if args.String() != `{"city":"example","days":1}` {
		t.Errorf("streamed arguments %q", args.String())
	}
	if p, c, total := usageOf(t, object(t, []byte(data[len(data)-2]))); p != 5 || c != 15 || total != 20 {
		t.Errorf("usage %d+%d=%d, want 5+15=20", p, c, total)
	}

	// Cut by max_tokens: the arguments stop at the limit, finishing for "length".
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"max_tokens":3,`+
		weatherTools+`,"messages":[{"role":"user","content":"Weather in Lyon?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	data = events(t, b)
	var last map[string]any
	if err := json.Unmarshal([]byte(data[len(data)-2]), &last); err != nil || len(data) != 1+1+1+1 {
		t.Fatalf("%d frames: %q", len(data), data)
	}
	if fr := last["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "length" {
		t.Errorf("cut stream finishes for %v", fr)
	}
}

func TestBadToolsAreRefused(t *testing.T) {
	t.Parallel()
	_, url := setup(t, zeroOptions())
	for _, c := range []struct{ body, param string }{
		{`{` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}},"messages":[{"role":"user","content":"x"}]}`, "tool_choice"},
		{`{` + weatherTools + `,"tool_choice":"sometimes","messages":[{"role":"user","content":"x"}]}`, "tool_choice"},
		{`{"tool_choice":"required","messages":[{"role":"user","content":"x"}]}`, "tool_choice"},
		{`{"tools":[{"type":"custom","custom":{"name":"x"}}],"messages":[{"role":"user","content":"x"}]}`, "tools[0]"},
		{`{"tools":[{"type":"function","function":{}}],"messages":[{"role":"user","content":"x"}]}`, "tools[0]"},
	} {
		status, b := post(t, url+"/v1/chat/completions", c.body)
		e, _ := object(t, b)["error"].(map[string]any)
		if status != http.StatusBadRequest || e == nil || e["param"] != c.param || e["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %s, want 400 on %s", c.body, status, b, c.param)
		}
	}
}
