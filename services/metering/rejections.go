package metering

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// RejectedEvent is an event the meter refused, as finance and admins review it.
type RejectedEvent struct {
	ID         int64     `json:"id"`
	StreamSeq  int64     `json:"stream_seq"`
	Subject    string    `json:"subject"`
	EventID    string    `json:"event_id"`
	Reason     string    `json:"reason"`
	Detail     string    `json:"detail"`
	Raw        string    `json:"raw"`
	ReceivedAt time.Time `json:"received_at"`
}

// ReasonCount is how many events were refused for one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// Rejections lists the newest refused events, optionally of one reason, with the count of
// every reason, for finance and admins to review.
func (r *Reports) Rejections(ctx context.Context, reason string, limit int) (_ []RejectedEvent, _ []ReasonCount, err error) {
	defer services.Wrap(&err, "metering.Rejections")
	pool := r.pool
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	rows, err := pool.Query(ctx, `
		SELECT id, stream_seq, subject, event_id, reason, detail, encode(raw, 'escape'), received_at
		FROM usage_rejections WHERE $1 = '' OR reason = $1
		ORDER BY id DESC LIMIT $2`, reason, limit)
	if err != nil {
		return nil, nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RejectedEvent, error) {
		var e RejectedEvent
		err := r.Scan(&e.ID, &e.StreamSeq, &e.Subject, &e.EventID, &e.Reason, &e.Detail, &e.Raw, &e.ReceivedAt)
		return e, err
	})
	if err != nil {
		return nil, nil, err
	}
	rows, err = pool.Query(ctx, `SELECT reason, count(*) FROM usage_rejections GROUP BY reason ORDER BY count(*) DESC, reason`)
	if err != nil {
		return nil, nil, err
	}
	counts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ReasonCount])
	return list, counts, err
}
