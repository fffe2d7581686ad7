package simulation_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func responsesService(url string) responses.ResponseService {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("x"), option.WithMaxRetries(0)).Responses
}

// streamResponse streams a Responses request and returns the final Response (of
// response.completed or response.incomplete), the events' types in order, and what the deltas
// said: the text's, or the call's arguments'.
func streamResponse(t *testing.T, svc responses.ResponseService, params responses.ResponseNewParams) (responses.Response, []string, string) {
	t.Helper()
	stream := svc.NewStreaming(context.Background(), params)
	var final responses.Response
	var types []string
	var deltas strings.Builder
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Fatalf("event %d (%s) numbered %d", len(types), ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta", "response.function_call_arguments.delta":
			deltas.WriteString(ev.Delta)
		case "response.output_text.done":
			if ev.Text != deltas.String() {
				t.Fatalf("output_text.done %q after deltas %q", ev.Text, deltas.String())
			}
		case "response.function_call_arguments.done":
			if ev.Arguments != deltas.String() {
				t.Fatalf("function_call_arguments.done %q after deltas %q", ev.Arguments, deltas.String())
			}
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return final, types, deltas.String()
}

// wantResponseEvents checks a Responses stream's events around its deltas, of the delta type.
func wantResponseEvents(t *testing.T, types []string, delta string, head, tail []string) {
	t.Helper()
	n := len(types)
	if n < len(head)+1+len(tail) || !equalStrings(types[:len(head)], head) || !equalStrings(types[n-len(tail):], tail) {
		t.Fatalf("events %v", types)
	}
	for _, typ := range types[len(head) : n-len(tail)] {
		if typ != delta {
			t.Fatalf("events %v", types)
		}
	}
}

func equalStrings(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

var (
	respID      = regexp.MustCompile(`^resp_[A-Z2-7]{26}$`)
	outputMsgID = regexp.MustCompile(`^msg_[0-9a-f]{32}$`)
	fcID        = regexp.MustCompile(`^fc_[0-9a-f]{32}$`)
)

// A Responses request gets what chat completions answer the same conversation: the same text and
// the same usage (input_tokens the prompt's). max_output_tokens cuts the answer when it is below
// the drawn length ("incomplete", the chat answer with that limit); without it the answer ends
// ("completed", the chat answer without a limit). Streamed, the events build the same Response.
func TestResponsesAnswerAsChatCompletionsDo(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	svc := responsesService(url)
	chatBody := `{"model":"sim-model",%s"messages":[{"role":"system","content":"Be brief."},
		{"role":"user","content":"Which GPU is serving me?"},{"role":"assistant","content":"An H100."},
		{"role":"system","content":"Mind the units."},{"role":"user","content":"And how fast is it?"}]}`
	params := responses.ResponseNewParams{Model: "sim-model", Instructions: openai.String("Be brief."), Store: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Which GPU is serving me?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{
				{OfOutputText: &responses.ResponseOutputTextParam{Text: "An H100."}}}, "msg_1", responses.ResponseOutputMessageStatusCompleted),
			responses.ResponseInputItemParamOfMessage("Mind the units.", responses.EasyInputMessageRoleDeveloper),
			responses.ResponseInputItemParamOfMessage("And how fast is it?", responses.EasyInputMessageRoleUser)}}}

	for _, c := range []struct {
		name      string
		limit     *int64
		chatLimit string
		status    responses.ResponseStatus
	}{
		{"cut", new(int64(7)), `"max_tokens":7,`, responses.ResponseStatusIncomplete},
		{"whole", nil, ``, responses.ResponseStatusCompleted},
	} {
		want := askChat(t, url, strings.Replace(chatBody, "%s", c.chatLimit, 1))
		params := params
		if c.limit != nil {
			params.MaxOutputTokens = openai.Int(*c.limit)
		}
		r, err := svc.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if !respID.MatchString(r.ID) || r.Object != "response" || r.Model != "sim-model" || r.Status != c.status ||
			!strings.Contains(r.RawJSON(), `"store":false`) || r.Instructions.OfString != "Be brief." || r.CreatedAt != 1767225600 || len(r.Output) != 1 {
			t.Fatalf("%s: response %s", c.name, r.RawJSON())
		}
		item := r.Output[0].AsMessage()
		if item.Type != "message" || !outputMsgID.MatchString(item.ID) || item.Role != "assistant" || len(item.Content) != 1 ||
			item.Content[0].Type != "output_text" || item.Content[0].Text != want.text || want.text == "" {
			t.Errorf("%s: output %s; chat's text %q", c.name, r.Output[0].RawJSON(), want.text)
		}
		if c.status == responses.ResponseStatusIncomplete &&
			(r.IncompleteDetails.Reason != "max_output_tokens" || item.Status != "incomplete" || r.MaxOutputTokens != 7) {
			t.Errorf("cut: %s", r.RawJSON())
		}
		if c.status == responses.ResponseStatusCompleted && (r.IncompleteDetails.Reason != "" || item.Status != "completed") {
			t.Errorf("whole: %s", r.RawJSON())
		}
		u := r.Usage
		if u.InputTokens != int64(want.prompt) || u.OutputTokens != int64(want.completion) || u.TotalTokens != u.InputTokens+u.OutputTokens ||
			u.InputTokensDetails.CachedTokens != 0 || u.OutputTokensDetails.ReasoningTokens != 0 {
			t.Errorf("%s: usage %s, chat's %+v", c.name, u.RawJSON(), want)
		}

		final, types, text := streamResponse(t, svc, params)
		last := "response.completed"
		if c.status == responses.ResponseStatusIncomplete {
			last = "response.incomplete"
		}
		wantResponseEvents(t, types, "response.output_text.delta",
			[]string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"},
			[]string{"response.output_text.done", "response.content_part.done", "response.output_item.done", last})
		if text != want.text || final.OutputText() != want.text || final.Status != c.status || !respID.MatchString(final.ID) ||
			final.Usage.InputTokens != u.InputTokens || final.Usage.OutputTokens != u.OutputTokens {
			t.Errorf("%s: streamed %q, response %s", c.name, text, final.RawJSON())
		}
	}
}

