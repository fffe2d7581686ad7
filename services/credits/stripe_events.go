package credits

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// StripeEvent is a Stripe event as the webhook received it, for audit: what came, how often,
// and what the platform did with it.
type StripeEvent struct {
	ID              string    `json:"id"`
	Type            string    `json:"type"`
	Deliveries      int       `json:"deliveries"`
	Outcome         string    `json:"outcome"`
	FirstReceivedAt time.Time `json:"first_received_at"`
	LastReceivedAt  time.Time `json:"last_received_at"`
}

// MaxRecentEvents bounds one listing of received events.
const MaxRecentEvents = 500

// RecentEvents lists up to limit of the events received, the newest first by when each first
// arrived. A limit outside 1..MaxRecentEvents is brought into it (0 means 100).
func (w *StripeWebhook) RecentEvents(ctx context.Context, limit int) (_ []StripeEvent, err error) {
	defer services.Wrap(&err, "credits.StripeWebhook.RecentEvents(%d)", limit)
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, MaxRecentEvents)
	rows, err := w.credits.pool.Query(ctx, `
		SELECT id, type, deliveries, outcome, first_received_at, last_received_at
		FROM stripe_events
		ORDER BY first_received_at DESC, id
		LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StripeEvent, error) {
		var e StripeEvent
		err := r.Scan(&e.ID, &e.Type, &e.Deliveries, &e.Outcome, &e.FirstReceivedAt, &e.LastReceivedAt)
		return e, err
	})
}
