package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
	usageevent "github.com/gpumarket/gpumarket/services/usage"
)

// The attacks of a dishonest provider, against the whole platform: the provider runs an agent of its own, which
// holds the rig's NATS credential (and so may publish anything on its own usage subject) and answers the gateway
// however it likes; or it runs the stock agent in front of an upstream that lies. Each test checks what the
// customer paid and what the provider was owed, to the picodollar, and what the discrepancies page shows.

// dishonestRig is a provider's own agent: it answers the gateway with answer, keeps every route ticket it is
// handed, and publishes usage events on its rig's subject when, and as, the test says.
type dishonestRig struct {
	t        *testing.T
	offering catalog.Offering
	provider string
	js       jetstream.JetStream

	mu      sync.Mutex
	tickets []heldTicket
}

// heldTicket is a request the rig served, as it would report it later.
type heldTicket struct {
	raw    string
	claims ticket.Claims
	at     time.Time
}

// answer is how a dishonest rig answers one request.
type answer func(w http.ResponseWriter, r *http.Request)

// jsonAnswer answers a chat completion with text and, unless usage is nil, the usage it claims.
func jsonAnswer(text string, claimed *[2]int64) answer {
	return func(w http.ResponseWriter, r *http.Request) {
		resp := map[string]any{"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}}}
		if claimed != nil {
			resp["usage"] = map[string]int64{"prompt_tokens": claimed[0], "completion_tokens": claimed[1],
				"total_tokens": claimed[0] + claimed[1]}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	}
}

// startDishonestRig lists an offering of model for the demo provider, served by a dishonest agent that answers
// with ans, heartbeats with the rig's credential, and is routable when it returns.
func (b *gatewayBundle) startDishonestRig(t *testing.T, model string, ask money.MicroUSD, ans answer) *dishonestRig {
	t.Helper()
	o, fake := b.listFake(t, model, ask)
	verifier, err := ticket.NewOfferingVerifier(ticket.OfferingKey(b.p.cfg.TicketKey, o.ID), o.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := &dishonestRig{t: t, offering: o, provider: b.provider, js: fake.js}
	fake.use(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw := req.Header.Get(ticket.Header)
		c, err := verifier.Verify(raw, time.Now(), time.Hour) // with the offering's key, which its provider holds
		if err != nil {
			http.Error(w, "no ticket", http.StatusUnauthorized)
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.tickets = append(r.tickets, heldTicket{raw: raw, claims: c, at: time.Now()})
		r.mu.Unlock()
		ans(w, req)
	}))
	return r
}

// held returns the tickets the rig has been handed so far.
func (r *dishonestRig) held() []heldTicket {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]heldTicket(nil), r.tickets...)
}

// report publishes a usage event for a ticket the rig was handed, claiming in and out tokens.
func (r *dishonestRig) report(h heldTicket, in, out int64) {
	r.t.Helper()
	if err := r.tryReport(h, in, out); err != nil {
		r.t.Fatal(err)
	}
}

func (r *dishonestRig) tryReport(h heldTicket, in, out int64) error {
	at := h.at.Add(50 * time.Millisecond)
	ev := usageevent.NewEvent(services.NewTimeOrderedID("evt_", at), r.provider, r.offering.ID, at, usageevent.Usage{
		RequestID: h.claims.RequestID, Ticket: h.raw, OfferingID: r.offering.ID, Model: r.offering.Model,
		InputTokens: in, OutputTokens: out, TTFTMillis: 10, DurationMillis: 50, EnergyJoules: 1,
		EnergySource: usageevent.EnergyEstimated, Status: usageevent.StatusOK})
	body, err := usageevent.Encode(ev)
	if err != nil {
		return err
	}
	_, err = r.js.Publish(context.Background(), events.UsageSubject(r.provider, r.offering.ID), body, jetstream.WithMsgID(ev.ID))
	return err
}

// billed is a request's usage row as the meter wrote it.
type billed struct {
	input, output, reportedIn, reportedOut int64
	charge, payable                        money.Pico
	flag                                   string
}

