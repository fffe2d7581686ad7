package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// TestRigsServeOverNATS: the gateway reaches rigs only over the NATS connections their agents opened
// (docs/rig-transport.md). A streamed answer is relayed and billed exactly once; an agent whose connection is cut in
// the middle of a stream leaves the client an answer without its end and the gateway a record of the error.
func TestRigsServeOverNATS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	t.Run("a streamed answer over NATS is billed exactly once", b.testStreamOverNATSBilledOnce)
	t.Run("an agent's connection cut mid-stream breaks the answer truthfully", b.testAgentCutMidStream)
	t.Run("a chat completion's tool call is relayed as the rig made it and billed as output", b.testChatToolCall)
}

func (b *gatewayBundle) testChatToolCall(t *testing.T) {
	o := b.list(t, rigSpec{model: "wire-tools", ask: 90_000, p99: 300})
	dev, _, secret := b.developer(t, "wire-tools", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params := chatParams(o.Model, 64)
	params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("The weather in a city."),
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"city", "days"},
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}}})}

	// Whole: the call the rig made, as it made it.
	var res *http.Response
	c, err := b.client(secret).Chat.Completions.New(b.ctx, params, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	calls := c.Choices[0].Message.ToolCalls
	if c.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "get_weather" ||
		calls[0].Function.Arguments != `{"city":"example","days":1}` {
		t.Fatalf("answered %+v", c.Choices[0])
	}
	id, _, _ := headersOf(t, res)
	m := b.metered(t, id)
	if m.output != c.Usage.CompletionTokens || m.output == 0 || m.input != c.Usage.PromptTokens {
		t.Fatalf("metered %+v; the answer reported %d + %d tokens", m, c.Usage.PromptTokens, c.Usage.CompletionTokens)
	}
	paid := m.charge
	if want := b.price(t, string(o.Tier), m.input, m.output); m.charge != want || costIn(t, c.RawJSON()) != want {
		t.Fatalf("charged %s, want %s", m.charge, want)
	}
	b.owedOnce(t, id, o, m)

	// Streamed: the call arrives in pieces and accumulates to the same call; its tokens are the stream's output.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := b.client(secret).Chat.Completions.NewStreaming(b.ctx, params, option.WithResponseInto(&res))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	calls = acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"example","days":1}` {
		t.Fatalf("accumulated %+v", acc.Choices[0].Message)
	}
	id, _, _ = headersOf(t, res)
	m = b.metered(t, id)
	if m.output != acc.Usage.CompletionTokens || m.output == 0 {
		t.Fatalf("metered %+v; the stream reported %d output tokens", m, acc.Usage.CompletionTokens)
	}
	paid += m.charge
	if got := start - b.balance(t, dev.AccountID); got != paid {
		t.Fatalf("the balance fell by %s; the two calls were charged %s", got, paid)
	}
	b.owedOnce(t, id, o, m)
}

func (b *gatewayBundle) testStreamOverNATSBilledOnce(t *testing.T) {
	o := b.list(t, rigSpec{model: "wire-stream", ask: 90_000, p99: 300})
	dev, _, secret := b.developer(t, "wire-stream", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params := chatParams(o.Model, 24)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var res *http.Response
	stream := b.client(secret).Chat.Completions.NewStreaming(b.ctx, params, option.WithResponseInto(&res))
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	var usageChunk string
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
		if stream.Current().JSON.Usage.Valid() {
			usageChunk = stream.Current().RawJSON()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	id, offering, _ := headersOf(t, res)
	if offering != o.ID || acc.Usage.CompletionTokens != 24 || chunks < 2 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("from %s: %d chunks, usage %+v", offering, chunks, acc.Usage)
	}
	m := b.metered(t, id)
	if m.output != 24 || m.input != acc.Usage.PromptTokens || m.status != "ok" {
		t.Fatalf("metered %+v, want the %d + 24 tokens the client was told", m, acc.Usage.PromptTokens)
	}
	want := b.price(t, string(o.Tier), m.input, m.output)
	if m.charge != want || start-b.balance(t, dev.AccountID) != want {
		t.Fatalf("charged %s and the balance fell by %s; want %s", m.charge, start-b.balance(t, dev.AccountID), want)
	}
	// The usage chunk told the client what it paid.
	if got := costIn(t, usageChunk); got != m.charge {
		t.Fatalf("the usage chunk says the request cost %s; the meter charged %s (%s)", got, m.charge, usageChunk)
	}
	// The provider earns its asks on the same tokens, once.
	b.owedOnce(t, id, o, m)
	b.payableMatchesUsage(t, b.provider)

	// A whole answer tells its cost in its usage too.
	var whole *http.Response
	c, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams(o.Model, 10), option.WithResponseInto(&whole))
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ = headersOf(t, whole)
	m = b.metered(t, id)
	if got := costIn(t, c.RawJSON()); got != m.charge || got != b.price(t, string(o.Tier), m.input, m.output) {
		t.Fatalf("the answer says the request cost %s; the meter charged %s", got, m.charge)
	}
}

