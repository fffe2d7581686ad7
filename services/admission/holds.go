package admission

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpumarket/gpumarket/services"
)

// The recorded holds (admission_holds) as other packages write them: the gateway's request log writes a request's
// hold with its record and deletes the expired ones, and the meter deletes a request's hold in the transaction that
// bills it.

// ReleaseHolds deletes the holds of the requests of requestIDs through tx, the meter's transaction that posts their
// charges: a snapshot shows each request either held or charged (Admission).
func ReleaseHolds(ctx context.Context, tx pgx.Tx, requestIDs []string) (err error) {
	defer services.Wrap(&err, "admission.ReleaseHolds")
	_, err = tx.Exec(ctx, `DELETE FROM admission_holds WHERE request_id = ANY($1::text[])`, requestIDs)
	return err
}

// HoldRecord is an ended request's hold as the gateway writes it with its record of the attempt (package
// requestlog): the request, its account and key, and what it leaves held until when (Reservation.Settle).
type HoldRecord struct {
	RequestID, AccountID, APIKeyID string
	Hold                           Hold
	At                             time.Time // when the attempt ended
}

// QueueRecordHolds queues into b, the batch that writes the gateway's records of the requests, the insert of their
// holds above zero: sent together, in the batch's one transaction, a hold exists exactly when the record the meter
// bills by does. A hold whose request the meter billed already (a record written late) is not written: metered is
// the meter's condition that a request is metered, asked of the statement's snapshot (Usage.Metered).
func QueueRecordHolds(b *pgx.Batch, holds []HoldRecord, metered func(requestID string) string) {
	var ids, accounts, keys []string
	var amounts []int64
	var at, until []time.Time
	for _, h := range holds {
		if h.Hold.Amount <= 0 {
			continue
		}
		ids, accounts, keys = append(ids, h.RequestID), append(accounts, h.AccountID), append(keys, h.APIKeyID)
		amounts, at, until = append(amounts, int64(h.Hold.Amount)), append(at, h.At.UTC()), append(until, h.Hold.Until.UTC())
	}
	if len(ids) == 0 {
		return
	}
	b.Queue(`
		INSERT INTO admission_holds (request_id, account_id, api_key_id, amount_pico, held_at, expires_at)
		SELECT request_id, account_id, api_key_id::text, amount_pico, held_at, expires_at
		FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
			AS r (request_id, account_id, api_key_id, amount_pico, held_at, expires_at)
		WHERE NOT `+metered("r.request_id")+`
		ON CONFLICT (request_id) DO NOTHING`, ids, accounts, keys, amounts, at, until)
}

// DeleteExpiredHolds deletes through q the holds expired at now, which the meter can no longer bill against and
// which count for nothing (Admission.load), and says how many went.
func DeleteExpiredHolds(ctx context.Context, q Execer, now time.Time) (_ int64, err error) {
	defer services.Wrap(&err, "admission.DeleteExpiredHolds")
	tag, err := q.Exec(ctx, `DELETE FROM admission_holds WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// Execer is what DeleteExpiredHolds writes through: the pool, or a caller's transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}
