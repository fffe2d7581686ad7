package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestResponsesAPI is the OpenAI Responses API end to end (docs/gateway.md, "OpenAI Responses"): the official Go
// SDK's client.Responses calls the gateway, which translates them into chat completions served by simulated rigs
// over NATS; each answer is billed once, at its usage, and owes the provider its asks.
func TestResponsesAPI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	t.Run("a whole response and a streamed one, each billed once at the usage they report", b.testResponsesBilledOnce)
	t.Run("a function call and its output, over two stateless requests", b.testResponsesToolCall)
	t.Run("previous_response_id and hosted tools are refused, unbilled", b.testResponsesRefused)
}

// billedOnce checks a response's request: metered once at the usage it reported, in the offering's standard tier,
// at the cost its usage told, owing the provider its asks; it returns the charge.
func (b *gatewayBundle) billedOnce(t *testing.T, res *http.Response, o catalog.Offering, r responses.Response) (string, money.Pico) {
	t.Helper()
	u := r.Usage
	id, offering, tier := headersOf(t, res)
	if offering != o.ID || tier != "standard" {
		t.Fatalf("served by %s in %s, want %s in standard", offering, tier, o.ID)
	}
	m := b.metered(t, id)
	if m.offering != o.ID || m.tier != "standard" || m.status != "ok" {
		t.Fatalf("%s metered as %+v", id, m)
	}
	if m.input != u.InputTokens || m.output != u.OutputTokens || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Fatalf("%s: the response said %d in, %d out (%d in all); the meter billed %d in, %d out", id, u.InputTokens, u.OutputTokens,
			u.TotalTokens, m.input, m.output)
	}
	if want := b.price(t, "standard", m.input, m.output); m.charge != want || m.charge == 0 {
		t.Fatalf("%s charged %s, want %s", id, m.charge, want)
	}
	if told := costIn(t, r.RawJSON()); told != m.charge {
		t.Fatalf("%s: the response says it cost %s; the meter charged %s", id, told, m.charge)
	}
	b.owedOnce(t, id, o, m)
	return id, m.charge
}

