package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
	usageevent "github.com/gpumarket/gpumarket/services/usage"
)

// TestGateway is the /v1 gateway end to end (docs/failure-cases.md, cases 15-19): a whole
// platform with simulated rigs (gpuagent in front of simbackend) on free ports, called with
// the official OpenAI Go SDK, streaming and not. Each subtest lists offerings of models of its
// own, so that routing sees only them, and most use a developer account of their own, so that
// balances are exact.
func TestGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)

	t.Run("usage in the response is the metered usage, and the balance falls by exactly its price", b.testMeteredUsage)
	t.Run("tier by suffix, header, body object, key default, else standard", b.testTierChoice)
	t.Run("price cap and latency cap", b.testCaps)
	t.Run("prefer carbon: the low-carbon rig, and the answer's estimated gCO2e", b.testCarbonRouting)
	t.Run("OpenRouter's provider object and gpumarket's own preferences choose the rig", b.testProviderPreferences)
	t.Run("a conversation stays on its rig while it can serve it", b.testConversations)
	t.Run("failover to the next offering when a rig answers 500", b.testFailover)
	t.Run("no offering can serve: 503; unknown model: 404", b.testNoCandidate)
	t.Run("invalid or revoked key: 401", b.testBadKey)
	t.Run("spent balance and key limit: 402", b.testQuota)
	t.Run("rate limit per key: 429 with Retry-After", b.testRateLimit)
	t.Run("bad JSON, oversized body, bad tier: 400", b.testBadRequests)
	t.Run("a client that disconnects mid-stream is billed for what was produced", b.testDisconnect)
	t.Run("routing moves to the offering measured faster", b.testMeasuredLatency)
	t.Run("a demoted offering is probed in its live tier, billed to the platform's probe account", b.testProbes)
	t.Run("the meter's feed brings the rigs' own reports, kept apart from the gateway's measurements", b.testMeteredFeed)
	t.Run("a stream's headers reach the client before its first token", b.testStreamHeadersFirst)
	t.Run("every request can be looked up and is reconciled with the meter", b.testReconciliation)
	t.Run("GET /v1/models lists models and their tiers", b.testModels)
	t.Run("browser journey: a key made on the keys page streams from batch and realtime, both on the usage page", b.testBrowserJourney)
}

// gatewayBundle is a running platform and what the subtests share.
type gatewayBundle struct {
	p        *Platform
	ctx      context.Context
	provider string // the demo provider's account: it lists the test offerings
	admin    accounts.User
	credits  *credits.Credits
	prices   map[catalog.Tier]catalog.Price
}

func setupGateway(t *testing.T) *gatewayBundle {
	t.Helper()
	return setupGatewayWith(t, nil)
}

// setupGatewayWith is setupGateway with a chance to adjust the platform before it runs.
func setupGatewayWith(t *testing.T, adjust func(*Platform)) *gatewayBundle {
	t.Helper()
	return setupGatewayConfig(t, nil, adjust)
}

// setupGatewayConfig is setupGatewayWith with a chance to change the configuration first.
func setupGatewayConfig(t *testing.T, configure func(*Config), adjust func(*Platform)) *gatewayBundle {
	t.Helper()
	_, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0,
		Payments: PaymentsTest, StripeMockBin: stripemocktest.Bin(t),
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_gateway"},
		Roles: Roles{Web: true, Gateway: true, Meter: true}, TicketKey: []byte(strings.Repeat("t", 32)), RigKey: []byte(strings.Repeat("r", 32)),
		WebhooksAllowPrivate: true} // the tests' webhook receivers are on this machine
	if configure != nil {
		configure(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := p.Seed(ctx); err != nil {
		cancel()
		p.Close()
		t.Fatal(err)
	}
	p.reconcileEvery = time.Hour // reconciled on demand here
	if adjust != nil {
		adjust(p)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		p.Close()
	})
	b := &gatewayBundle{p: p, ctx: ctx, credits: credits.NewCredits(p.pool, ledger.NewLedger(p.pool, nil), nil, nil)}
	provider, err := p.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	b.provider = provider.AccountID
	if b.admin, err = p.accounts.UserByEmail(ctx, "admin@example.com"); err != nil {
		t.Fatal(err)
	}
	if b.prices, err = p.catalog.CurrentPrices(ctx); err != nil {
		t.Fatal(err)
	}
	// The router starts in Run; wait until it has loaded the catalog.
	b.eventually(t, "the router loads the catalog", func() bool {
		_, err := p.router.Pick(routing.Request{Model: "no-such-model"})
		return !errors.Is(err, routing.ErrNotLoaded)
	})
	return b
}

