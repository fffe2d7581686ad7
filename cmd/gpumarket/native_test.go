package main

import (
	"encoding/json"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
)

// TestMessagesAndResponsesPassedToAnEngineThatServesThem: a rig whose engine serves the Anthropic Messages and
// OpenAI Responses APIs itself (simbackend -native, with its prefix cache) is found so by its agent, says so in
// its heartbeats, and gets those requests on their own paths; the official SDKs get the engine's own answers, whole
// and streamed, text and a forced tool call; each request is billed once on the usage the engine reported, its
// cached input at the cached price, and owes the provider its asks, the cached ones scaled as the price is.
func TestMessagesAndResponsesPassedToAnEngineThatServesThem(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	o := b.list(t, rigSpec{model: "native-engine", ask: 100_000, p99: 300, native: true, prefixCache: true})
	b.eventually(t, "the rig's heartbeat names both APIs", func() bool {
		cs, err := b.p.router.Pick(routing.Request{Model: o.Model, Tier: o.Tier, Offering: o.ID})
		return err == nil && slices.Equal(cs[0].Native, []string{catalog.NativeMessages, catalog.NativeResponses})
	})
	dev, _, secret := b.developer(t, "native", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	var total money.Pico

	// billed checks the request was metered once on the usage the engine reported (input, of it cached, output),
	// at the tier's prices, and owes the provider its asks; it returns the request's id.
	billed := func(res *http.Response, input, cached, output int64) (string, meteredRow) {
		t.Helper()
		id, offering, tier := headersOf(t, res)
		if offering != o.ID || tier != string(o.Tier) {
			t.Fatalf("served by %s in %s, want %s in %s", offering, tier, o.ID, o.Tier)
		}
		m := b.metered(t, id)
		if m.status != "ok" || m.input != input || m.cached != cached || m.output != output || output == 0 {
			t.Fatalf("%s metered %+v; the engine said %d in (%d cached), %d out", id, m, input, cached, output)
		}
		p := b.prices[o.Tier]
		want := charge(t, input-cached, p.Input, cached, p.CachedInput, output, p.Output)
		if m.charge != want {
			t.Fatalf("%s charged %s, want %s", id, m.charge, want)
		}
		askCached := o.AskInput
		if p.CachedInput < p.Input {
			askCached = o.AskInput * p.CachedInput / p.Input // both are micro-dollars a million tokens: no overflow here
		}
		owed := charge(t, input-cached, o.AskInput, cached, askCached, output, o.AskOutput)
		var rows int
		var payable int64
		if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*), coalesce(sum(payable_pico), 0)::bigint FROM usage_events
			WHERE request_id = $1`, id).Scan(&rows, &payable); err != nil {
			t.Fatal(err)
		}
		if rows != 1 || money.Pico(payable) != owed {
			t.Fatalf("%s: %d usage rows owing the provider %s; want one owing %s", id, rows, money.Pico(payable), owed)
		}
		total += m.charge
		return id, m
	}

	// Anthropic Messages. The engine stops when its answer is done, within max_tokens (end_turn): a request
	// translated to chat would have run to the limit and stopped there.
	ac := anthropic.NewClient(aoption.WithBaseURL(b.p.URL()+"/"), aoption.WithAPIKey(secret), aoption.WithMaxRetries(0))
	question := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Which GPU is serving me, and why that one?"))}
	var res *http.Response
	msg, err := ac.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model + ":" + string(o.Tier), MaxTokens: 4096,
		Messages: question, System: []anthropic.TextBlockParam{{Text: "Answer briefly."}}}, aoption.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Model != o.Model || len(msg.Content) != 1 || msg.Content[0].Text == "" ||
		msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens >= 4096 || msg.Usage.CacheReadInputTokens != 0 {
		t.Fatalf("message %s", msg.RawJSON())
	}
	if _, m := billed(res, msg.Usage.InputTokens, 0, msg.Usage.OutputTokens); costIn(t, msg.RawJSON()) != m.charge {
		t.Fatalf("the message says it cost %s; the meter charged %s", costIn(t, msg.RawJSON()), m.charge)
	}

	// The next turn of the conversation: the engine served the first turn's prompt from its cache, and Anthropic
	// counts what it read from the cache apart from input_tokens.
	turn := append(slices.Clone(question), msg.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("And the price?")))
	stream := ac.Messages.NewStreaming(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 4096, Messages: turn,
		System: []anthropic.TextBlockParam{{Text: "Answer briefly."}}}, aoption.WithResponseInto(&res))
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
	u := acc.Usage
	if events["message_start"] != 1 || events["content_block_delta"] < 1 || events["message_stop"] != 1 ||
		acc.StopReason != anthropic.StopReasonEndTurn || u.CacheReadInputTokens <= 0 || acc.Content[0].Text == "" {
		t.Fatalf("streamed message (events %v) %s", events, acc.RawJSON())
	}
	billed(res, u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens)

	// A tool call forced by tool_choice, as the engine writes it.
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
			"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}, Required: []string{"city", "days"}}}}}
	call, err := ac.Messages.New(b.ctx, anthropic.MessageNewParams{Model: o.Model, MaxTokens: 200, Tools: tools,
		ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather"),
		Messages:   []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Lyon?"))}},
		aoption.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if len(call.Content) != 1 || call.Content[0].Type != "tool_use" || call.Content[0].Name != "get_weather" ||
		!strings.Contains(string(call.Content[0].Input), `"city"`) || call.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("tool call %s", call.RawJSON())
	}
	billed(res, call.Usage.InputTokens+call.Usage.CacheReadInputTokens, call.Usage.CacheReadInputTokens, call.Usage.OutputTokens)

	// OpenAI Responses: the engine's own response (its own id, not the gateway's translation's), with the cost in
	// its usage, whole and streamed.
	oc := openai.NewClient(option.WithBaseURL(b.p.URL()+"/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	r, err := oc.Responses.New(b.ctx, responses.ResponseNewParams{Model: o.Model, Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Which GPU is serving me?")}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	id, m := billed(res, r.Usage.InputTokens, r.Usage.InputTokensDetails.CachedTokens, r.Usage.OutputTokens)
	if r.Status != responses.ResponseStatusCompleted || r.OutputText() == "" || r.ID == "resp_"+strings.TrimPrefix(id, "req_") {
		t.Fatalf("response of %s: %s", id, r.RawJSON())
	}
	if told := costIn(t, r.RawJSON()); told != m.charge {
		t.Fatalf("the response says it cost %s; the meter charged %s", told, m.charge)
	}
	rs := oc.Responses.NewStreaming(b.ctx, responses.ResponseNewParams{Model: o.Model, Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Which GPU is serving me?")}}, option.WithResponseInto(&res))
	var final responses.Response
	var text strings.Builder
	for rs.Next() {
		switch ev := rs.Current(); ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if final.Status != responses.ResponseStatusCompleted || final.OutputText() != text.String() || text.Len() == 0 {
		t.Fatalf("streamed response (text %q): %s", text.String(), final.RawJSON())
	}
	_, m = billed(res, final.Usage.InputTokens, final.Usage.InputTokensDetails.CachedTokens, final.Usage.OutputTokens)
	if told := costIn(t, final.RawJSON()); told != m.charge {
		t.Fatalf("the streamed response says it cost %s; the meter charged %s", told, m.charge)
	}

	b.flushRequestLog(t)
	if got := b.balance(t, dev.AccountID); got != start-total || total <= 0 {
		t.Fatalf("balance %s after requests costing %s; want %s", got, total, start-total)
	}
}

// charge is fresh input, cached input and output tokens at their prices a million tokens: the meter's rule for a
// generation, restated.
func charge(t *testing.T, fresh int64, freshPrice money.MicroUSD, cached int64, cachedPrice money.MicroUSD, output int64,
	outputPrice money.MicroUSD) money.Pico {
	t.Helper()
	var sum money.Pico
	for _, part := range []struct {
		n int64
		p money.MicroUSD
	}{{fresh, freshPrice}, {cached, cachedPrice}, {output, outputPrice}} {
		c, err := money.ChargeFor(part.n, part.p)
		if err != nil {
			t.Fatal(err)
		}
		sum += c
	}
	return sum
}

// TestAModelOfItsOwnPriceIsBilledAtItThroughThePlatform: a 70B model whose asks no tier's default price pays is
// listed at the price the price book gives that model, routed, answered, told its cost and billed at that price,
// while a small model beside it pays the tier's default; GET /v1/models gives each its own.
func TestAModelOfItsOwnPriceIsBilledAtItThroughThePlatform(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	def := b.prices[catalog.TierStandard]
	own := catalog.Price{Tier: catalog.TierStandard, Model: "big-70b", Input: 6 * def.Input, Output: 6 * def.Output}
	if err := b.p.catalog.EnsurePrices(b.ctx, []catalog.Price{own}, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Its blended ask is four times what the default pays: only the model's own price covers it.
	big := b.list(t, rigSpec{model: "big-70b", ask: 2 * (def.Input + def.Output), p99: 300})
	small := b.list(t, rigSpec{model: "small-7b", ask: (def.Input + def.Output) / 4, p99: 300})
	if big.Tier != catalog.TierStandard || small.Tier != catalog.TierStandard {
		t.Fatalf("listed in %s and %s, want standard", big.Tier, small.Tier)
	}
	prices, err := b.p.catalog.CurrentModelPrices(b.ctx, "big-70b")
	if err != nil {
		t.Fatal(err)
	}
	if p := prices[catalog.TierStandard]; p.Model != "big-70b" || p.Input != own.Input || p.Output != own.Output || p.CachedInput != own.Input/4 {
		t.Fatalf("big-70b's standard price %+v", p)
	}
	own = prices[catalog.TierStandard]
	dev, _, secret := b.developer(t, "big-model", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	var total money.Pico
	for _, c := range []struct {
		o     catalog.Offering
		price catalog.Price
	}{{big, own}, {small, def}} {
		var res *http.Response
		answer, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams(c.o.Model, 16), option.WithResponseInto(&res))
		if err != nil {
			t.Fatal(err)
		}
		id, offering, _ := headersOf(t, res)
		m := b.metered(t, id)
		want := charge(t, m.input, c.price.Input, 0, 0, m.output, c.price.Output)
		if offering != c.o.ID || m.output != 16 || m.input != answer.Usage.PromptTokens || m.charge != want ||
			costIn(t, answer.RawJSON()) != want {
			t.Fatalf("%s: metered %+v, told %s; want a charge of %s at %+v", c.o.Model, m, costIn(t, answer.RawJSON()), want, c.price)
		}
		b.owedOnce(t, id, c.o, m)
		total += m.charge
	}
	if got := b.balance(t, dev.AccountID); got != start-total {
		t.Fatalf("balance %s after requests costing %s; want %s", got, total, start-total)
	}

	models, err := b.client(secret).Models.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, m := range models.Data {
		var entry struct {
			Pricing struct {
				Prompt, Completion string
				Cached             string `json:"input_cache_read"`
			} `json:"pricing"`
		}
		if err := json.Unmarshal([]byte(m.RawJSON()), &entry); err != nil {
			t.Fatal(err)
		}
		p, ok := map[string]catalog.Price{"big-70b": own, "small-7b": def}[m.ID]
		if !ok {
			continue
		}
		seen++
		if entry.Pricing.Prompt != perMillion(p.Input) || entry.Pricing.Completion != perMillion(p.Output) ||
			entry.Pricing.Cached != perMillion(p.CachedInput) {
			t.Errorf("%s priced %+v in /v1/models; want %+v", m.ID, entry.Pricing, p)
		}
	}
	if seen != 2 {
		t.Fatalf("/v1/models lists %d of the two models", seen)
	}
}

// perMillion writes a price a million tokens as dollars a token, as /v1/models does: $0.90 a million is
// "0.0000009".
func perMillion(p money.MicroUSD) string {
	r := new(big.Rat).SetFrac64(int64(p), 1_000_000_000_000)
	s := strings.TrimRight(r.FloatString(12), "0")
	return strings.TrimSuffix(s, ".")
}
