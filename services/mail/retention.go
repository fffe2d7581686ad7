package mail

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// DefaultSentRetention is how long a sent message is kept before DeleteSent removes it.
const DefaultSentRetention = 30 * 24 * time.Hour

// deleteBatch bounds the rows one DELETE statement removes, so that a first cleanup of a large
// table never holds its locks long.
const deleteBatch = 1000

// DeleteSent removes the messages sent before before, in batches, and returns how many. Queued,
// sending and failed messages stay whatever their age: they are still to send, or a person's to
// look at.
func (o *Outbox) DeleteSent(ctx context.Context, before time.Time) (deleted int64, err error) {
	defer services.Wrap(&err, "mail.Outbox.DeleteSent")
	for {
		tag, err := o.pool.Exec(ctx, `DELETE FROM mail_outbox WHERE id IN (
			SELECT id FROM mail_outbox WHERE status = 'sent' AND sent_at < $1 LIMIT $2)`, before, deleteBatch)
		if err != nil {
			return deleted, err
		}
		deleted += tag.RowsAffected()
		if tag.RowsAffected() < deleteBatch {
			return deleted, nil
		}
	}
}
