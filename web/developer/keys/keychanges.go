package keys

import (
	"context"
	"time"
)

// KeyChanges carries word of a changed API key (revoked, or its monthly limit changed) to
// every gateway process, which then forgets what it cached of the key: the web role that
// changes a key and the gateways that serve it may be different processes. cmd/gpumarket
// implements it on NATS (telling this process's own gateway at once, when one runs here). See
// docs/web-security.md ("Revoked and changed keys").
type KeyChanges interface {
	KeyChanged(ctx context.Context, keyID string) error
}

// keyChangeTimeout bounds how long telling the gateways may hold up the answer to the owner.
const keyChangeTimeout = 2 * time.Second

// keyChanged tells every gateway through KeyChanges. The change is stored by then; when the
// word cannot be sent, each gateway still rereads the key within its cache's lifetime, and the
// log says so.
func (s *Server) keyChanged(ctx context.Context, keyID string) {
	if s.keyChanges == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyChangeTimeout)
	defer cancel()
	if err := s.keyChanges.KeyChanged(ctx, keyID); err != nil {
		s.Log.Error("telling the gateways that an API key changed failed: they reread it when their cache expires",
			"key", keyID, "err", err)
	}
}