func (b *gatewayBundle) testResponsesBilledOnce(t *testing.T) {
	o := b.list(t, rigSpec{model: "resp-billed", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "resp-billed", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	start := b.balance(t, dev.AccountID)

	// Whole, without a limit: the rig's answer ends on its own, and the response is completed.
	var res *http.Response
	r, err := client.Responses.New(b.ctx, responses.ResponseNewParams{Model: "resp-billed",
		Instructions: openai.String("Answer briefly."), Metadata: shared.Metadata{"case": "whole"},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Which GPU is serving me?")}},
		option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	id, paidWhole := b.billedOnce(t, res, o, *r)
	if r.ID != "resp_"+strings.TrimPrefix(id, "req_") || r.Object != "response" || r.Status != responses.ResponseStatusCompleted ||
		r.Model != "resp-billed" || r.OutputText() == "" || r.Instructions.OfString != "Answer briefly." || r.Metadata["case"] != "whole" ||
		len(r.Output) != 1 || r.Output[0].Type != "message" || r.Usage.OutputTokens <= 0 {
		t.Fatalf("the response: %s", r.RawJSON())
	}

	// Streamed, cut short by max_output_tokens: response.incomplete ends it, with the usage.
	stream := client.Responses.NewStreaming(b.ctx, responses.ResponseNewParams{Model: "resp-billed", MaxOutputTokens: openai.Int(12),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Which GPU is serving me?", responses.EasyInputMessageRoleUser)}}},
		option.WithResponseInto(&res))
	var types []string
	var text strings.Builder
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Fatalf("event %d numbered %d", len(types), ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.incomplete", "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 10 || types[0] != "response.created" || types[1] != "response.in_progress" ||
		types[2] != "response.output_item.added" || types[3] != "response.content_part.added" ||
		types[len(types)-1] != "response.incomplete" {
		t.Fatalf("events %v", types)
	}
	if final.Status != responses.ResponseStatusIncomplete || final.IncompleteDetails.Reason != "max_output_tokens" ||
		final.OutputText() != text.String() || text.Len() == 0 || final.Usage.OutputTokens != 12 || final.MaxOutputTokens != 12 {
		t.Fatalf("the streamed response (text %q): %s", text.String(), final.RawJSON())
	}
	streamID, paidStream := b.billedOnce(t, res, o, final)
	if final.ID != "resp_"+strings.TrimPrefix(streamID, "req_") {
		t.Fatalf("the streamed response %s of request %s", final.ID, streamID)
	}
	if got := b.balance(t, dev.AccountID); got != start-paidWhole-paidStream {
		t.Fatalf("balance %s after responses costing %s and %s; want %s", got, paidWhole, paidStream, start-paidWhole-paidStream)
	}
}

// weatherTool is a function tool with two required parameters.
func weatherTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "weather", Strict: openai.Bool(true),
		Description: openai.String("The forecast for a city."),
		Parameters: map[string]any{"type": "object", "additionalProperties": false, "required": []string{"city", "days"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}}}
}

// The simulated backend answers a request with tools (and a tool choice other than none) whose last message is
// not a tool's with one call of the chosen tool, else of the first, its required parameters given placeholders;
// after a tool's result, text.
func (b *gatewayBundle) testResponsesToolCall(t *testing.T) {
	o := b.list(t, rigSpec{model: "resp-tools", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "resp-tools", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	start := b.balance(t, dev.AccountID)
	question := responses.ResponseInputItemParamOfMessage("What will the weather be in Paris?", responses.EasyInputMessageRoleUser)
	wantArgs := map[string]any{"city": "example", "days": float64(1)}

	var res *http.Response
	r, err := client.Responses.New(b.ctx, responses.ResponseNewParams{Model: "resp-tools", Store: openai.Bool(false),
		Input:      responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question}},
		Tools:      []responses.ToolUnionParam{weatherTool()},
		ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}},
		option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	_, paidCall := b.billedOnce(t, res, o, *r)
	if r.Status != responses.ResponseStatusCompleted || len(r.Output) != 1 || r.Output[0].Type != "function_call" ||
		len(r.Tools) != 1 || r.Tools[0].Name != "weather" {
		t.Fatalf("the response: %s", r.RawJSON())
	}
	call := r.Output[0].AsFunctionCall()
	var args map[string]any
	if !strings.HasPrefix(call.CallID, "call_") || call.Name != "weather" || json.Unmarshal([]byte(call.Arguments), &args) != nil ||
		!reflect.DeepEqual(args, wantArgs) {
		t.Fatalf("the function call: %s", r.Output[0].RawJSON())
	}

	// The client runs the tool and sends the conversation back whole, with the call and its output: the answer is
	// text. It streams.
	callParam := call.ToParam()
	stream := client.Responses.NewStreaming(b.ctx, responses.ResponseNewParams{Model: "resp-tools",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question,
			{OfFunctionCall: &callParam},
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(`{"forecast":"sunny"}`)}}}}},
		Tools: []responses.ToolUnionParam{weatherTool()}}, option.WithResponseInto(&res))
	var final responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if final.Status != responses.ResponseStatusCompleted || final.OutputText() == "" || len(final.Output) != 1 ||
		final.Output[0].Type != "message" {
		t.Fatalf("the answer after the tool's output: %s", final.RawJSON())
	}
	_, paidAnswer := b.billedOnce(t, res, o, final)

	// The same call, streamed: its arguments arrive as deltas and end whole.
	stream = client.Responses.NewStreaming(b.ctx, responses.ResponseNewParams{Model: "resp-tools",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{question}},
		Tools: []responses.ToolUnionParam{weatherTool()}}, option.WithResponseInto(&res))
	var deltas strings.Builder
	var done string
	final = responses.Response{}
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.function_call_arguments.delta":
			deltas.WriteString(ev.Delta)
		case "response.function_call_arguments.done":
			done = ev.Arguments
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if json.Unmarshal([]byte(done), &args) != nil || !reflect.DeepEqual(args, wantArgs) || deltas.String() != done ||
		len(final.Output) != 1 || final.Output[0].AsFunctionCall().Arguments != done || final.Output[0].AsFunctionCall().Name != "weather" {
		t.Fatalf("the streamed call: deltas %q, done %q, response %s", deltas.String(), done, final.RawJSON())
	}
	_, paidStream := b.billedOnce(t, res, o, final)
	if got, want := b.balance(t, dev.AccountID), start-paidCall-paidAnswer-paidStream; got != want {
		t.Fatalf("balance %s; want %s", got, want)
	}
}

func (b *gatewayBundle) testResponsesRefused(t *testing.T) {
	b.list(t, rigSpec{model: "resp-refused", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "resp-refused", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	start := b.balance(t, dev.AccountID)
	input := responses.ResponseNewParamsInputUnion{OfString: openai.String("Go on.")}

	_, err := client.Responses.New(b.ctx, responses.ResponseNewParams{Model: "resp-refused", Input: input,
		PreviousResponseID: openai.String("resp_earlier")})
	e := apiError(t, err, http.StatusBadRequest, "invalid_request_error", "unsupported_parameter")
	if e.Param != "previous_response_id" || !strings.Contains(e.Message, "does not store responses") {
		t.Fatalf("previous_response_id refused with param %q: %s", e.Param, e.Message)
	}
	_, err = client.Responses.New(b.ctx, responses.ResponseNewParams{Model: "resp-refused", Input: input,
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
	if e := apiError(t, err, http.StatusBadRequest, "invalid_request_error", "unsupported_tool"); e.Param != "tools[0].type" {
		t.Fatalf("a web search tool refused with param %q: %s", e.Param, e.Message)
	}
	// An unknown model is the gateway's own 404, in the same shape.
	_, err = client.Responses.New(b.ctx, responses.ResponseNewParams{Model: "no-such-model", Input: input})
	apiError(t, err, http.StatusNotFound, "invalid_request_error", "model_not_found")
	if got := b.balance(t, dev.AccountID); got != start {
		t.Fatalf("refused requests cost %s", start-got)
	}
}
