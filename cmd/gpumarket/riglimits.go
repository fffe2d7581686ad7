package main

import (
	"cmp"
	"context"

	usageevent "github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/riglimits"
	"github.com/gpumarket/gpumarket/web"
)

// watchRigLimits starts watching the rigs' use of the usage stream on a NATS connection of its
// own (it receives a copy of every usage event). Where this process closes rigs' connections
// (openRigEntry), a rig over its rate is shut out, on the embedded server and a cluster alike;
// elsewhere it is reported. The process that meters also keeps the stream's
// per-rig limit applied once a backlog that held it back is metered. See docs/usage-stream.md.
func (p *Platform) watchRigLimits(ctx context.Context, natsURL string) error {
	nc, _, err := events.Connect(ctx, natsURL, "gpumarket-riglimits", p.log)
	if err != nil {
		return err
	}
	p.rigLimitsNC = nc
	cfg := riglimits.Config{NATS: nc, JS: p.js, MaxRate: p.cfg.StreamMaxRatePerRig, Cooldown: p.cfg.StreamRateCooldown,
		Registerer: p.registry, Log: p.log.With("role", "riglimits")}
	if p.rigRevoker != nil {
		cfg.Disconnect = p.disconnectRig
	}
	if p.cfg.Roles.Meter {
		cfg.PendingLimit = cmp.Or(p.cfg.StreamMaxPendingPerRig, usageevent.DefaultMaxPendingPerRig)
	}
	p.rigLimits.Store(riglimits.New(cfg))
	return nil
}

// rigRefused tells the auth callout's responder whether a rig is shut out for now.
func (p *Platform) rigRefused(offeringID string) bool {
	w := p.rigLimits.Load()
	return w != nil && w.Refused(offeringID)
}

// usageStreamReport is what the admins' page on the usage stream reads; nil where no watcher runs.
func (p *Platform) usageStreamReport() web.UsageStreamReport {
	if w := p.rigLimits.Load(); w != nil {
		return w
	}
	return nil
}