// The prefix cache is the chat path's: input_tokens include the cached tokens, which
// input_tokens_details tells, as chat completions tell them for the same conversation.
func TestResponsesReportCachedTokensWithin(t *testing.T) {
	t.Parallel()
	opts := nativeOptions()
	opts.PrefixCache = true
	_, url := setup(t, opts)
	svc := responsesService(url)
	system := strings.Repeat("You answer questions about GPU rentals briefly and exactly. ", 8)
	params := responses.ResponseNewParams{Model: "sim-model", Instructions: openai.String(system), MaxOutputTokens: openai.Int(4),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What does an hour of an RTX 4090 cost?")}}
	one, err := svc.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if one.Usage.InputTokensDetails.CachedTokens != 0 || one.Usage.InputTokens < 64 {
		t.Fatalf("first request: %s", one.Usage.RawJSON())
	}
	chat := askChat(t, url, `{"model":"sim-model","max_tokens":4,"messages":[{"role":"system","content":"`+system+`"},
		{"role":"user","content":"What does an hour of an RTX 4090 cost?"}]}`)
	if chat.prompt != int(one.Usage.InputTokens) || chat.cachedToks != (chat.prompt-1)/16*16 {
		t.Fatalf("chat %+v after a response of %d input tokens", chat, one.Usage.InputTokens)
	}
	again, err := svc.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if again.Usage.InputTokens != one.Usage.InputTokens || again.Usage.InputTokensDetails.CachedTokens != int64(chat.cachedToks) {
		t.Fatalf("the same prompt again: %s, chat's %+v", again.Usage.RawJSON(), chat)
	}
}

// weatherFunctions are the tools of weatherParams as Responses function tools.
func weatherFunctions() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{
		{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Strict: openai.Bool(false), Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
			"required": []string{"city", "days"}}}},
		{OfFunction: &responses.FunctionToolParam{Name: "describe", Strict: openai.Bool(false), Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"s": map[string]any{"type": "string"}, "b": map[string]any{"type": "boolean"}},
			"required": []string{"s", "b"}}}},
	}
}

