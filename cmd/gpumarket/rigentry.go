package main

import (
	"context"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/rigauth"
)

// openRigEntry lets rigs into NATS where this process has what it takes (docs/usage-stream.md, "The rigs' entry
// point"): with the embedded server always; on an external NATS in a process with the web role and
// GPUMARKET_RIG_KEY. It answers the auth callout (rigauth.Responder) on a connection of the platform's own user,
// beside any other web process doing the same, and, given the system account's user (systemURL), closes rigs'
// connections on every node (rigauth.Revoker) when a credential is re-issued, an offering delisted or a rig shut
// out.
func (p *Platform) openRigEntry(ctx context.Context, natsURL, systemURL string) error {
	if p.natsServer == nil && (!p.cfg.Roles.Web || len(p.cfg.RigKey) < 32) {
		return nil
	}
	issuer, err := rigauth.Issuer(p.cfg.RigKey)
	if err != nil {
		return err
	}
	responder := &rigauth.Responder{Issuer: issuer, RigKey: p.cfg.RigKey, RigOf: p.rigOf, Refused: p.rigRefused,
		Log: p.log.With("part", "rig entry")}
	if p.rigAuthNC, _, err = events.Connect(ctx, natsURL, "gpumarket-rigauth", p.log); err != nil {
		return err
	}
	if _, err := responder.Serve(p.rigAuthNC); err != nil {
		return err
	}
	if systemURL == "" {
		p.log.Warn("GPUMARKET_NATS_SYSTEM_URL is unset: a rig whose credential is re-issued, whose offering is delisted " +
			"or which is shut out keeps its open connections and is refused only when it reconnects, and providers cannot re-issue credentials")
		return nil
	}
	nc, err := nats.Connect(systemURL, nats.Name("gpumarket-rigrevoker"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to NATS as the system account's user (GPUMARKET_NATS_SYSTEM_URL): %w", err)
	}
	p.rigRevoker = &rigauth.Revoker{NC: nc}
	return nil
}

// disconnectRig closes every connection of the rig serving an offering, where this process can.
func (p *Platform) disconnectRig(offeringID string) {
	if p.rigRevoker == nil {
		return
	}
	if _, err := p.rigRevoker.Disconnect(context.Background(), events.RigUsername(offeringID)); err != nil {
		p.log.Warn("a rig's connections could not be closed", "offering", offeringID, "err", err)
	}
}

// closeRigEntry closes the responder's and the revoker's connections.
func (p *Platform) closeRigEntry() {
	if p.rigAuthNC != nil {
		p.rigAuthNC.Close()
	}
	if p.rigRevoker != nil {
		p.rigRevoker.NC.Close()
	}
}

// natsIssuer prints the public key of the key that signs the platform's answers to the auth callout, derived from
// GPUMARKET_RIG_KEY: the value of NATS_AUTH_CALLOUT_ISSUER in the NATS configuration (deploy/nats/nats.conf).
func natsIssuer(cfg Config, out io.Writer) error {
	if len(cfg.RigKey) < 32 {
		return fmt.Errorf("set GPUMARKET_RIG_KEY (at least 32 bytes): the issuer is derived from it")
	}
	public, err := rigauth.IssuerPublicKey(cfg.RigKey)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, public)
	return err
}
