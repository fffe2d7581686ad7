package metering

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/usage"
)

// RejectedEvent is a refused event kept whole, as finance and admins review it.
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

// RigRejections is how many events one rig (the provider and offering of the subject they
// came on) had refused for one reason, and how many of them are kept whole.
type RigRejections struct {
	ProviderID   string    `json:"provider_id"`
	ProviderName string    `json:"provider_name,omitempty"` // "" when the subject names no provider the platform holds
	OfferingID   string    `json:"offering_id"`
	Reason       string    `json:"reason"`
	Count        int64     `json:"count"`
	Samples      int64     `json:"samples"`
	LastAt       time.Time `json:"last_at"`
}

// RejectionReport is what finance and admins review of the refused events: the counts per
// reason and per rig, and the newest samples kept whole.
type RejectionReport struct {
	Samples  []RejectedEvent `json:"rejections"`
	ByReason []ReasonCount   `json:"by_reason"`
	ByRig    []RigRejections `json:"by_rig"`
}

// maxRigRows bounds the per-rig counts a report lists, the most refused first.
const maxRigRows = 200

// Rejections reports the refused events, optionally of one reason: the newest samples kept
// whole (at most limit), the count of every reason, and the counts per rig and reason, the
// most refused first.
func (r *Reports) Rejections(ctx context.Context, reason string, limit int) (_ RejectionReport, err error) {
	defer services.Wrap(&err, "metering.Rejections")
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var out RejectionReport
	b := &pgx.Batch{}
	b.Queue(`
		SELECT id, stream_seq, subject, event_id, reason, detail, encode(raw, 'escape'), received_at
		FROM usage_rejections WHERE $1 = '' OR reason = $1
		ORDER BY id DESC LIMIT $2`, reason, limit).Query(func(rows pgx.Rows) error {
		var err error
		out.Samples, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RejectedEvent, error) {
			var e RejectedEvent
			err := r.Scan(&e.ID, &e.StreamSeq, &e.Subject, &e.EventID, &e.Reason, &e.Detail, &e.Raw, &e.ReceivedAt)
			return e, err
		})
		return err
	})
	b.Queue(`SELECT reason, sum(rejected)::bigint FROM usage_rejection_counts GROUP BY reason
		ORDER BY sum(rejected) DESC, reason`).Query(func(rows pgx.Rows) error {
		var err error
		out.ByReason, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ReasonCount])
		return err
	})
	b.Queue(`
		WITH counts AS (
			SELECT provider_id, offering_id, reason, sum(rejected)::bigint AS rejected, max(last_at) AS last_at
			FROM usage_rejection_counts WHERE $1 = '' OR reason = $1
			GROUP BY 1, 2, 3
			ORDER BY 4 DESC, 1, 2, 3 LIMIT $2
		), samples AS (
			SELECT split_part(subject, '.', 2) AS provider_id, split_part(subject, '.', 3) AS offering_id, reason, count(*) AS kept
			FROM usage_rejections WHERE $1 = '' OR reason = $1
			GROUP BY 1, 2, 3
		)
		SELECT c.provider_id, coalesce(a.name, ''), c.offering_id, c.reason, c.rejected, coalesce(s.kept, 0), c.last_at
		FROM counts c
		LEFT JOIN samples s USING (provider_id, offering_id, reason)
		LEFT JOIN accounts a ON a.id::text = c.provider_id
		ORDER BY c.rejected DESC, c.provider_id, c.offering_id, c.reason`, reason, maxRigRows).Query(func(rows pgx.Rows) error {
		var err error
		out.ByRig, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RigRejections, error) {
			var g RigRejections
			err := r.Scan(&g.ProviderID, &g.ProviderName, &g.OfferingID, &g.Reason, &g.Count, &g.Samples, &g.LastAt)
			return g, err
		})
		return err
	})
	if err := r.pool.SendBatch(ctx, b).Close(); err != nil {
		return RejectionReport{}, err
	}
	return out, nil
}

// reject is a refusal for one of the meter's own checks.
func reject(reason usage.RejectReason, format string, args ...any) *usage.Rejection {
	return &usage.Rejection{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