// costIn reads usage.cost, in dollars, of an answer or a usage chunk.
func costIn(t *testing.T, raw string) money.Pico {
	t.Helper()
	var v struct {
		Usage struct {
			Cost json.Number `json:"cost"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil || v.Usage.Cost == "" {
		t.Fatalf("no usage.cost in %s (%v)", raw, err)
	}
	p, err := money.ParseUSD(v.Usage.Cost.String())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (b *gatewayBundle) testAgentCutMidStream(t *testing.T) {
	// About 100 ms to the first token, 50 ms a token after it: the stream lasts long enough to be cut.
	profile, ok := simulation.Lookup("meta-llama/Meta-Llama-3-70B-Instruct", "h100-pcie", 2)
	if !ok {
		t.Fatal("no profile for the slow rig")
	}
	o, rig := b.listRig(t, rigSpec{model: "wire-cut", gpu: "h100-pcie", count: 2, ask: 100_000, p99: 400, profile: profile})
	dev, _, secret := b.developer(t, "wire-cut", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)

	body := fmt.Sprintf(`{"model": %q, "max_tokens": 400, "stream": true, "messages": [{"role": "user", "content": "hi"}]}`, o.Model)
	req, _ := http.NewRequestWithContext(b.ctx, http.MethodPost, b.p.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	id, offering, _ := headersOf(t, res)
	if res.StatusCode != http.StatusOK || offering != o.ID {
		t.Fatalf("answered %d from %s", res.StatusCode, offering)
	}
	br := bufio.NewReader(res.Body)
	frames := 0
	for frames < 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: {") {
			frames++
		}
	}
	// The rig's host loses its network: its NATS connection is gone, nothing more comes.
	cut := time.Now()
	_ = rig.agent.Close()
	rest, err := io.ReadAll(br)
	took := time.Since(cut)
	if strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("the broken stream ended as a whole one: %q", rest)
	}
	if took > 10*time.Second {
		t.Fatalf("the client waited %s for the broken stream's end", took)
	}
	b.flushRequestLog(t)
	var status string
	var relayedChunks int64
	var hold int64
	b.eventually(t, "the gateway records the broken attempt", func() bool {
		return b.p.pool.QueryRow(b.ctx, `SELECT g.status, g.relayed_output_chunks, coalesce(h.amount_pico, 0)::bigint
			FROM gateway_requests g LEFT JOIN admission_holds h USING (request_id)
			WHERE g.request_id = $1`, id).Scan(&status, &relayedChunks, &hold) == nil
	})
	// The first frame names the role only: of the three the client had, two carried output.
	if status != string(requestlog.GatewayError) || relayedChunks < 2 || relayedChunks > 200 {
		t.Fatalf("recorded %s with %d chunks relayed; want error with what the client got", status, relayedChunks)
	}
	// What is held for it is bounded by what was relayed, never the 400 tokens asked for; nothing is charged until
	// the rig's own report arrives, which its cut connection keeps in its outbox.
	if bound := b.price(t, string(o.Tier), 1<<20, relayedChunks); hold <= 0 || money.Pico(hold) > bound {
		t.Fatalf("held %s for a broken stream of %d chunks (bounded by %s)", money.Pico(hold), relayedChunks, bound)
	}
	if got := b.balance(t, dev.AccountID); got != start {
		t.Fatalf("balance %s, want %s: nothing is billed before the rig reports", got, start)
	}
	t.Logf("the cut was seen after %s", took.Round(time.Millisecond))
}

// TestTwoGatewaysServeOneRigOverNATS: two gateway processes share one NATS server and one database, and one rig
// connected to NATS: both reach it, each request is answered by it and billed once.
func TestTwoGatewaysServeOneRigOverNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two platforms")
	}
	t.Parallel()
	ctx := context.Background()
	ns := natstest.Start(t, natsserver.EmbeddedOptions{})
	cfgA := testConfig(t, Roles{Web: true, Gateway: true, Meter: true})
	cfgA.NATSURL = ns.ClientURL()
	a := runPlatform(t, cfgA)
	if err := a.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	cfgB := cfgA
	cfgB.Roles, cfgB.DataDir = Roles{Gateway: true}, t.TempDir()
	bp := runPlatform(t, cfgB)

	dev, err := a.accounts.SignUp(ctx, accounts.SignUpInput{Email: "two@gateways.example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := a.accounts.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	cr := credits.NewCredits(a.pool, ledger.NewLedger(a.pool, nil), nil, nil)
	if _, err := cr.Adjust(ctx, credits.AdjustInput{AccountID: dev.AccountID, Amount: 20 * money.PicoPerUSD,
		Reason: "two gateways test", ByUserID: admin.ID}); err != nil {
		t.Fatal(err)
	}
	_, secret, err := a.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "two"})
	if err != nil {
		t.Fatal(err)
	}
	o := listServedOffering(t, a, bp)
	chat := map[string]any{"model": o.Model, "max_tokens": 4, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	ids := map[string]bool{}
	for i := range 10 {
		gw := a
		if i%2 == 1 {
			gw = bp
		}
		st, body := call(t, http.MethodPost, gw.URL()+"/v1/chat/completions", secret, chat)
		if st != http.StatusOK || !strings.Contains(body, `"completion_tokens":4`) {
			t.Fatalf("request %d through gateway %d: %d %s", i, i%2, st, body)
		}
	}
	// Every request was served by the one rig and metered once, whichever gateway took it.
	within(t, 20*time.Second, "the meter bills all ten", func() bool {
		var n int
		_ = a.pool.QueryRow(ctx, `SELECT count(*) FROM usage_events WHERE account_id = $1`, dev.AccountID).Scan(&n)
		return n == 10
	})
	rows, err := a.pool.Query(ctx, `SELECT request_id, offering_id::text FROM usage_events WHERE account_id = $1`, dev.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, offering string
		if err := rows.Scan(&id, &offering); err != nil {
			t.Fatal(err)
		}
		if offering != o.ID || ids[id] {
			t.Errorf("request %s billed on %s (twice: %v)", id, offering, ids[id])
		}
		ids[id] = true
	}
	rows.Close()
	var gateways int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM gateway_requests WHERE account_id = $1 AND status = 'ok'`,
		dev.AccountID).Scan(&gateways); err != nil || gateways != 10 || len(ids) != 10 {
		t.Fatalf("%d gateway records, %d billed requests; want 10 of each (%v)", gateways, len(ids), err)
	}
}

// TestARigThatTakesNoCallIsRecordedAsAnError: a rig whose agent heartbeats but never takes the gateway's calls
// (its program serves nothing) costs the customer nothing: the gateway gives up on it after rigwire's acceptance
// timeout and answers no_capacity, and its record holds the attempt as failed over with no HTTP status, which the
// rig's reliability record counts as an error.
func TestARigThatTakesNoCallIsRecordedAsAnError(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform")
	}
	b := setupGateway(t)
	const model = "wire-silent"
	p50, p99, tps := 150.0, 300.0, 1000.0
	o, err := b.p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: model, AskInput: 60_000, AskOutput: 120_000, ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	b.qualify(t, o)
	nc, err := nats.Connect(b.p.natsURL, nats.UserInfo(events.RigUsername(o.ID), events.RigPassword(b.p.cfg.RigKey, o.ID)),
		nats.CustomInboxPrefix(events.RigInboxPrefix(o.ProviderAccountID, o.ID)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hb, _ := json.Marshal(routing.Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID, Capacity: 64, At: time.Now()})
	if err := nc.Publish(events.HeartbeatSubject(o.ProviderAccountID, o.ID), hb); err != nil {
		t.Fatal(err)
	}
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eventually(t, "the silent rig is routable", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: model, Tier: o.Tier, Offering: o.ID})
		return err == nil
	})

	dev, _, secret := b.developer(t, "wire-silent", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	_, err = b.client(secret).Chat.Completions.New(b.ctx, chatParams(model, 5))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a request to the silent rig: %v; want 503", err)
	}
	var status string
	var httpStatus int
	b.eventually(t, "the attempt is recorded", func() bool {
		return b.p.pool.QueryRow(b.ctx, `SELECT status, http_status FROM gateway_requests WHERE offering_id = $1`, o.ID).
			Scan(&status, &httpStatus) == nil
	})
	if status != string(requestlog.GatewayFailedOver) || httpStatus != 0 {
		t.Fatalf("recorded %s with HTTP %d; want failed_over with none", status, httpStatus)
	}
	if paid := start - b.balance(t, dev.AccountID); paid != 0 {
		t.Fatalf("the customer paid %s for an answer that never came", paid)
	}
}

// owedOnce checks that the request was metered once and owes the offering's provider its asks on the metered
// tokens, exactly.
func (b *gatewayBundle) owedOnce(t *testing.T, requestID string, o catalog.Offering, m meteredRow) {
	t.Helper()
	earnIn, err1 := money.ChargeFor(m.input, o.AskInput)
	earnOut, err2 := money.ChargeFor(m.output, o.AskOutput)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	var rows int
	var payable int64
	if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*), coalesce(sum(payable_pico), 0)::bigint FROM usage_events
		WHERE request_id = $1`, requestID).Scan(&rows, &payable); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || money.Pico(payable) != earnIn+earnOut {
		t.Fatalf("%d usage rows owing the provider %s; want one owing %s", rows, money.Pico(payable), earnIn+earnOut)
	}
}