func (b *gatewayBundle) billed(t *testing.T, requestID string) billed {
	t.Helper()
	var r billed
	b.eventually(t, "request "+requestID+" is metered", func() bool {
		return b.p.pool.QueryRow(b.ctx, `SELECT input_tokens, output_tokens, reported_input_tokens, reported_output_tokens,
			charge_pico::bigint, payable_pico::bigint, coalesce(flag, '') FROM usage_events WHERE request_id = $1`, requestID).
			Scan(&r.input, &r.output, &r.reportedIn, &r.reportedOut, &r.charge, &r.payable, &r.flag) == nil
	})
	return r
}

// terms prices tokens at a ticket's price version and asks: what the customer owes and the provider is owed.
func (b *gatewayBundle) terms(t *testing.T, c ticket.Claims, in, out int64) (charge, payable money.Pico) {
	t.Helper()
	var pin, pout int64
	if err := b.p.pool.QueryRow(b.ctx, `SELECT input_micro_usd_per_mtok, output_micro_usd_per_mtok FROM prices WHERE id = $1`,
		c.PriceID).Scan(&pin, &pout); err != nil {
		t.Fatal(err)
	}
	cost := func(in, out, pi, po int64) money.Pico {
		a, err1 := money.ChargeFor(in, money.MicroUSD(pi))
		z, err2 := money.ChargeFor(out, money.MicroUSD(po))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		return a + z
	}
	return cost(in, out, pin, pout), cost(in, out, c.AskInput, c.AskOutput)
}

// payableMatchesUsage checks that what the ledger owes a provider is, to the picodollar, what its usage rows say it
// earned: the meter posts both in one transaction, so no moment sees them apart.
func (b *gatewayBundle) payableMatchesUsage(t *testing.T, provider string) {
	t.Helper()
	var ledger, rows int64
	if err := b.p.pool.QueryRow(b.ctx, `SELECT
			coalesce((SELECT balance FROM ledger_accounts WHERE kind = 'provider_payable' AND owner_account_id = $1), 0)::bigint,
			coalesce((SELECT sum(payable_pico) FROM usage_events WHERE provider_account_id = $1), 0)::bigint`, provider).
		Scan(&ledger, &rows); err != nil {
		t.Fatal(err)
	}
	if ledger != rows {
		t.Fatalf("the ledger owes the provider %s; its usage rows earned %s", money.Pico(ledger), money.Pico(rows))
	}
}

// The provider raises its ask after serving and before its held events reach the meter: it is paid the ask of
// the ticket, never more than its customer paid, and the $2-per-token ask is refused outright.
func (b *gatewayBundle) testAskRaisedAfterServing(t *testing.T) {
	rig := b.startDishonestRig(t, "atk-ask", 30_000, jsonAnswer("one two three four", &[2]int64{40, 4}))
	dev, _, secret := b.developer(t, "askraise", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params, pin := pinned(rig.offering, 4)
	var res *http.Response
	if _, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin, option.WithResponseInto(&res)); err != nil {
		t.Fatal(err)
	}
	id, _, _ := headersOf(t, res)

	p50, p99 := 150.0, 300.0
	edit := catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: "atk-ask",
		ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, AskInput: 2_000_000_000_000, AskOutput: 2_000_000_000_000}
	if _, err := b.p.catalog.Update(b.ctx, b.provider, rig.offering.ID, edit); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("an ask of $2 per token was not refused: %v", err)
	}
	price := b.prices[catalog.TierStandard]
	edit.AskInput, edit.AskOutput = price.Input, price.Output // the most a listing may ask
	if _, err := b.p.catalog.Update(b.ctx, b.provider, rig.offering.ID, edit); err != nil {
		t.Fatal(err)
	}
	held := rig.held()
	if len(held) != 1 || held[0].claims.RequestID != id {
		t.Fatalf("the rig holds %d tickets", len(held))
	}
	rig.report(held[0], 40, 4)
	got := b.billed(t, id)
	charge, payable := b.terms(t, held[0].claims, 40, 4)
	if got.charge != charge || got.payable != payable || got.payable > got.charge {
		t.Fatalf("charged %s and owed %s; want %s and the ask of the ticket, %s", got.charge, got.payable, charge, payable)
	}
	if held[0].claims.AskInput != 20_000 || held[0].claims.AskOutput != 40_000 {
		t.Fatalf("the ticket fixed asks of %d and %d, want the listing's 20,000 and 40,000", held[0].claims.AskInput, held[0].claims.AskOutput)
	}
	if d := start - b.balance(t, dev.AccountID); d != charge {
		t.Fatalf("the customer paid %s, want %s", d, charge)
	}
	b.payableMatchesUsage(t, b.provider)
	t.Logf("a request routed at $0.02/$0.04 per million: the customer paid %s, the provider is owed %s (the raised ask would have paid %s)",
		charge, payable, mustCost(t, 40, 4, price.Input, price.Output))
}

