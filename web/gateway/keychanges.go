package gateway

import (
	"context"
	"time"
)

// A revoked or changed API key (its monthly limit changed) is forgotten by every gateway
// process as soon as word of it arrives: the web role that changes a key and the gateways that
// serve it may be different processes. cmd/gpumarket carries the word on NATS and calls
// ForgetKey on each gateway when it arrives. See docs/web-security.md ("Revoked and changed
// keys").

// ForgetKey drops what this gateway cached of the key, so that its next request reads the key
// as it is stored now.
func (g *Gateway) ForgetKey(keyID string) {
	g.keys.Forget(keyID)
	g.batchKeys.Forget(keyID)
}

// KeyChanged forgets the key at once: a gateway in the process that changed the key is told
// without waiting for the word to come back from NATS. It never fails.
func (g *Gateway) KeyChanged(_ context.Context, keyID string) error {
	g.ForgetKey(keyID)
	return nil
}

// KeyCacheTTL is how long this gateway keeps a key it read: how stale the key can be when
// word of a change is lost.
func (g *Gateway) KeyCacheTTL() time.Duration { return g.cfg.KeyCacheTTL }
