package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// testMeteredFeed: what a rig reports of its requests reaches this gateway's routing through the meter's feed, in
// the rig's reported figures and never in the measured ones: a request the gateway did not route (sent straight to
// the rig) is reported but not measured, and one the gateway routed is measured once and reported once.
func (b *gatewayBundle) testMeteredFeed(t *testing.T) {
	o := b.list(t, rigSpec{model: "gw-feed", ask: 100_000, p99: 300})
	dev, key, secret := b.developer(t, "feed", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	cands, err := b.p.router.Pick(routing.Request{Model: o.Model, Offering: o.ID})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ticket.NewSigner(b.p.cfg.TicketKey)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := func(requestID string) {
		t.Helper()
		// Routed by another gateway: a ticket with the terms and bounds it would have fixed, and its record of the
		// attempt, which the meter bills against.
		body := fmt.Sprintf(`{"model": %q, "max_tokens": 4, "stream": true, "messages": [{"role": "user", "content": "hi"}]}`, o.Model)
		c := cands[0]
		bounds := routing.BoundsFor(o.Model, len(body), ptr(int64(4)), 1, true)
		start := time.Now()
		tk, err := signer.Sign(ticket.Claims{RequestID: requestID, AccountID: dev.AccountID, APIKeyID: key.ID,
			OfferingID: o.ID, Tier: string(o.Tier), AskInput: int64(c.AskInput), AskOutput: int64(c.AskOutput),
			PriceID: c.PriceID, MaxInputTokens: bounds.MaxInputTokens, MaxOutputTokens: bounds.MaxOutputTokens, Stream: true,
			IssuedAt: start})
		if err != nil {
			t.Fatal(err)
		}
		res := callRig(t, b.p, o.ProviderAccountID, o.ID, tk, body)
		relayed, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("request %s straight to the rig: %d", requestID, res.StatusCode)
		}
		b.p.requestLog.Record(requestlog.GatewayRequest{RequestID: requestID, AccountID: dev.AccountID, APIKeyID: key.ID,
			OfferingID: o.ID, Tier: o.Tier, Model: o.Model, HTTPStatus: http.StatusOK, Status: requestlog.GatewayOK,
			Duration: time.Since(start), At: time.Now(), InputBytes: int64(len(body)), MaxInputTokens: bounds.MaxInputTokens,
			MaxOutputTokens: bounds.MaxOutputTokens, Streamed: true, RelayedOutputBytes: int64(len(relayed))})
		b.flushRequestLog(t)
		b.metered(t, requestID)
	}
	counts := func() (measured, reported int) {
		return b.p.router.Figures(o.ID).Requests, b.p.router.ReportedFigures(o.ID).Requests
	}
	elsewhere("req_feed_elsewhere_1")
	b.eventually(t, "the rig's report of a request the gateway did not route", func() bool { _, r := counts(); return r == 1 })
	if m, _ := counts(); m != 0 {
		t.Fatalf("%d requests measured; the rig's own report reached the gateway's figures", m)
	}

	// Streamed, as the requests the figures count are: a whole answer has no time to first token.
	var res *http.Response
	stream := b.client(secret).Chat.Completions.NewStreaming(b.ctx, chatParams(o.Model, 4), option.WithResponseInto(&res))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	id, _, _ := headersOf(t, res)
	b.metered(t, id)
	elsewhere("req_feed_elsewhere_2") // metered after the gateway's request: its feed message comes after
	b.eventually(t, "the rig's report of the second request", func() bool { _, r := counts(); return r >= 3 })
	time.Sleep(200 * time.Millisecond)
	if m, r := counts(); m != 1 || r != 3 {
		t.Fatalf("%d requests measured and %d reported; want the gateway's own measured once, all three reported once", m, r)
	}
}