func mustCost(t *testing.T, in, out int64, pin, pout money.MicroUSD) money.Pico {
	t.Helper()
	a, err1 := money.ChargeFor(in, pin)
	z, err2 := money.ChargeFor(out, pout)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return a + z
}

// A rig reports 10,000,000 + 10,000,000 tokens for a max_tokens: 1 request: the customer is charged for what the
// ticket bounded, and the excess is on the discrepancies page.
func (b *gatewayBundle) testTenMillionTokensForOne(t *testing.T) {
	rig := b.startDishonestRig(t, "atk-tenmillion", 60_000, jsonAnswer("yes", &[2]int64{10_000_000, 10_000_000}))
	dev, _, secret := b.developer(t, "tenmillion", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params, pin := pinned(rig.offering, 1)
	var res *http.Response
	if _, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin, option.WithResponseInto(&res)); err != nil {
		t.Fatal(err)
	}
	id, _, _ := headersOf(t, res)
	h := rig.held()[0]
	rig.report(h, 10_000_000, 10_000_000)
	got := b.billed(t, id)
	if got.input != h.claims.MaxInputTokens || got.output != 1 || got.reportedIn != 10_000_000 || got.reportedOut != 10_000_000 ||
		got.flag != "clipped" {
		t.Fatalf("billed %+v; want the input bound %d, one output token, flagged clipped", got, h.claims.MaxInputTokens)
	}
	charge, payable := b.terms(t, h.claims, got.input, 1)
	if got.charge != charge || got.payable != payable || start-b.balance(t, dev.AccountID) != charge {
		t.Fatalf("charged %s (owed %s), want %s (%s)", got.charge, got.payable, charge, payable)
	}
	unbounded, _ := b.terms(t, h.claims, 10_000_000, 10_000_000)
	if charge*1000 > unbounded {
		t.Fatalf("the bounded charge %s is not far below the claim's %s", charge, unbounded)
	}
	d := b.discrepancy(t, id)
	if d.MeterFlag != "clipped" || *d.ExcessOutput != 10_000_000-1 || *d.ExcessInput != 10_000_000-h.claims.MaxInputTokens {
		t.Fatalf("the discrepancies page shows %+v", d)
	}
	t.Logf("10M + 10M tokens claimed for max_tokens 1: charged %s instead of %s, excess %d / %d flagged",
		charge, unbounded, *d.ExcessInput, *d.ExcessOutput)
}

// discrepancy is the admin's entry for a request.
func (b *gatewayBundle) discrepancy(t *testing.T, requestID string) requestlog.Discrepancy {
	t.Helper()
	list, err := b.p.requestLog.Discrepancies(b.ctx, requestlog.DiscrepancyFilter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.RequestID == requestID {
			return d
		}
	}
	t.Fatalf("request %s is not on the discrepancies page", requestID)
	return requestlog.Discrepancy{}
}

