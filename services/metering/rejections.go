package metering

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/money"
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
		SELECT c.provider_id, c.offering_id, c.reason, c.rejected, coalesce(s.kept, 0), c.last_at
		FROM counts c
		LEFT JOIN samples s USING (provider_id, offering_id, reason)
		ORDER BY c.rejected DESC, c.provider_id, c.offering_id, c.reason`, reason, maxRigRows).Query(func(rows pgx.Rows) error {
		var err error
		out.ByRig, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RigRejections, error) {
			var g RigRejections
			err := r.Scan(&g.ProviderID, &g.OfferingID, &g.Reason, &g.Count, &g.Samples, &g.LastAt)
			return g, err
		})
		return err
	})
	if err := r.pool.SendBatch(ctx, b).Close(); err != nil {
		return RejectionReport{}, err
	}
	// The providers' names, after the counts: a provider id is what a rig's subject said, so only one written as
	// an account's id is looked up.
	var providers []string
	for _, g := range out.ByRig {
		if canonicalUUID.MatchString(g.ProviderID) {
			providers = append(providers, g.ProviderID)
		}
	}
	names, err := accounts.NamesByID(ctx, r.pool, providers)
	if err != nil {
		return RejectionReport{}, err
	}
	for i := range out.ByRig {
		out.ByRig[i].ProviderName = names[out.ByRig[i].ProviderID]
	}
	return out, nil
}

// reject is a refusal for one of the meter's own checks.
func reject(reason usage.RejectReason, format string, args ...any) *usage.Rejection {
	return &usage.Rejection{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// eventError is true for a failure that comes from what a batch's events hold, which
// retrying the same events cannot cure and splitting the batch can: a data exception or an
// integrity violation (SQLSTATE classes 22 and 23), a limit of the database a batch went past
// (class 54), or an amount out of range. Everything else is taken for a fault of the database
// or the network, to be retried. See docs/metering-integrity.md.
func eventError(err error) bool {
	if errors.Is(err, money.ErrOverflow) || errors.Is(err, errEventData) {
		return true
	}
	code := pgErrorCode(err)
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23") || strings.HasPrefix(code, "54")
}

// errEventData marks an error the meter's own writing found in an event's data.
var errEventData = errors.New("metering: an event's data cannot be written")

// rejectionOfError is the reason an event alone in its batch is refused with, after the
// database refused the batch for it.
func rejectionOfError(err error) usage.RejectReason {
	if errors.Is(err, money.ErrOverflow) || pgErrorCode(err) == codeNumericOutOfRange {
		return RejectOverflow
	}
	return RejectRefusedByDatabase
}

func pgErrorCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// rejectAlone refuses an event the database refused, as any other refusal is kept, so the
// stream moves on and the event waits for review.
func (m *Meter) rejectAlone(ctx context.Context, msg jetstream.Msg, cause error) error {
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	r := StoredRejection{Message: Message{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Data: msg.Data(), Stored: meta.Timestamp},
		Reason: rejectionOfError(cause), Detail: "refused by the database: " + cause.Error()}
	if ev, err := usage.Decode(msg.Data()); err == nil {
		r.EventID = ev.ID
	}
	var samples []StoredRejection
	err = pgx.BeginFunc(ctx, m.cfg.Pool, func(tx pgx.Tx) error {
		var err error
		samples, err = m.insertRejections(ctx, tx, []StoredRejection{r}, m.cfg.Now())
		return err
	})
	if err == nil {
		m.cfg.Metrics.observe(BatchResult{Rejections: []StoredRejection{r}}, 0)
		m.publishRejections(samples)
	}
	return err
}

// publishRejections copies the refused events kept whole to the dead-letter subject, best
// effort: the rejections table, written in the batch's transaction, is the record.
func (m *Meter) publishRejections(rs []StoredRejection) {
	if m.cfg.JS == nil {
		return
	}
	for _, r := range rs {
		msg := natsMsg(events.RejectedSubject(string(r.Reason)), r.Data, r.Seq, r.Subject, r.Detail)
		if _, err := m.cfg.JS.PublishMsgAsync(msg); err != nil {
			m.cfg.Log.Warn("meter: dead-letter publish", "err", err)
			return
		}
	}
}

func natsMsg(subject string, data []byte, seq uint64, origSubject, detail string) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set("Gpumarket-Stream-Seq", fmt.Sprint(seq))
	msg.Header.Set("Gpumarket-Subject", origSubject)
	msg.Header.Set("Gpumarket-Reason", truncate(detail, 500))
	return msg
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
