package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/web"
	"github.com/gpumarket/gpumarket/web/gateway"
)

// natsKeyChanges tells the gateways through the platform's NATS connection, on
// events.KeyChangesSubject: every gateway process subscribes and forgets what it cached of the
// key, so that its next request reads the key as stored. Best effort: a gateway that misses the
// word rereads the key when its cache entry expires (gateway.DefaultKeyCacheTTL). See
// docs/web-security.md ("Revoked and changed keys"). It tells this process's own gateway
// (local, nil where none runs here) at once.
type natsKeyChanges struct {
	nc    *nats.Conn
	local *gateway.Gateway
}

var _ web.KeyChanges = (*natsKeyChanges)(nil)

// KeyChanged forgets the key in this process's gateway, publishes the key's id and waits until
// the server has it, so that the owner is told "revoked" only once every connected gateway is
// being told too.
func (k *natsKeyChanges) KeyChanged(ctx context.Context, keyID string) error {
	if k.local != nil {
		k.local.ForgetKey(keyID)
	}
	if err := k.nc.Publish(events.KeyChangesSubject, []byte(keyID)); err != nil {
		return fmt.Errorf("publish %s: %w", events.KeyChangesSubject, err)
	}
	if err := k.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("publish %s: flush: %w", events.KeyChangesSubject, err)
	}
	return nil
}

// subscribeKeyChanges makes the gateway forget each key named on events.KeyChangesSubject.
func subscribeKeyChanges(nc *nats.Conn, gw *gateway.Gateway, log *slog.Logger) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(events.KeyChangesSubject, func(m *nats.Msg) {
		if len(m.Data) == 0 || len(m.Data) > 64 {
			log.Warn("ignoring a malformed API key change", "subject", m.Subject, "bytes", len(m.Data))
			return
		}
		gw.ForgetKey(string(m.Data))
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", events.KeyChangesSubject, err)
	}
	// The subscription must be in place at the server before the gateway serves: a change
	// made in between would be missed.
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("subscribe to %s: flush: %w", events.KeyChangesSubject, err)
	}
	return sub, nil
}