// An attempt the rig answered 503 (the gateway failed over) is billed nothing, whatever the rig reports of it.
func (b *gatewayBundle) testFailedAttemptReported(t *testing.T) {
	const model = "atk-failed"
	failing := b.startDishonestRig(t, model, 30_000, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error": {"message": "busy"}}`)
	})
	healthy := b.list(t, rigSpec{model: model, ask: 150_000, p99: 300})
	dev, _, secret := b.developer(t, "failedattempt", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	var res *http.Response
	chat, err := b.client(secret).Chat.Completions.New(b.ctx, chatParams(model, 6), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	id, offering, _ := headersOf(t, res)
	if offering != healthy.ID {
		t.Fatalf("served by %s, want the healthy rig after the 503", offering)
	}
	h := failing.held()
	if len(h) != 1 {
		t.Fatalf("the failing rig was tried %d times, want once", len(h))
	}
	failing.report(h[0], 500, 500)
	got := b.billed(t, h[0].claims.RequestID)
	if got.charge != 0 || got.payable != 0 || got.flag != "failed_attempt" {
		t.Fatalf("the failed attempt billed %+v", got)
	}
	served := b.billed(t, id)
	if served.output != chat.Usage.CompletionTokens || start-b.balance(t, dev.AccountID) != served.charge {
		t.Fatalf("the customer paid %s; want only the served request's %s", start-b.balance(t, dev.AccountID), served.charge)
	}
}

// An answer whose usage the gateway never saw (none in the body) is billed for no more output than it relayed.
func (b *gatewayBundle) testUsageTheGatewayNeverSaw(t *testing.T) {
	rig := b.startDishonestRig(t, "atk-nousage", 30_000, jsonAnswer("ok", nil))
	dev, _, secret := b.developer(t, "nousage", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params, pin := pinned(rig.offering, 4096)
	var res *http.Response
	if _, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin, option.WithResponseInto(&res)); err != nil {
		t.Fatal(err)
	}
	id, _, _ := headersOf(t, res)
	h := rig.held()[0]
	rig.report(h, 30, 4000)
	b.awaitRecords(t, id)
	var relayed int64
	if err := b.p.pool.QueryRow(b.ctx, `SELECT relayed_output_bytes FROM gateway_requests WHERE request_id = $1`, id).Scan(&relayed); err != nil {
		t.Fatal(err)
	}
	got := b.billed(t, id)
	if want := relayed + 8; got.output != want || got.flag != "clipped" || relayed <= 0 || relayed > 400 {
		t.Fatalf("billed %d output tokens of 4000 claimed, flag %q; want the %d bytes relayed plus 8", got.output, got.flag, relayed)
	}
	charge, _ := b.terms(t, h.claims, 30, got.output)
	if got.charge != charge || start-b.balance(t, dev.AccountID) != charge {
		t.Fatalf("charged %s, want %s", got.charge, charge)
	}
}

// The stock agent in front of an upstream that claims 10,000,000 + 10,000,000 tokens for one: the agent reports
// what the upstream said, and the meter bills what the ticket bounded.
func (b *gatewayBundle) testLyingUpstreamBehindTheStockAgent(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		jsonAnswer("Sure", &[2]int64{10_000_000, 10_000_000})(w, r)
	}))
	t.Cleanup(upstream.Close)
	p50, p99, tps := 150.0, 300.0, 1000.0
	o, err := b.p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: "atk-upstream", AskInput: 20_000, AskOutput: 40_000,
		ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	b.qualify(t, o)
	a, err := agent.New(agent.Config{Upstream: upstream.URL, ProviderID: b.provider,
		OfferingID: o.ID, GPUSKU: "rtx-4090", GPUCount: 4, Capacity: 8, NATSURL: b.p.natsURL,
		NATSUser: events.RigUsername(o.ID), NATSPassword: events.RigPassword(b.p.cfg.RigKey, o.ID),
		OutboxDir: t.TempDir(), OfferingKey: ticket.OfferingKey(b.p.cfg.TicketKey, o.ID), Log: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.Run(b.ctx) }()
	t.Cleanup(func() { _ = a.Close() })
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eventually(t, "the rig is routable", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: o.Model, Tier: o.Tier, Offering: o.ID})
		return err == nil
	})
	dev, _, secret := b.developer(t, "upstream", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	params, pin := pinned(o, 1)
	var res *http.Response
	if _, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin, option.WithResponseInto(&res)); err != nil {
		t.Fatal(err)
	}
	id, _, _ := headersOf(t, res)
	got := b.billed(t, id)
	if got.reportedIn != 10_000_000 || got.reportedOut != 10_000_000 || got.output != 1 || got.input > 1024 || got.flag != "clipped" {
		t.Fatalf("billed %+v; want one output token and the input bound", got)
	}
	if paid := start - b.balance(t, dev.AccountID); paid != got.charge || paid > 10*money.PicoPerCent/100 {
		t.Fatalf("the customer paid %s for a one-token answer", paid)
	}
}

