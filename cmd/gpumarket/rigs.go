package main

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// simulatedRig is one demo offering served on this machine: a simbackend behaving like the
// offering's GPU profile, behind a gpuagent that serves the gateway over NATS.
type simulatedRig struct {
	offeringID string
	backend    *http.Server
	agent      *agent.Agent
	// cancel ends the agent's Run; running waits for it, serving for the backend's Serve.
	cancel           context.CancelFunc
	running, serving sync.WaitGroup
}

// startSimulatedRigs starts a rig for every active demo offering the simulation has a profile of. Each agent
// connects to NATS with its own rig credential, as a provider's would, and serves the gateway's calls over that
// connection: no rig listens on a port. The platform's probes then qualify it as any rig
// (docs/listing-states.md).
func (p *Platform) startSimulatedRigs(ctx context.Context) ([]*simulatedRig, error) {
	list, err := p.catalog.ListSeeded(ctx)
	if err != nil {
		return nil, err
	}
	var rigs []*simulatedRig
	for i, o := range list {
		profile, ok := simulation.Lookup(o.Model, o.GPU, o.GPUCount)
		if !ok {
			p.log.Warn("no simulation profile for a demo offering; not started", "offering", o.ID, "model", o.Model)
			continue
		}
		// As vLLM runs by default, every demo engine caches prompt prefixes and reports the tokens it served from
		// the cache; every other one also serves the Messages and Responses APIs itself, so that the demo shows
		// both ways of serving them (docs/gateway.md).
		rig, err := p.startRigWith(ctx, o.ID, o.ProviderAccountID, o.GPU, o.GPUCount,
			simulation.Options{Profile: profile, PrefixCache: true, Native: i%2 == 0})
		if err != nil {
			p.log.Warn("simulated rig not started", "offering", o.ID, "err", err)
			continue
		}
		rigs = append(rigs, rig)
	}
	p.log.Info("simulated rigs running", "rigs", len(rigs))
	return rigs, nil
}

// startRig starts a simulated rig of the offering: an engine of the profile on a loopback port, and the agent in
// front of it, connected to NATS with the offering's rig credential.
func (p *Platform) startRig(ctx context.Context, offeringID, providerID, gpu string, count int,
	profile simulation.Profile) (*simulatedRig, error) {
	return p.startRigWith(ctx, offeringID, providerID, gpu, count, simulation.Options{Profile: profile})
}

// startRigWith is startRig with the simulated engine's options in full. The agent names the engine's model, as
// gpuagent's -model does: it checks the engine serves it and tries the engine's own Messages and Responses APIs.
func (p *Platform) startRigWith(ctx context.Context, offeringID, providerID, gpu string, count int,
	engine simulation.Options) (*simulatedRig, error) {
	// The rig's credential is the one its Connect page shows; it reaches NATS where this process does.
	cred, err := p.RigCredentials(ctx, offeringID)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	backend := &http.Server{Handler: simulation.NewHandler(engine), ReadHeaderTimeout: 10 * time.Second}
	a, err := agent.New(agent.Config{
		Upstream:   "http://" + l.Addr().String(),
		ProviderID: providerID, OfferingID: offeringID, GPUSKU: gpu, GPUCount: count, Capacity: 64,
		Model:   cmp.Or(engine.Model, engine.Profile.Model),
		NATSURL: p.natsLocalURL, NATSUser: cred.NATSUser, NATSPassword: cred.NATSPassword,
		OutboxDir:   filepath.Join(p.cfg.DataDir, "rigs", offeringID, "outbox"),
		OfferingKey: ticket.OfferingKey(p.cfg.TicketKey, offeringID),
		Log:         p.log.With("rig", offeringID).WithGroup("agent"),
	})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	r := &simulatedRig{offeringID: offeringID, backend: backend, agent: a}
	ctx, r.cancel = context.WithCancel(ctx)
	r.serving.Go(func() { _ = backend.Serve(l) })
	r.running.Go(func() {
		if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			p.log.Error("simulated rig stopped", "offering", offeringID, "err", err)
		}
	})
	return r, nil
}

// stop ends the rig and waits for it: the agent finishes its requests in flight and sends its
// outbox (NATS must still be up), then its connection and the backend close.
func (r *simulatedRig) stop() {
	if r.cancel != nil { // nil for a rig a test runs itself
		r.cancel()
		r.running.Wait()
	}
	_ = r.agent.Close()
	_ = r.backend.Close()
	r.serving.Wait()
}