// developer signs up a developer with credit and an API key, and returns the key's secret.
func (b *gatewayBundle) developer(t *testing.T, name string, credit money.Pico, in accounts.NewKeyInput) (accounts.User, accounts.APIKey, string) {
	t.Helper()
	u, err := b.p.accounts.SignUp(b.ctx, accounts.SignUpInput{Email: name + "@gateway.example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper, AccountName: name})
	if err != nil {
		t.Fatal(err)
	}
	if credit != 0 {
		if _, err := b.credits.Adjust(b.ctx, credits.AdjustInput{AccountID: u.AccountID, Amount: credit, Reason: "gateway test",
			ByUserID: b.admin.ID}); err != nil {
			t.Fatal(err)
		}
	}
	key, secret := b.key(t, u, in)
	return u, key, secret
}

func (b *gatewayBundle) key(t *testing.T, u accounts.User, in accounts.NewKeyInput) (accounts.APIKey, string) {
	t.Helper()
	if in.Name == "" {
		in.Name = "gateway test"
	}
	key, secret, err := b.p.accounts.CreateKey(b.ctx, u, in)
	if err != nil {
		t.Fatal(err)
	}
	return key, secret
}

// client is the official SDK pointed at the gateway, without retries so that each call is one
// request.
func (b *gatewayBundle) client(secret string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(b.p.URL()+"/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	return &c
}

// rigSpec is a test offering and the simulated rig that serves it.
type rigSpec struct {
	model    string
	gpu      string
	count    int
	ask      money.MicroUSD // blended: split a third of twice it per input token, the rest per output token
	p99      float64        // the claimed P99 time to first token: it decides the listed tier
	profile  simulation.Profile
	failRate float64 // 1 makes the rig's backend answer every inference request 500
	region   string  // "" is eu
	// native makes the rig's engine serve the Messages and Responses APIs itself, and prefixCache report the
	// prompt tokens it served from its cache (simulation.Options).
	native, prefixCache bool
}

// list lists an offering, starts its rig, which serves the gateway over NATS, and waits until
// routing can send it requests.
func (b *gatewayBundle) list(t *testing.T, spec rigSpec) catalog.Offering {
	t.Helper()
	o, _ := b.listRig(t, spec)
	return o
}

// listRig is list, which also returns the offering's rig.
func (b *gatewayBundle) listRig(t *testing.T, spec rigSpec) (catalog.Offering, *simulatedRig) {
	t.Helper()
	if spec.gpu == "" {
		spec.gpu, spec.count = "rtx-4090", 4
	}
	p50, tps := spec.p99/2, 1000.0
	if spec.region == "" {
		spec.region = "eu"
	}
	o, err := b.p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: spec.gpu, GPUCount: spec.count, Region: spec.region,
		Model: spec.model, AskInput: 2 * spec.ask / 3, AskOutput: 2*spec.ask - 2*spec.ask/3, ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &spec.p99,
		ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	b.qualify(t, o)
	profile := spec.profile
	if profile.IsZero() {
		profile = simulation.Zero()
	}
	profile.Model = spec.model
	var rig *simulatedRig
	if spec.failRate > 0 {
		rig = b.startFailingRig(t, o, spec.failRate)
	} else if rig, err = b.p.startRigWith(b.ctx, o.ID, b.provider, spec.gpu, spec.count,
		simulation.Options{Profile: profile, Native: spec.native, PrefixCache: spec.prefixCache}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rig.stop)
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eventually(t, "the rig's heartbeat reaches routing", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: spec.model, Tier: o.Tier, Offering: o.ID})
		return err == nil
	})
	return o, rig
}

// qualify makes the offering's rig active as if it had passed its probes: the subtests that list rigs are
// about what they serve, not how they qualify (listing_states_test.go is).
func (b *gatewayBundle) qualify(t *testing.T, o catalog.Offering) {
	t.Helper()
	if err := b.p.catalog.MarkQualified(b.ctx, o.ID); err != nil {
		t.Fatal(err)
	}
}

