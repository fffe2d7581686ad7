package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/rigwire"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// fakeRig is a provider's own agent in place of the stock one: it connects to NATS with the rig's credential,
// heartbeats, and answers the gateway's calls over that connection (rigwire.Serve) with the handler the test
// gives it (use), as any program holding the credential could.
type fakeRig struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	handler atomic.Pointer[http.Handler]
}

// listFake lists an offering of model for the demo provider, served by a fake rig that is routable when it returns.
func (b *gatewayBundle) listFake(t *testing.T, model string, ask money.MicroUSD) (catalog.Offering, *fakeRig) {
	t.Helper()
	p50, p99, tps := 150.0, 300.0, 1000.0
	o, err := b.p.catalog.Create(b.ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: model, AskInput: 2 * ask / 3, AskOutput: 2*ask - 2*ask/3,
		ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	b.qualify(t, o)
	return o, b.startFakeRig(t, o)
}

// startFakeRig connects the offering's fake rig, serves and heartbeats until the test ends, and waits until
// routing can pick it.
func (b *gatewayBundle) startFakeRig(t *testing.T, o catalog.Offering) *fakeRig {
	t.Helper()
	f := &fakeRig{}
	var err error
	f.nc, err = nats.Connect(b.p.natsURL, nats.UserInfo(events.RigUsername(o.ID), events.RigPassword(b.p.cfg.RigKey, o.ID)),
		nats.CustomInboxPrefix(events.RigInboxPrefix(o.ProviderAccountID, o.ID)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.nc.Close)
	if f.js, err = jetstream.New(f.nc); err != nil {
		t.Fatal(err)
	}
	f.use(http.NotFoundHandler())
	ctx, stop := context.WithCancel(b.ctx)
	t.Cleanup(stop)
	srv, err := rigwire.Serve(ctx, f.nc, o.ProviderAccountID, o.ID, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*f.handler.Load()).ServeHTTP(w, r)
	}), rigwire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	beat := func() {
		hb, _ := json.Marshal(routing.Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID, Capacity: 64, At: time.Now()})
		_ = f.nc.Publish(events.HeartbeatSubject(o.ProviderAccountID, o.ID), hb)
	}
	beat()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				beat()
			}
		}
	}()
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eventually(t, "the fake rig is routable", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: o.Model, Tier: o.Tier, Offering: o.ID})
		return err == nil
	})
	return f
}

// use makes h the fake rig's answer from now on.
func (f *fakeRig) use(h http.Handler) { f.handler.Store(&h) }

// callRig calls the rig serving an offering over NATS, as a gateway of p does, with a route ticket when tk is set.
func callRig(t *testing.T, p *Platform, providerID, offeringID, tk, body string) *http.Response {
	t.Helper()
	caller, err := rigwire.NewCaller(p.nc, rigwire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(caller.Close)
	h := http.Header{"Content-Type": {"application/json"}}
	if tk != "" {
		h.Set(ticket.Header, tk)
	}
	res, err := caller.Call(t.Context(), providerID, offeringID, "/v1/chat/completions", h, []byte(body))
	if err != nil {
		t.Fatalf("call to the rig of %s: %v", offeringID, err)
	}
	return res
}
