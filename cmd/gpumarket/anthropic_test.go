package main

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestAnthropicMessagesThroughTheGateway: the official Anthropic Go SDK, pointed at the gateway, gets answers from
// simulated rigs, whole and streamed, text and a tool call, each billed exactly once on the tokens it was told of;
// count_tokens bills nothing; errors come in Anthropic's shape.
func TestAnthropicMessagesThroughTheGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	o := b.list(t, rigSpec{model: "anthropic-msgs", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "anthropic", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := anthropic.NewClient(option.WithBaseURL(b.p.URL()+"/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	start := b.balance(t, dev.AccountID)
	var total money.Pico

	// billedOnce checks the answer's usage is what the meter billed, once, at the tier's price, and owes the provider
	// its asks on it.
	billedOnce := func(res *http.Response, msgID string, usage anthropic.Usage) money.Pico {
		t.Helper()
		id, offering, _ := headersOf(t, res)
		if offering != o.ID || msgID != "msg_"+strings.TrimPrefix(id, "req_") {
			t.Fatalf("message %s served by %s as %s", msgID, offering, id)
		}
		m := b.metered(t, id)
		if m.status != "ok" || m.input != usage.InputTokens || m.output != usage.OutputTokens || usage.InputTokens <= 0 {
			t.Fatalf("metered %+v; the answer said %d in, %d out", m, usage.InputTokens, usage.OutputTokens)
		}
		if want := b.price(t, string(o.Tier), m.input, m.output); m.charge != want || want == 0 {
			t.Fatalf("charged %s, want %s", m.charge, want)
		}
		b.owedOnce(t, id, o, m)
		total += m.charge
		return m.charge
	}
	question := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Which GPU is serving me?"))}

	// Whole.
	var res *http.Response
	msg, err := client.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 8, Messages: question,
		System: []anthropic.TextBlockParam{{Text: "Answer briefly."}}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.Model != o.Model || len(msg.Content) != 1 ||
		msg.Content[0].Type != "text" || msg.Content[0].Text == "" || msg.StopReason != anthropic.StopReasonMaxTokens ||
		msg.Usage.OutputTokens != 8 {
		t.Fatalf("message %s", msg.RawJSON())
	}
	if paid := billedOnce(res, msg.ID, msg.Usage); costIn(t, msg.RawJSON()) != paid {
		t.Fatalf("the message says it cost %s; the meter charged %s", costIn(t, msg.RawJSON()), paid)
	}

	// Streamed, accumulated as the SDK does.
	stream := client.Messages.NewStreaming(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 12, Messages: question},
		option.WithResponseInto(&res))
	var acc anthropic.Message
	events := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		events[ev.Type]++
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if events["message_start"] != 1 || events["content_block_start"] != 1 || events["content_block_delta"] < 2 ||
		events["message_delta"] != 1 || events["message_stop"] != 1 {
		t.Fatalf("events %v", events)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text == "" || acc.StopReason != anthropic.StopReasonMaxTokens ||
		acc.Usage.OutputTokens != 12 {
		t.Fatalf("streamed message %s", acc.RawJSON())
	}
	billedOnce(res, acc.ID, acc.Usage)

	// A tool call: the simulated rig calls the tool with placeholders for its required properties; its output is the
	// arguments' 15 tokens ({ " city " : " example " , " days " : 1 }).
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		Description: anthropic.String("The weather in a city."),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
			"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}, "units": map[string]any{"type": "string"}},
			Required: []string{"city", "days"}}}}}
	weather := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Lyon?"))}
	call, err := client.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 100, Messages: weather, Tools: tools},
		option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if len(call.Content) != 1 || call.Content[0].Type != "tool_use" || call.Content[0].Name != "get_weather" ||
		string(call.Content[0].Input) != `{"city":"example","days":1}` || !strings.HasPrefix(call.Content[0].ID, "call_") ||
		call.StopReason != anthropic.StopReasonToolUse || call.Usage.OutputTokens != 15 {
		t.Fatalf("tool call %s", call.RawJSON())
	}
	billedOnce(res, call.ID, call.Usage)

	// The same call streamed, forced by tool_choice.
	stream = client.Messages.NewStreaming(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 100, Messages: weather,
		Tools: tools, ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather")}, option.WithResponseInto(&res))
	acc = anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Type != "tool_use" || string(acc.Content[0].Input) != `{"city":"example","days":1}` ||
		acc.StopReason != anthropic.StopReasonToolUse || acc.Usage.OutputTokens != 15 {
		t.Fatalf("streamed tool call %s", acc.RawJSON())
	}
	billedOnce(res, acc.ID, acc.Usage)

	// The tool's result goes back with the call: the answer is text.
	followUp := append(weather, call.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.Content[0].ID, "Sunny, 21 C.", false)))
	answer, err := client.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 6, Messages: followUp, Tools: tools},
		option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if len(answer.Content) != 1 || answer.Content[0].Type != "text" || answer.Usage.OutputTokens != 6 ||
		answer.Usage.InputTokens <= call.Usage.InputTokens {
		t.Fatalf("answer to the tool result %s", answer.RawJSON())
	}
	billedOnce(res, answer.ID, answer.Usage)

	// count_tokens is an upper bound of what the same request is billed for, and bills nothing.
	count, err := client.Messages.CountTokens(b.ctx, anthropic.MessageCountTokensParams{Model: o.Model, Messages: followUp,
		Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}}})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens < answer.Usage.InputTokens {
		t.Fatalf("count_tokens %d, below the %d the request was billed for", count.InputTokens, answer.Usage.InputTokens)
	}
	b.flushRequestLog(t)
	if got := b.balance(t, dev.AccountID); got != start-total || total <= 0 {
		t.Fatalf("balance %s after requests costing %s; want %s", got, total, start-total)
	}

	// Errors in Anthropic's shape: an unknown model, an account without credit, no key.
	_, err = client.Messages.New(b.ctx, anthropic.MessageNewParams{Model: "no-such-model", MaxTokens: 5, Messages: question})
	anthropicError(t, err, http.StatusNotFound, "not_found_error")
	_, err = client.Messages.CountTokens(b.ctx, anthropic.MessageCountTokensParams{Model: "no-such-model", Messages: question})
	anthropicError(t, err, http.StatusNotFound, "not_found_error")
	_, _, broke := b.developer(t, "anthropic-broke", 0, accounts.NewKeyInput{})
	poor := anthropic.NewClient(option.WithBaseURL(b.p.URL()+"/"), option.WithAPIKey(broke), option.WithMaxRetries(0))
	_, err = poor.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 5, Messages: question})
	anthropicError(t, err, http.StatusPaymentRequired, "billing_error")
	nobody := anthropic.NewClient(option.WithBaseURL(b.p.URL()+"/"), option.WithAPIKey("sk-none"), option.WithMaxRetries(0))
	_, err = nobody.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 5, Messages: question})
	anthropicError(t, err, http.StatusUnauthorized, "authentication_error")
}

// anthropicError asserts that err is the Anthropic SDK's error for an answer with the status and type.
func anthropicError(t *testing.T, err error, status int, typ string) {
	t.Helper()
	var e *anthropic.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want an API error %d", err, status)
	}
	if e.StatusCode != status || string(e.Type()) != typ || e.Message == "" {
		t.Fatalf("API error %d %q (%s), want %d %q", e.StatusCode, e.Type(), e.RawJSON(), status, typ)
	}
}