// Tools given with a tool_choice that forces a call get one function_call, as chat completions
// make it: the placeholder arguments, their tokens the output; streamed, the arguments come as
// deltas. The call's output sent back with it is answered with text, counted as chat completions
// count the same conversation.
func TestResponsesCallAFunctionWhenToolChoiceForcesOne(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	svc := responsesService(url)
	question := responses.ResponseInputItemParamOfMessage("Describe Lyon.", responses.EasyInputMessageRoleUser)
	params := responses.ResponseNewParams{Model: "sim-model", Tools: weatherFunctions(),
		Input:      responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question}},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "describe"}}}
	r, err := svc.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	call := r.Output[0].AsFunctionCall()
	if r.Status != responses.ResponseStatusCompleted || len(r.Output) != 1 || call.Type != "function_call" || !fcID.MatchString(call.ID) ||
		!callID.MatchString(call.CallID) || call.Name != "describe" || call.Arguments != `{"s":"example","b":true}` || call.Status != "completed" ||
		len(r.Tools) != 2 || r.Tools[1].Name != "describe" {
		t.Fatalf("response %s", r.RawJSON())
	}
	chatCall := askChat(t, url, `{"model":"sim-model","tools":[{"type":"function","function":{"name":"describe","parameters":
		{"type":"object","properties":{"s":{"type":"string"},"b":{"type":"boolean"}},"required":["s","b"]}}}],
		"messages":[{"role":"user","content":"Describe Lyon."}]}`)
	if r.Usage.InputTokens != int64(chatCall.prompt) || r.Usage.OutputTokens != int64(chatCall.completion) || chatCall.text != call.Arguments {
		t.Errorf("usage %s, chat's %+v", r.Usage.RawJSON(), chatCall)
	}

	// "required" calls the first function; streamed, its arguments arrive as deltas.
	params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}
	final, types, args := streamResponse(t, svc, params)
	wantResponseEvents(t, types, "response.function_call_arguments.delta",
		[]string{"response.created", "response.in_progress", "response.output_item.added"},
		[]string{"response.function_call_arguments.done", "response.output_item.done", "response.completed"})
	if args != `{"city":"example","days":1}` || len(final.Output) != 1 || final.Output[0].AsFunctionCall().Arguments != args ||
		final.Output[0].AsFunctionCall().Name != "get_weather" || final.Usage.OutputTokens != 15 {
		t.Fatalf("streamed call %q: %s", args, final.RawJSON())
	}

	// Cut by max_output_tokens: incomplete, the arguments cut short.
	params.MaxOutputTokens = openai.Int(4)
	cut, err := svc.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if cut.Status != responses.ResponseStatusIncomplete || cut.IncompleteDetails.Reason != "max_output_tokens" ||
		cut.Output[0].AsFunctionCall().Arguments != `{"city"` || cut.Output[0].AsFunctionCall().Status != "incomplete" {
		t.Fatalf("cut call %s", cut.RawJSON())
	}

	// The call and its output go back: the answer is text, counted as on chat completions.
	callParam := call.ToParam()
	params = responses.ResponseNewParams{Model: "sim-model", Tools: weatherFunctions(), MaxOutputTokens: openai.Int(6),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question,
			{OfFunctionCall: &callParam},
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("A city on the Rhône.")}}}}}}
	answer, err := svc.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	chatAnswer := askChat(t, url, `{"model":"sim-model","max_tokens":6,"tools":[{"type":"function","function":{"name":"describe"}}],
		"messages":[{"role":"user","content":"Describe Lyon."},
		{"role":"assistant","tool_calls":[{"id":"`+call.CallID+`","type":"function","function":{"name":"describe","arguments":"{\"s\":\"example\",\"b\":true}"}}]},
		{"role":"tool","tool_call_id":"`+call.CallID+`","content":"A city on the Rhône."}]}`)
	if len(answer.Output) != 1 || answer.Output[0].Type != "message" || answer.OutputText() != chatAnswer.text ||
		answer.Usage.InputTokens != int64(chatAnswer.prompt) || answer.Usage.OutputTokens != 6 {
		t.Fatalf("answer to the call's output %s; chat's %+v", answer.RawJSON(), chatAnswer)
	}
}

// Refusals come in OpenAI's error shape; previous_response_id is one, since nothing is stored.
func TestResponsesErrorsHaveOpenAIShape(t *testing.T) {
	t.Parallel()
	_, url := setup(t, nativeOptions())
	for _, c := range []struct {
		name, body, param string
		status            int
	}{
		{"previous_response_id", `{"model":"sim-model","input":"Go on.","previous_response_id":"resp_earlier"}`, "previous_response_id", 400},
		{"no input", `{"model":"sim-model"}`, "input", 400},
		{"an empty list", `{"model":"sim-model","input":[]}`, "input", 400},
		{"an image", `{"model":"sim-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
			"input[0].content[0].type", 400},
		{"an item_reference", `{"model":"sim-model","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", 400},
		{"a hosted tool", `{"model":"sim-model","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0]", 400},
		{"a function not offered", `{"model":"sim-model","input":"hi","tools":[{"type":"function","name":"a"}],
			"tool_choice":{"type":"function","name":"b"}}`, "tool_choice", 400},
		{"max_output_tokens 0", `{"model":"sim-model","input":"hi","max_output_tokens":0}`, "max_output_tokens", 400},
		{"another model", `{"model":"gpt-9","input":"hi"}`, "model", 404},
	} {
		status, b := post(t, url+"/v1/responses", c.body)
		if status != c.status {
			t.Errorf("%s: status %d: %s", c.name, status, b)
			continue
		}
		m := object(t, b)
		wantKeys(t, c.name, m, "error")
		wantKeys(t, c.name+": error", m["error"], "message", "type", "param", "code")
		if e := m["error"].(map[string]any); e["param"] != c.param || e["type"] != "invalid_request_error" || e["message"] == "" {
			t.Errorf("%s: %s", c.name, b)
		}
	}

	// The SDK reads them as OpenAI's errors.
	svc := responsesService(url)
	_, err := svc.New(context.Background(), responses.ResponseNewParams{Model: "sim-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Go on.")}, PreviousResponseID: openai.String("resp_earlier")})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "previous_response_id" {
		t.Fatalf("error %v", err)
	}
}
