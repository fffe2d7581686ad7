package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// testStreamHeadersFirst: a stream's status and headers reach the customer as soon as the inference server sent
// them, through the agent and the gateway, before the first token.
func (b *gatewayBundle) testStreamHeadersFirst(t *testing.T) {
	release := make(chan struct{})
	backend := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		select {
		case <-release:
		case <-time.After(3 * time.Second):
		case <-req.Context().Done():
			return
		}
		for _, f := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gw-headers","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gw-headers","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			`[DONE]`,
		} {
			_, _ = w.Write([]byte("data: " + f + "\n\n"))
			_ = rc.Flush()
		}
	})
	o := b.listWithBackend(t, "gw-headers", backend)
	_, _, secret := b.developer(t, "headers", 20*money.PicoPerUSD, accounts.NewKeyInput{})

	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.p.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gw-headers","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	type answer struct {
		res *http.Response
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		got <- answer{res, err}
	}()
	var res *http.Response
	select {
	case a := <-got:
		if a.err != nil {
			t.Fatal(a.err)
		}
		res = a.res
	case <-time.After(2 * time.Second):
		close(release)
		t.Fatal("no response headers through the gateway while the inference server holds its first token back")
	}
	defer res.Body.Close()
	if _, offering, _ := headersOf(t, res); res.StatusCode != http.StatusOK || offering != o.ID {
		t.Fatalf("status %d from %s; want 200 from %s", res.StatusCode, offering, o.ID)
	}
	close(release)
	first, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.Contains(first, `"content":"Hi"`) {
		t.Fatalf("first line %q (%v); want the first token's frame", first, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
}

// listWithBackend lists an offering of model served by an agent in front of backend, and waits until routing can
// send it requests.
func (b *gatewayBundle) listWithBackend(t *testing.T, model string, backend http.Handler) catalog.Offering {
	t.Helper()
	o := b.listPending(t, model)
	b.qualify(t, o)
	rig := b.runAgent(t, o, backend)
	t.Cleanup(rig.stop)
	b.eventually(t, "the rig's heartbeat reaches routing", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: model, Tier: o.Tier, Offering: o.ID})
		return err == nil
	})
	return o
}

// listPending lists an offering of model in the standard tier, its rig pending: it has to qualify. Routing
// knows it at once.
func (b *gatewayBundle) listPending(t *testing.T, model string) catalog.Offering {
	t.Helper()
	p50, p99, tps := 150.0, 300.0, 1000.0
	o, err := b.p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: model, AskInput: 50_000, AskOutput: 100_000, ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99,
		ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	return o
}

// runAgent runs the offering's agent in front of backend, with the rig's own NATS credential, and points the
// offering at it; stop ends it (the caller's to call).
func (b *gatewayBundle) runAgent(t *testing.T, o catalog.Offering, backend http.Handler) *simulatedRig {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: backend, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	a, err := agent.New(agent.Config{
		Upstream:   "http://" + l.Addr().String(),
		ProviderID: b.provider, OfferingID: o.ID, GPUSKU: o.GPU, GPUCount: o.GPUCount, Capacity: 64,
		NATSURL: b.p.natsURL, NATSUser: events.RigUsername(o.ID), NATSPassword: events.RigPassword(b.p.cfg.RigKey, o.ID),
		OutboxDir: t.TempDir(), OfferingKey: ticket.OfferingKey(b.p.cfg.TicketKey, o.ID),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	rig := &simulatedRig{offeringID: o.ID, backend: srv, agent: a, cancel: cancel}
	rig.running.Go(func() { _ = a.Run(ctx) })
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	return rig
}
