package webhooks

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// DefaultLogRetention is how long a finished delivery and its attempts stay in the log before
// DeleteLogBefore removes them.
const DefaultLogRetention = 30 * 24 * time.Hour

// deleteBatch bounds the rows one DELETE statement removes, so that a first cleanup of a large
// log never holds its locks long.
const deleteBatch = 1000

// DeleteLogBefore removes, in batches, the deliveries that finished (delivered or failed) before
// before, with their attempts, and then the events older than before that no delivery names any
// more; it returns how many deliveries and events went. Pending deliveries stay whatever their
// age: they are still being sent. A removed delivery can no longer be replayed.
func (s *Service) DeleteLogBefore(ctx context.Context, before time.Time) (deliveries, events int64, err error) {
	defer services.Wrap(&err, "webhooks.DeleteLogBefore")
	for {
		// Attempts go with their delivery (ON DELETE CASCADE).
		tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND finished_at < $1 LIMIT $2)`, before, deleteBatch)
		if err != nil {
			return deliveries, events, err
		}
		deliveries += tag.RowsAffected()
		if tag.RowsAffected() < deleteBatch {
			break
		}
	}
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_events WHERE id IN (
			SELECT e.id FROM webhook_events e WHERE e.created_at < $1
				AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id) LIMIT $2)`, before, deleteBatch)
		if err != nil {
			return deliveries, events, err
		}
		events += tag.RowsAffected()
		if tag.RowsAffected() < deleteBatch {
			return deliveries, events, nil
		}
	}
}