// Four rigs release 800 held, inflated events at once while a fifth rig's ordinary traffic goes on: the ordinary
// requests are metered within seconds, each inflated event is billed no more than its ticket bounded, and every
// cent the customers paid is what the providers were owed plus the platform's margin.
func (b *gatewayBundle) testBurstOfHeldEvents(t *testing.T) {
	const rigs, perRig = 4, 200
	var burst []*dishonestRig
	for i := range rigs {
		burst = append(burst, b.startDishonestRig(t, fmt.Sprintf("atk-burst-%d", i), 30_000, jsonAnswer("fine", &[2]int64{40, 4})))
	}
	honest := b.list(t, rigSpec{model: "atk-burst-honest", ask: 100_000, p99: 300})
	dev, _, secret := b.developer(t, "burst", 100*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)

	// 800 requests served, on 16 keys within their rate limit's burst; their events are held by the rigs.
	var wg sync.WaitGroup
	work := make(chan *dishonestRig)
	for range 16 {
		_, secret := b.key(t, dev, accounts.NewKeyInput{})
		wg.Go(func() {
			for r := range work {
				params, pin := pinned(r.offering, 4)
				if _, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range rigs * perRig {
		work <- burst[i%rigs]
	}
	close(work)
	wg.Wait()

	// Released at once, every one claiming ten million tokens each way.
	released := time.Now()
	for _, r := range burst {
		go func() {
			for _, h := range r.held() {
				if err := r.tryReport(h, 10_000_000, 10_000_000); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	// The honest rig's traffic meanwhile: each request metered within seconds of its answer.
	var slowest time.Duration
	for range 5 {
		var res *http.Response
		params, pin := pinned(honest, 4)
		if _, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin, option.WithResponseInto(&res)); err != nil {
			t.Fatal(err)
		}
		id, _, _ := headersOf(t, res)
		answered := time.Now()
		b.billed(t, id)
		slowest = max(slowest, time.Since(answered))
	}
	if slowest > 5*time.Second {
		t.Fatalf("an ordinary request took %v to be metered during the burst", slowest)
	}
	var inflated, charged, owed int64
	b.eventually(t, "the 800 inflated events are metered", func() bool {
		_ = b.p.pool.QueryRow(b.ctx, `SELECT count(*), coalesce(sum(charge_pico), 0)::bigint, coalesce(sum(payable_pico), 0)::bigint
			FROM usage_events WHERE account_id = $1 AND reported_output_tokens = 10000000`, dev.AccountID).Scan(&inflated, &charged, &owed)
		return inflated == rigs*perRig
	})
	drained := time.Since(released)
	var want, wantOwed money.Pico
	for _, r := range burst {
		for _, h := range r.held() {
			c, p := b.terms(t, h.claims, h.claims.MaxInputTokens, 4)
			want, wantOwed = want+c, wantOwed+p
		}
	}
	if money.Pico(charged) != want || money.Pico(owed) != wantOwed {
		t.Fatalf("the burst charged %s and owes %s; the bounds allow %s and %s", money.Pico(charged), money.Pico(owed), want, wantOwed)
	}
	var total int64
	if err := b.p.pool.QueryRow(b.ctx, `SELECT coalesce(sum(charge_pico), 0)::bigint FROM usage_events WHERE account_id = $1`,
		dev.AccountID).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if paid := start - b.balance(t, dev.AccountID); paid != money.Pico(total) {
		t.Fatalf("the customer's balance fell by %s; its usage rows charge %s", paid, money.Pico(total))
	}
	b.payableMatchesUsage(t, b.provider)
	t.Logf("800 held events of 10M + 10M tokens all metered %v after their release; the slowest of 5 ordinary requests meanwhile "+
		"was metered %v after its answer; the burst charged %s (owed %s), as the tickets bounded", drained, slowest, want, wantOwed)
}