// startFailingRig is a simulated rig whose backend answers 500 to the given fraction of
// inference requests, before any byte (simulation.Options.FailRate).
func (b *gatewayBundle) startFailingRig(t *testing.T, o catalog.Offering, failRate float64) *simulatedRig {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := &http.Server{Handler: simulation.NewHandler(simulation.Options{Model: o.Model, FailRate: failRate}),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = backend.Serve(l) }()
	a, err := agent.New(agent.Config{
		Upstream:   "http://" + l.Addr().String(),
		ProviderID: b.provider, OfferingID: o.ID, GPUSKU: o.GPU, GPUCount: o.GPUCount, Capacity: 64,
		NATSURL: b.p.natsURL, NATSUser: events.RigUsername(o.ID), NATSPassword: events.RigPassword(b.p.cfg.RigKey, o.ID),
		OutboxDir: t.TempDir(), OfferingKey: ticket.OfferingKey(b.p.cfg.TicketKey, o.ID),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		_ = backend.Close()
		t.Fatal(err)
	}
	go func() { _ = a.Run(b.ctx) }()
	return &simulatedRig{offeringID: o.ID, backend: backend, agent: a}
}

func (b *gatewayBundle) eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// meteredRow is a request's row in usage_events.
type meteredRow struct {
	offering, tier, status string
	input, output          int64
	cached                 int64 // of input, billed at the cached input price
	charge                 money.Pico
}

// metered waits for the request's usage row.
func (b *gatewayBundle) metered(t *testing.T, requestID string) meteredRow {
	t.Helper()
	var m meteredRow
	b.eventually(t, "request "+requestID+" is metered", func() bool {
		err := b.p.pool.QueryRow(b.ctx, `SELECT offering_id::text, tier, status, input_tokens, output_tokens,
				cached_input_tokens, charge_pico::bigint
			FROM usage_events WHERE request_id = $1`, requestID).Scan(&m.offering, &m.tier, &m.status, &m.input, &m.output,
			&m.cached, &m.charge)
		return err == nil
	})
	return m
}

func (b *gatewayBundle) balance(t *testing.T, accountID string) money.Pico {
	t.Helper()
	bal, err := b.credits.Balance(b.ctx, accountID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := bal.Pico.Pico()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// price is what a request costs at a tier's price: the meter's rule, restated.
func (b *gatewayBundle) price(t *testing.T, tier string, input, output int64) money.Pico {
	t.Helper()
	return b.priceOf(t, tier, false, input, output)
}

// priceOf is what a request costs: a generation that produced no completion token nothing,
// an embedding its input tokens.
func (b *gatewayBundle) priceOf(t *testing.T, tier string, embedding bool, input, output int64) money.Pico {
	t.Helper()
	if output == 0 && !embedding {
		return 0
	}
	p := b.prices[catalog.Tier(tier)]
	in, err1 := money.ChargeFor(input, p.Input)
	out, err2 := money.ChargeFor(output, p.Output)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return in + out
}

// headersOf returns the routing headers of a response.
func headersOf(t *testing.T, res *http.Response) (requestID, offering, tier string) {
	t.Helper()
	if res == nil {
		t.Fatal("no response")
	}
	requestID, offering, tier = res.Header.Get("X-GPUMarket-Request-Id"), res.Header.Get("X-GPUMarket-Offering"), res.Header.Get("X-GPUMarket-Tier")
	hardware := res.Header.Get("X-GPUMarket-Hardware")
	if !strings.HasPrefix(requestID, "req_") || offering == "" || tier == "" || !regexp.MustCompile(`^[1-8]x \S`).MatchString(hardware) {
		t.Fatalf("routing headers: request id %q, offering %q, tier %q, hardware %q", requestID, offering, tier, hardware)
	}
	return requestID, offering, tier
}

// apiError asserts that err is the SDK's error for an answer with the status, type and code.
func apiError(t *testing.T, err error, status int, typ, code string) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want an API error %d", err, status)
	}
	if e.StatusCode != status || e.Type != typ || e.Code != code {
		t.Fatalf("API error %d type %q code %q (%s), want %d %q %q", e.StatusCode, e.Type, e.Code, e.Message, status, typ, code)
	}
	return e
}

func chatParams(model string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Which GPU is serving me?")}}
}

func (b *gatewayBundle) testMeteredUsage(t *testing.T) {
	o := b.list(t, rigSpec{model: "gw-metered", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "metered", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	start := b.balance(t, dev.AccountID)

	type seen struct {
		requestID     string
		input, output int64
	}
	var requests []seen
	check := func(res *http.Response, input, output int64) {
		t.Helper()
		id, offering, tier := headersOf(t, res)
		if offering != o.ID || tier != "standard" {
			t.Fatalf("served by %s in %s, want %s in standard", offering, tier, o.ID)
		}
		requests = append(requests, seen{id, input, output})
	}

	// Chat, whole.
	var res *http.Response
	chat, err := client.Chat.Completions.New(b.ctx, chatParams("gw-metered", 8), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if chat.Usage.CompletionTokens != 8 || chat.Usage.PromptTokens <= 0 || chat.Choices[0].Message.Content == "" {
		t.Fatalf("chat completion: usage %+v, content %q", chat.Usage, chat.Choices[0].Message.Content)
	}
	check(res, chat.Usage.PromptTokens, chat.Usage.CompletionTokens)

	// Chat, streamed, with the usage chunk asked for.
	params := chatParams("gw-metered", 12)
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(b.ctx, params, option.WithResponseInto(&res))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Usage.CompletionTokens != 12 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("streamed chat: usage %+v, content %q", acc.Usage, acc.Choices[0].Message.Content)
	}
	check(res, acc.Usage.PromptTokens, acc.Usage.CompletionTokens)

	// Chat, streamed, without the usage chunk: the client gets none (the gateway asks the rig
	// for it for its own record, and keeps it), and the request is metered all the same.
	stream = client.Chat.Completions.NewStreaming(b.ctx, chatParams("gw-metered", 5), option.WithResponseInto(&res))
	var text strings.Builder
	for stream.Next() {
		c := stream.Current()
		if c.JSON.Usage.Raw() != "" {
			t.Fatalf("a chunk carries usage the client did not ask for: %s", c.RawJSON())
		}
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || text.Len() == 0 {
		t.Fatalf("streamed chat without usage: %q, %v", text.String(), err)
	}
	id, _, _ := headersOf(t, res)
	requests = append(requests, seen{requestID: id, input: -1, output: 5})

	// A text completion, and embeddings.
	comp, err := client.Completions.New(b.ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel("gw-metered"),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(6)},
		option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	check(res, comp.Usage.PromptTokens, comp.Usage.CompletionTokens)
	emb, err := client.Embeddings.New(b.ctx, openai.EmbeddingNewParams{Model: "gw-metered",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 2 || emb.Usage.PromptTokens <= 0 {
		t.Fatalf("embeddings: %d vectors, usage %+v", len(emb.Data), emb.Usage)
	}
	check(res, emb.Usage.PromptTokens, 0)
	embeddingID, _, _ := headersOf(t, res)

	var total money.Pico
	for _, r := range requests {
		m := b.metered(t, r.requestID)
		if m.offering != o.ID || m.tier != "standard" || m.status != "ok" {
			t.Errorf("%s metered as %+v", r.requestID, m)
		}
		if (r.input >= 0 && m.input != r.input) || m.output != r.output {
			t.Errorf("%s: the response said %d in, %d out; the meter billed %d in, %d out", r.requestID, r.input, r.output, m.input, m.output)
		}
		if want := b.priceOf(t, "standard", r.requestID == embeddingID, m.input, m.output); m.charge != want || m.charge == 0 {
			t.Errorf("%s charged %s, want %s", r.requestID, m.charge, want)
		}
		total += m.charge
	}
	if total <= 0 {
		t.Fatal("nothing was charged")
	}
	if got := b.balance(t, dev.AccountID); got != start-total {
		t.Fatalf("balance %s after requests costing %s; want %s", got, total, start-total)
	}
}

func (b *gatewayBundle) testTierChoice(t *testing.T) {
	const model = "gw-tiers"
	rt := b.list(t, rigSpec{model: model, gpu: "h100-pcie", count: 1, ask: 200_000, p99: 40})
	st := b.list(t, rigSpec{model: model, ask: 100_000, p99: 300})
	ba := b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	if rt.Tier != catalog.TierRealtime || st.Tier != catalog.TierStandard || ba.Tier != catalog.TierBatch {
		t.Fatalf("listed tiers %s, %s, %s", rt.Tier, st.Tier, ba.Tier)
	}
	dev, _, secret := b.developer(t, "tiers", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	_, batchKey := b.key(t, dev, accounts.NewKeyInput{Name: "batch by default", DefaultTier: "batch"})
	byOffering := map[string]string{rt.ID: "realtime", st.ID: "standard", ba.ID: "batch"}

	for _, tc := range []struct {
		name   string
		secret string
		model  string
		opts   []option.RequestOption
		want   string
	}{
		{"suffix", secret, model + ":realtime", nil, "realtime"},
		{"suffix :batch", secret, model + ":batch", nil, "batch"},
		{"header", secret, model, []option.RequestOption{option.WithHeader("X-GPUMarket-Tier", "batch")}, "batch"},
		{"body object", secret, model, []option.RequestOption{option.WithJSONSet("gpumarket", map[string]any{"tier": "realtime"})}, "realtime"},
		{"key default", batchKey, model, nil, "batch"},
		{"standard when nothing chooses", secret, model, nil, "standard"},
		{"the suffix before the header", secret, model + ":standard", []option.RequestOption{option.WithHeader("X-GPUMarket-Tier", "realtime")}, "standard"},
		{"the header before the body object", secret, model, []option.RequestOption{option.WithHeader("X-GPUMarket-Tier", "batch"),
			option.WithJSONSet("gpumarket", map[string]any{"tier": "realtime"})}, "batch"},
		{"the body object before the key's default", batchKey, model,
			[]option.RequestOption{option.WithJSONSet("gpumarket", map[string]any{"tier": "standard"})}, "standard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res *http.Response
			chat, err := b.client(tc.secret).Chat.Completions.New(b.ctx, chatParams(tc.model, 4), append(tc.opts, option.WithResponseInto(&res))...)
			if err != nil {
				t.Fatal(err)
			}
			id, offering, tier := headersOf(t, res)
			if tier != tc.want || byOffering[offering] != tc.want {
				t.Fatalf("served in %s by the %s offering, want %s", tier, byOffering[offering], tc.want)
			}
			// The rig got the model without the suffix, and the meter priced the tier chosen.
			if chat.Model != model {
				t.Fatalf("the rig served model %q, want %q", chat.Model, model)
			}
			if m := b.metered(t, id); m.tier != tc.want || m.charge != b.price(t, tc.want, m.input, m.output) {
				t.Fatalf("metered %+v, want the %s tier's price", m, tc.want)
			}
		})
	}
}

func (b *gatewayBundle) testCaps(t *testing.T) {
	const model = "gw-caps"
	cheapSlow := b.list(t, rigSpec{model: model, ask: 80_000, p99: 450})
	dearFast := b.list(t, rigSpec{model: model, ask: 200_000, p99: 100})
	_, _, secret := b.developer(t, "caps", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	for _, tc := range []struct {
		name    string
		options map[string]any
		want    string
	}{
		{"the cheapest without caps", nil, cheapSlow.ID},
		{"a latency cap only the fast one meets", map[string]any{"max_ttft_ms": 200}, dearFast.ID},
		{"a price cap both meet", map[string]any{"max_price_per_mtok": "0.25"}, cheapSlow.ID},
		{"a price cap as a number", map[string]any{"max_price_per_mtok": 0.1}, cheapSlow.ID},
		{"both caps, met by the fast one", map[string]any{"max_ttft_ms": 150, "max_price_per_mtok": "0.2"}, dearFast.ID},
		{"a pinned offering", map[string]any{"offering": dearFast.ID}, dearFast.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []option.RequestOption
			if tc.options != nil {
				opts = append(opts, option.WithJSONSet("gpumarket", tc.options))
			}
			var res *http.Response
			if _, err := client.Chat.Completions.New(b.ctx, chatParams(model, 4), append(opts, option.WithResponseInto(&res))...); err != nil {
				t.Fatal(err)
			}
			if _, offering, _ := headersOf(t, res); offering != tc.want {
				t.Fatalf("served by %s, want %s", offering, tc.want)
			}
		})
	}
	t.Run("caps nothing meets: 503", func(t *testing.T) {
		_, err := client.Chat.Completions.New(b.ctx, chatParams(model, 4),
			option.WithJSONSet("gpumarket", map[string]any{"max_ttft_ms": 50}))
		apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_offering_under_caps")
		_, err = client.Chat.Completions.New(b.ctx, chatParams(model, 4),
			option.WithJSONSet("gpumarket", map[string]any{"max_price_per_mtok": "0.05"}))
		apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_offering_under_caps")
	})
}

func (b *gatewayBundle) testFailover(t *testing.T) {
	const model = "gw-failover"
	failing := b.list(t, rigSpec{model: model, ask: 50_000, p99: 300, failRate: 1})
	healthy := b.list(t, rigSpec{model: model, ask: 150_000, p99: 300})
	dev, _, secret := b.developer(t, "failover", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	client := b.client(secret)

	var res *http.Response
	chat, err := client.Chat.Completions.New(b.ctx, chatParams(model, 8), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	id, offering, _ := headersOf(t, res)
	if offering != healthy.ID {
		t.Fatalf("served by %s, want the healthy %s after the cheaper one failed", offering, healthy.ID)
	}
	// Streamed too: the failure comes before the first byte, so the stream starts on the next.
	stream := client.Chat.Completions.NewStreaming(b.ctx, chatParams(model, 8), option.WithResponseInto(&res))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	streamID, streamOffering, _ := headersOf(t, res)
	if streamOffering != healthy.ID {
		t.Fatalf("stream served by %s, want %s", streamOffering, healthy.ID)
	}

	// Each attempt had its own request id: the failed ones are metered as errors for nothing,
	// the answered ones as what they produced.
	m := b.metered(t, id)
	if m.offering != healthy.ID || m.status != "ok" || m.output != chat.Usage.CompletionTokens {
		t.Fatalf("the answered request metered as %+v", m)
	}
	b.metered(t, streamID)
	b.flushRequestLog(t)
	rows, err := b.p.pool.Query(b.ctx, `SELECT g.request_id, g.http_status, u.status, u.charge_pico::bigint
		FROM gateway_requests g JOIN accounts a ON a.id = g.account_id LEFT JOIN usage_events u USING (request_id)
		WHERE g.account_id = $1 AND g.offering_id = $2 AND g.status = 'failed_over'`, dev.AccountID, failing.ID)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for rows.Next() {
		var reqID string
		var code int
		var status *string
		var charge *int64
		if err := rows.Scan(&reqID, &code, &status, &charge); err != nil {
			t.Fatal(err)
		}
		if code != http.StatusInternalServerError || reqID == id || reqID == streamID {
			t.Errorf("failed attempt %s recorded with status %d", reqID, code)
		}
		failed++
	}
	if rows.Err() != nil || failed != 2 {
		t.Fatalf("%d failed attempts recorded, want 2 (%v)", failed, rows.Err())
	}
	end := b.metered(t, streamID).charge + m.charge
	b.eventually(t, "the failed attempts are metered for nothing", func() bool {
		var n int
		var charged int64
		_ = b.p.pool.QueryRow(b.ctx, `SELECT count(*), coalesce(sum(charge_pico), 0)::bigint FROM usage_events
			WHERE account_id = $1 AND offering_id = $2`, dev.AccountID, failing.ID).Scan(&n, &charged)
		return n == 2 && charged == 0
	})
	if got := b.balance(t, dev.AccountID); got != start-end {
		t.Fatalf("balance %s, want %s: only the answered requests are charged", got, start-end)
	}
}

func (b *gatewayBundle) testNoCandidate(t *testing.T) {
	// An offering qualified once whose rig has not beaten since: routing knows it, and cannot send it anything.
	dark, err := b.p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: "gw-dark", AskInput: 50_000, AskOutput: 100_000, ClaimedTTFTP99Ms: ptr(300.0)})
	if err != nil {
		t.Fatal(err)
	}
	b.qualify(t, dark)
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	_, _, secret := b.developer(t, "nocandidate", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	var res *http.Response
	_, err = client.Chat.Completions.New(b.ctx, chatParams("gw-dark", 4), option.WithResponseInto(&res))
	apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_capacity")
	if res.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	_, err = client.Chat.Completions.New(b.ctx, chatParams("gw-dark:realtime", 4))
	apiError(t, err, http.StatusServiceUnavailable, "server_error", "tier_not_offered")
	_, err = client.Chat.Completions.New(b.ctx, chatParams("gw-no-such-model", 4))
	e := apiError(t, err, http.StatusNotFound, "invalid_request_error", "model_not_found")
	if e.Param != "model" {
		t.Errorf("param %q, want model", e.Param)
	}
	_, err = client.Chat.Completions.New(b.ctx, chatParams("gw-dark", 4),
		option.WithJSONSet("gpumarket", map[string]any{"offering": "00000000-0000-4000-8000-000000000000"}))
	apiError(t, err, http.StatusNotFound, "invalid_request_error", "offering_not_found")
}

func ptr[T any](v T) *T { return &v }

func (b *gatewayBundle) testBadKey(t *testing.T) {
	b.list(t, rigSpec{model: "gw-keys", ask: 100_000, p99: 300})
	for name, secret := range map[string]string{"made up": "gm_notakey", "not ours": "sk-proj-abc"} {
		t.Run(name, func(t *testing.T) {
			_, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams("gw-keys", 4))
			apiError(t, err, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key")
		})
	}
	t.Run("none", func(t *testing.T) {
		res, err := http.Post(b.p.URL()+"/v1/chat/completions", "application/json", strings.NewReader(`{"model": "gw-keys"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e openAIErrorJSON
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil || res.StatusCode != http.StatusUnauthorized ||
			e.Error.Code == nil || *e.Error.Code != "invalid_api_key" {
			t.Fatalf("no key: %d %+v %v", res.StatusCode, e.Error, err)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		dev, key, secret := b.developer(t, "revoked", 20*money.PicoPerUSD, accounts.NewKeyInput{})
		if err := b.p.accounts.RevokeKey(b.ctx, dev.AccountID, key.ID); err != nil {
			t.Fatal(err)
		}
		_, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams("gw-keys", 4))
		apiError(t, err, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key")
	})
	t.Run("a session token is not an API key", func(t *testing.T) {
		api := &apiClient{t: t, base: b.p.URL()}
		token := api.login("developer@example.com")
		_, err := b.client(token).Models.List(b.ctx)
		apiError(t, err, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key")
	})
	t.Run("last use is recorded", func(t *testing.T) {
		dev, key, secret := b.developer(t, "lastuse", 20*money.PicoPerUSD, accounts.NewKeyInput{})
		if _, err := b.client(secret).Models.List(b.ctx); err != nil {
			t.Fatal(err)
		}
		b.eventually(t, "the key's last use is written", func() bool {
			keys, err := b.p.accounts.Keys(b.ctx, dev.AccountID)
			return err == nil && len(keys) == 1 && keys[0].ID == key.ID && keys[0].LastUsedAt != nil
		})
	})
}

func (b *gatewayBundle) testQuota(t *testing.T) {
	const model = "gw-quota"
	b.list(t, rigSpec{model: model, ask: 100_000, p99: 300})

	t.Run("no credit", func(t *testing.T) {
		_, _, secret := b.developer(t, "broke", 0, accounts.NewKeyInput{})
		_, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams(model, 4))
		apiError(t, err, http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota")
	})

	t.Run("credit spent by requests", func(t *testing.T) {
		// A few microdollars of credit: the first request is admitted and overdraws it by less
		// than its own reservation; the next is refused before the meter has even caught up.
		dev, _, secret := b.developer(t, "spent", 5_000_000, accounts.NewKeyInput{})
		client := b.client(secret)
		var res *http.Response
		if _, err := client.Chat.Completions.New(b.ctx, chatParams(model, 64), option.WithResponseInto(&res)); err != nil {
			t.Fatal(err)
		}
		id, _, _ := headersOf(t, res)
		_, err := client.Chat.Completions.New(b.ctx, chatParams(model, 4))
		apiError(t, err, http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota")
		m := b.metered(t, id)
		if got := b.balance(t, dev.AccountID); got != 5_000_000-m.charge || got >= 0 {
			t.Fatalf("balance %s after a request costing %s", got, m.charge)
		}
		// The overdraft is bounded by the one request's reservation: its full cost, max_tokens set.
		if bound := b.price(t, "standard", 1<<20, 64); -b.balance(t, dev.AccountID) > bound {
			t.Fatalf("overdraft %s beyond the reservation %s", -b.balance(t, dev.AccountID), bound)
		}
		_, err = client.Chat.Completions.New(b.ctx, chatParams(model, 4))
		apiError(t, err, http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota")
	})

	t.Run("the key's monthly limit", func(t *testing.T) {
		limit := money.Pico(1_000_000) // a millionth of a dollar: one request goes over it
		dev, _, limited := b.developer(t, "limited", 20*money.PicoPerUSD, accounts.NewKeyInput{Limit: &limit})
		_, other := b.key(t, dev, accounts.NewKeyInput{Name: "no limit"})
		var res *http.Response
		if _, err := b.client(limited).Chat.Completions.New(b.ctx, chatParams(model, 8), option.WithResponseInto(&res)); err != nil {
			t.Fatal(err)
		}
		id, _, _ := headersOf(t, res)
		_, err := b.client(limited).Chat.Completions.New(b.ctx, chatParams(model, 8))
		e := apiError(t, err, http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota")
		if !strings.Contains(e.Message, "monthly spending limit") {
			t.Errorf("message %q", e.Message)
		}
		// Once metered, the key's spend this month keeps it refused; the account's other key
		// still works.
		b.metered(t, id)
		time.Sleep(2 * admission.DefaultBalanceTTL)
		_, err = b.client(limited).Chat.Completions.New(b.ctx, chatParams(model, 8))
		apiError(t, err, http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota")
		if _, err := b.client(other).Chat.Completions.New(b.ctx, chatParams(model, 8)); err != nil {
			t.Fatalf("the account's key without a limit: %v", err)
		}
	})
}

func (b *gatewayBundle) testRateLimit(t *testing.T) {
	_, _, secret := b.developer(t, "ratelimited", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	limited := 0
	var last *openai.Error
	for range 2 * 100 {
		var res *http.Response
		_, err := client.Models.List(b.ctx, option.WithResponseInto(&res))
		if err == nil {
			continue
		}
		last = apiError(t, err, http.StatusTooManyRequests, "requests", "rate_limit_exceeded")
		if ra := res.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("429 with Retry-After %q", ra)
		}
		limited++
	}
	// A burst of 100 and 50 more a second: 200 calls in well under two seconds meet the limit.
	if limited == 0 || limited > 100 {
		t.Fatalf("%d of 200 calls limited", limited)
	}
	t.Logf("%d of 200 calls limited: %s", limited, last.Message)
}

func (b *gatewayBundle) testBadRequests(t *testing.T) {
	b.list(t, rigSpec{model: "gw-bad", ask: 100_000, p99: 300})
	_, _, secret := b.developer(t, "bad", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	post := func(body string, header ...string) (int, openAIErrorJSON) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, b.p.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e openAIErrorJSON
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
			t.Fatalf("decode the error: %v", err)
		}
		return res.StatusCode, e
	}
	big := `{"model": "gw-bad", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 1<<20) + `"}]}`
	for _, tc := range []struct {
		name, body string
		header     []string
		code       string
	}{
		{"not JSON", `{"model": "gw-bad", `, nil, "invalid_json"},
		{"not an object", `["gw-bad"]`, nil, "invalid_json"},
		{"over 1 MiB", big, nil, "request_too_large"},
		{"a tier header that is none", `{"model": "gw-bad", "messages": []}`, []string{"X-GPUMarket-Tier", "fastest"}, "invalid_tier"},
		{"a body tier that is none", `{"model": "gw-bad", "messages": [], "gpumarket": {"tier": "gold"}}`, nil, "invalid_tier"},
		{"an unknown gpumarket option", `{"model": "gw-bad", "messages": [], "gpumarket": {"cheapest": true}}`, nil, "invalid_gpumarket_options"},
		{"a price cap that is no price", `{"model": "gw-bad", "messages": [], "gpumarket": {"max_price_per_mtok": "cheap"}}`, nil, "invalid_price"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, e := post(tc.body, tc.header...)
			if status != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Code == nil || *e.Error.Code != tc.code {
				t.Fatalf("status %d, error %+v; want 400 invalid_request_error %s", status, e.Error, tc.code)
			}
		})
	}
	t.Run("no model", func(t *testing.T) {
		status, e := post(`{"messages": []}`)
		if status != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != "model" {
			t.Fatalf("status %d, error %+v", status, e.Error)
		}
	})
}

// openAIErrorJSON is OpenAI's error shape.
type openAIErrorJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (b *gatewayBundle) testDisconnect(t *testing.T) {
	// A rig as slow as 2x H100 serving a 70B model: about 100 ms to the first token, 50 ms a
	// token after it.
	profile, ok := simulation.Lookup("meta-llama/Meta-Llama-3-70B-Instruct", "h100-pcie", 2)
	if !ok {
		t.Fatal("no profile for the slow rig")
	}
	o := b.list(t, rigSpec{model: "gw-slow", gpu: "h100-pcie", count: 2, ask: 100_000, p99: 400, profile: profile})
	dev, _, secret := b.developer(t, "disconnect", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	client := b.client(secret)

	t.Run("mid-stream: billed for what was produced", func(t *testing.T) {
		ctx, cancel := context.WithCancel(b.ctx)
		defer cancel()
		var res *http.Response
		stream := client.Chat.Completions.NewStreaming(ctx, chatParams("gw-slow", 400), option.WithResponseInto(&res))
		received := 0
		for received < 3 && stream.Next() {
			if c := stream.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				received++
			}
		}
		cancel()
		_ = stream.Close()
		id, offering, _ := headersOf(t, res)
		if received != 3 || offering != o.ID {
			t.Fatalf("received %d chunks from %s", received, offering)
		}
		m := b.metered(t, id)
		// The rig stopped soon after the client left: well short of the 400 tokens asked for.
		if m.status != "canceled" || m.output < 3 || m.output > 100 || m.charge != b.price(t, "standard", m.input, m.output) {
			t.Fatalf("metered %+v after the client left at 3 chunks", m)
		}
		b.flushRequestLog(t)
		var status string
		if err := b.p.pool.QueryRow(b.ctx, `SELECT status FROM gateway_requests WHERE request_id = $1`, id).Scan(&status); err != nil || status != "canceled" {
			t.Fatalf("the gateway recorded %q, %v", status, err)
		}
	})

	t.Run("before the first token: nothing billed", func(t *testing.T) {
		// The first token comes after about 100 ms, and with it the response's headers: the
		// client leaves before.
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Millisecond)
		defer cancel()
		if _, err := client.Chat.Completions.New(ctx, chatParams("gw-slow", 50)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a request left before its first token: %v", err)
		}
		var id string
		b.eventually(t, "the gateway records the request the client left", func() bool {
			b.flushRequestLog(t)
			err := b.p.pool.QueryRow(b.ctx, `SELECT request_id FROM gateway_requests
				WHERE account_id = $1 AND status = 'canceled' AND http_status = 499`, dev.AccountID).Scan(&id)
			return err == nil
		})
		m := b.metered(t, id)
		if m.status != "canceled" || m.output != 0 || m.charge != 0 {
			t.Fatalf("metered %+v for a request left before its first token", m)
		}
	})

	var charged money.Pico
	if err := b.p.pool.QueryRow(b.ctx, `SELECT coalesce(sum(charge_pico), 0)::bigint FROM usage_events WHERE account_id = $1`,
		dev.AccountID).Scan(&charged); err != nil {
		t.Fatal(err)
	}
	if got := b.balance(t, dev.AccountID); got != start-charged || charged <= 0 {
		t.Fatalf("balance %s, want %s less %s", got, start, charged)
	}
}

// testMeasuredLatency: two offerings at the same ask. The slow one claims to be the faster
// (50 ms to the first token against 150 ms), so it gets the first requests; once the gateway
// has measured it (about 200 ms), routing sends the requests to the other
// (docs/failure-cases.md, cases 15 and 16): on measured time to first token, not on claims,
// nor on errors, of which there are none.
func (b *gatewayBundle) testMeasuredLatency(t *testing.T) {
	profile, ok := simulation.Lookup("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "rtx-4090", 2)
	if !ok {
		t.Fatal("no profile for the slow rig")
	}
	slow := b.list(t, rigSpec{model: "gw-measured", ask: 100_000, p99: 100, profile: profile})
	fast := b.list(t, rigSpec{model: "gw-measured", ask: 100_000, p99: 300})
	_, _, secret := b.developer(t, "measured", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	var order []string
	for range 80 {
		// Streamed: only a streamed answer's first token is a time to first token the gateway measures.
		var res *http.Response
		stream := client.Chat.Completions.NewStreaming(b.ctx, chatParams("gw-measured", 1), option.WithResponseInto(&res))
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		_, offering, _ := headersOf(t, res)
		order = append(order, map[string]string{slow.ID: "slow", fast.ID: "fast"}[offering])
	}
	if order[0] != "slow" || slices.Contains(order[40:], "slow") {
		t.Fatalf("served by %v: want the slow one first, on its claim, and none of the last 40 once measured", order)
	}
	b.pause(t, slow) // demoted, it would be probed through the later subtests
}

// pause takes the offering out of routing, and so out of the gateway's probes.
func (b *gatewayBundle) pause(t *testing.T, o catalog.Offering) {
	t.Helper()
	if _, err := b.p.pool.Exec(b.ctx, `UPDATE offerings SET status = 'paused' WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
}

// A slow spell the gateways measured demotes a realtime offering; the gateway then probes it, as the platform's own
// customer: one-token streamed requests through its agent, in its live tier, recorded with their time to first
// token and metered to the probe account. (Promotion once the probes fill the window: routing's
// TestDemotedOfferingIsProbedBackIntoItsTier.)
func (b *gatewayBundle) testProbes(t *testing.T) {
	o := b.list(t, rigSpec{model: "gw-probed", ask: 100_000, p99: 40})
	if o.Tier != catalog.TierRealtime {
		t.Fatalf("listed in %s; want realtime by its 40 ms claim", o.Tier)
	}
	now := time.Now()
	for i := range 150 {
		b.p.router.Observe(o.ID, routing.Observation{RequestID: fmt.Sprintf("slow-%s-%d", o.ID, i), At: now,
			TTFT: 900 * time.Millisecond, Streamed: true, Duration: time.Second, InputTokens: 10, OutputTokens: 10, Status: usageevent.StatusOK})
	}
	if err := b.p.router.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
	var tier string
	if err := b.p.pool.QueryRow(b.ctx, `SELECT tier FROM offerings WHERE id = $1`, o.ID).Scan(&tier); err != nil {
		t.Fatal(err)
	}
	if tier == string(catalog.TierRealtime) {
		t.Fatalf("still realtime after a measured P99 of 900 ms")
	}
	var requestID, account, probeTier string
	var ttft float64
	b.eventually(t, "a probe reaches the demoted offering", func() bool {
		return b.p.pool.QueryRow(b.ctx, `SELECT g.request_id, a.name, g.tier, g.ttft_ms FROM gateway_requests g
			JOIN accounts a ON a.id = g.account_id
			WHERE g.offering_id = $1 AND g.streamed AND g.status = 'ok' AND g.ttft_ms IS NOT NULL LIMIT 1`, o.ID).
			Scan(&requestID, &account, &probeTier, &ttft) == nil
	})
	if account != "GPUMarket probes" || probeTier != tier || ttft <= 0 {
		t.Fatalf("probe %s by %q in %s, %g ms to its first token; want the probe account's, in the live tier %s", requestID, account, probeTier, ttft, tier)
	}
	m := b.metered(t, requestID)
	if m.offering != o.ID || m.tier != tier || m.output != 1 || m.charge <= 0 {
		t.Fatalf("probe metered as %+v; want one output token on %s in %s, charged to the probe account", m, o.ID, tier)
	}
	b.pause(t, o) // no more probes through the later subtests

	// The platform pays its probes: the probe account's credit, taken below zero by their cost,
	// is brought back to exactly zero from platform revenue.
	cr := credits.NewCredits(b.p.pool, ledger.NewLedger(b.p.pool, nil), nil, nil).RecordTo(b.p.audit)
	if err := fundProbesOnce(b.ctx, b.p.accounts, cr); err != nil {
		t.Fatal(err)
	}
	var before, after, amount int64
	var n int
	if err := b.p.pool.QueryRow(b.ctx, `SELECT (array_agg((before->>'balance_pico')::bigint ORDER BY l.id DESC))[1],
		(array_agg((after->>'balance_pico')::bigint ORDER BY l.id DESC))[1], (array_agg((after->>'amount_pico')::bigint ORDER BY l.id DESC))[1], count(*)
		FROM audit_log l JOIN accounts a ON a.id::text = l.subject_id
		WHERE l.action = 'adjustment' AND a.name = 'GPUMarket probes'`).Scan(&before, &after, &amount, &n); err != nil {
		t.Fatal(err)
	}
	// The platform's own round (fundProbes, every minute) may have paid some of them first.
	if n < 1 || before >= 0 || after != 0 || amount != -before {
		t.Fatalf("probe funding: %d adjustments, the last from a balance of %d pico to %d, paying %d; want the probes paid back to zero",
			n, before, after, amount)
	}
}

func (b *gatewayBundle) flushRequestLog(t *testing.T) {
	t.Helper()
	if err := b.p.requestLog.Flush(b.ctx); err != nil {
		t.Fatal(err)
	}
}

// awaitRecords writes the gateway's records of the given requests, waiting for each to be taken:
// the gateway records an attempt once its answer is on its way to the client, so a client that
// has read the answer can be a moment ahead of the record (docs/gateway.md, "The hop to the rig").
func (b *gatewayBundle) awaitRecords(t *testing.T, requestIDs ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.flushRequestLog(t)
		var found int
		if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FROM gateway_requests WHERE request_id = ANY($1)`,
			requestIDs).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if found == len(requestIDs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway recorded %d of the requests %v after 10 s", found, requestIDs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *gatewayBundle) testReconciliation(t *testing.T) {
	o := b.list(t, rigSpec{model: "gw-reconcile", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "reconcile", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	var ids []string
	for i := range 4 {
		var res *http.Response
		if i%2 == 0 {
			if _, err := client.Chat.Completions.New(b.ctx, chatParams("gw-reconcile", 6), option.WithResponseInto(&res)); err != nil {
				t.Fatal(err)
			}
		} else {
			stream := client.Chat.Completions.NewStreaming(b.ctx, chatParams("gw-reconcile", 6), option.WithResponseInto(&res))
			for stream.Next() {
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
		}
		id, _, _ := headersOf(t, res)
		ids = append(ids, id)
		b.metered(t, id)
	}
	b.flushRequestLog(t)

	// The gateway saw every request's usage, streamed ones too, and it matches the meter.
	for _, id := range ids {
		var in, out *int64
		if err := b.p.pool.QueryRow(b.ctx, `SELECT input_tokens, output_tokens FROM gateway_requests WHERE request_id = $1`, id).Scan(&in, &out); err != nil {
			t.Fatal(err)
		}
		if in == nil || out == nil || *out != 6 {
			t.Fatalf("%s: the gateway saw %v in, %v out", id, in, out)
		}
	}
	// A rig that bills more than its response reported: its agent's count is changed here.
	if _, err := b.p.pool.Exec(b.ctx, `UPDATE usage_events SET output_tokens = output_tokens + 10 WHERE request_id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	res, err := b.p.requestLog.Reconcile(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Flagged != 1 || res.Matched < len(ids) {
		t.Fatalf("reconciliation %+v, want the one tampered request flagged among %d", res, len(ids))
	}
	if again, err := b.p.requestLog.Reconcile(b.ctx); err != nil || again.Matched != 0 {
		t.Fatalf("a second reconciliation %+v, %v: each record is reconciled once", again, err)
	}

	// Each request, by the id in its response header, is on the usage page with its cost
	// (docs/failure-cases.md, case 17).
	api := &apiClient{t: t, base: b.p.URL()}
	token := api.login(dev.Email)
	var usage struct {
		Requests []struct {
			RequestID  string     `json:"request_id"`
			OfferingID string     `json:"offering_id"`
			Cost       money.Pico `json:"cost_pico"`
		} `json:"requests"`
	}
	api.do(token, http.MethodGet, "/api/usage?limit=100", nil, &usage, http.StatusOK)
	found := map[string]bool{}
	for _, u := range usage.Requests {
		if u.OfferingID == o.ID && u.Cost > 0 {
			found[u.RequestID] = true
		}
	}
	for _, id := range ids {
		if !found[id] {
			t.Errorf("request %s is not on the usage page with its cost", id)
		}
	}

	// The admin sees the flagged request, in the API and on the page.
	admin := api.login("admin@example.com")
	var list struct {
		Discrepancies []requestlog.Discrepancy `json:"discrepancies"`
	}
	api.do(admin, http.MethodGet, "/api/admin/discrepancies", nil, &list, http.StatusOK)
	// Other subtests' accounts have flags of their own (a stream the client left is billed within what was relayed,
	// and flagged): this one's are its account's.
	all := len(list.Discrepancies)
	list.Discrepancies = slices.DeleteFunc(list.Discrepancies, func(d requestlog.Discrepancy) bool { return d.AccountID != dev.AccountID })
	if len(list.Discrepancies) != 1 || list.Discrepancies[0].RequestID != ids[1] ||
		*list.Discrepancies[0].OutputTokens != 6 || *list.Discrepancies[0].MeteredOutput != 16 ||
		!strings.Contains(list.Discrepancies[0].Reason, "output tokens") {
		t.Fatalf("discrepancies %+v", list.Discrepancies)
	}
	api.do(token, http.MethodGet, "/api/admin/discrepancies", nil, nil, http.StatusForbidden)
	req, _ := http.NewRequest(http.MethodGet, b.p.URL()+"/admin/discrepancies", nil)
	req.AddCookie(&http.Cookie{Name: "gpumarket_session", Value: admin})
	page, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	html, _ := io.ReadAll(page.Body)
	if page.StatusCode != http.StatusOK || !bytes.Contains(html, []byte(ids[1])) || bytes.Count(html, []byte(`data-testid="discrepancy"`)) != all {
		t.Fatalf("discrepancies page: %d\n%.2000s", page.StatusCode, html)
	}
}

func (b *gatewayBundle) testModels(t *testing.T) {
	_, _, secret := b.developer(t, "models", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	page, err := b.client(secret).Models.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range page.Data {
		ids[m.ID] = true
	}
	// gw-tiers is offered in every tier (testTierChoice listed it); gw-metered only in standard.
	for _, want := range []string{"gw-tiers", "gw-tiers:realtime", "gw-tiers:standard", "gw-tiers:batch", "gw-metered", "gw-metered:standard"} {
		if !ids[want] {
			t.Errorf("GET /v1/models lacks %s", want)
		}
	}
	if ids["gw-metered:realtime"] {
		t.Error("GET /v1/models lists a tier the model is not offered in")
	}
	// The raw answer names each model's tiers.
	res, err := http.NewRequest(http.MethodGet, b.p.URL()+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Set("Authorization", "Bearer "+secret)
	raw, err := http.DefaultClient.Do(res)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string   `json:"id"`
			Tiers   []string `json:"tiers"`
			Pricing struct {
				Prompt     string `json:"prompt"`
				Completion string `json:"completion"`
			} `json:"pricing"`
		} `json:"data"`
	}
	if err := json.NewDecoder(bufio.NewReader(raw.Body)).Decode(&list); err != nil || list.Object != "list" {
		t.Fatalf("models list: %v %+v", err, list)
	}
	// Each entry carries, as OpenRouter does, dollars per token: the tier's price per million over a million.
	perToken := map[string]string{"gw-tiers:batch": "0.00000008 0.00000016", "gw-tiers:realtime": "0.0000003 0.0000006",
		"gw-tiers": "0.00000015 0.0000003"}
	for _, m := range list.Data {
		if m.ID == "gw-tiers" && fmt.Sprint(m.Tiers) != "[realtime standard batch]" {
			t.Errorf("gw-tiers offered in %v", m.Tiers)
		}
		if want, ok := perToken[m.ID]; ok && m.Pricing.Prompt+" "+m.Pricing.Completion != want {
			t.Errorf("%s pricing %+v, want %s", m.ID, m.Pricing, want)
		}
	}
}
