package requestlog

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// What the request log says of responses, as package invoicing reads it beside the usage rows of the requests the
// gateway flagged: the bill of a request the reconciliation flagged is an excess when it is above what the
// response told the customer (metering.BilledAboveResponse). The reads are queued on the caller's batch, so that
// the close reads them in a chunk's transaction and round trip.

// Response is what the gateway's log holds of a request's response.
type Response struct {
	RequestID string
	AccountID string
	// InputTokens and OutputTokens are the usage the response told the customer; nil when none came by.
	InputTokens, OutputTokens *int64
	FlaggedAt                 *time.Time // when the reconciliation flagged the request; nil when it did not
	FlagReason                *string
}

// responseColumns are the columns scanResponse reads.
const responseColumns = `request_id, account_id::text, input_tokens, output_tokens, flagged_at, flag_reason`

func scanResponse(row pgx.CollectableRow) (Response, error) {
	var r Response
	err := row.Scan(&r.RequestID, &r.AccountID, &r.InputTokens, &r.OutputTokens, &r.FlaggedAt, &r.FlagReason)
	return r, err
}

// QueueFlaggedSince queues on b the read of the requests the reconciliation flagged at or after since (zero: ever),
// of the accounts of accountIDs (nil: of every account), through gateway_requests_flagged_idx, and calls each with
// every one as the batch is read.
func QueueFlaggedSince(b *pgx.Batch, since time.Time, accountIDs []string, each func(Response)) {
	sql, args := `SELECT `+responseColumns+` FROM gateway_requests WHERE flagged_at IS NOT NULL`, []any{}
	if !since.IsZero() {
		args = append(args, since)
		sql += fmt.Sprintf(` AND flagged_at >= $%d`, len(args))
	}
	if accountIDs != nil {
		args = append(args, accountIDs)
		sql += fmt.Sprintf(` AND account_id = ANY ($%d::text[]::uuid[])`, len(args))
	}
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		return forEachResponse(rows, "the flagged requests", each)
	})
}

// QueueResponses queues on b the read of the responses of the requests of ids, and calls each with every one the
// log holds as the batch is read.
func QueueResponses(b *pgx.Batch, ids []string, each func(Response)) {
	b.Queue(`SELECT `+responseColumns+` FROM gateway_requests WHERE request_id = ANY ($1::text[])`, ids).
		Query(func(rows pgx.Rows) error {
			return forEachResponse(rows, "the responses of requests", each)
		})
}

func forEachResponse(rows pgx.Rows, what string, each func(Response)) error {
	list, err := pgx.CollectRows(rows, scanResponse)
	if err != nil {
		return fmt.Errorf("requestlog: %s: %w", what, err)
	}
	for _, r := range list {
		each(r)
	}
	return nil
}
