package metering

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Usage rows flagged with an excess: their rig claimed more than it was given, so that its earnings on the request
// are held until finance resolves the flag (package invoicing, docs/invoicing.md, "Flags and held earnings"). A
// row is flagged with an excess when
//   - the meter flagged it and the rig reported more tokens than were billed (ReportedAboveBilled), or
//   - the gateway's reconciliation flagged its request and the meter billed more tokens than the response told the
//     customer (BilledAboveResponse). The gateway's log is package requestlog's: the caller reads it there and
//     hands over what each response told.
//
// A row flagged without either (billed within its bounds, the rig claiming no more, the response saying as much)
// puts no money at stake.

// FlaggedUsage is a usage row as the flagged requests show it.
type FlaggedUsage struct {
	RequestID  string
	OccurredAt time.Time
	AccountID  string
	ProviderID string
	Model      string
	// InputTokens and OutputTokens are what was billed; ReportedInputTokens and ReportedOutputTokens what the rig
	// reported, nil in rows that billed what it reported.
	InputTokens, OutputTokens                 int64
	ReportedInputTokens, ReportedOutputTokens *int64
	Flag                                      string  // the meter's flag; "" when it flagged nothing
	FlagReason                                *string // the flag in words; nil without a flag
	Charge, Payable                           money.BigPico
}

// ReportedAboveBilled says whether the meter flagged the row and its rig reported more tokens than were billed.
func (u FlaggedUsage) ReportedAboveBilled() bool {
	return u.Flag != "" && ((u.ReportedInputTokens != nil && *u.ReportedInputTokens > u.InputTokens) ||
		(u.ReportedOutputTokens != nil && *u.ReportedOutputTokens > u.OutputTokens))
}

// BilledAbove says whether the row billed more tokens than a response that told t (a count the response did not
// tell is never passed).
func (u FlaggedUsage) BilledAbove(t ResponseTokens) bool {
	return (t.InputTokens != nil && u.InputTokens > *t.InputTokens) || (t.OutputTokens != nil && u.OutputTokens > *t.OutputTokens)
}

// ResponseTokens is what the response of a request the gateway flagged told the customer; nil where it told
// nothing.
type ResponseTokens struct {
	RequestID                 string
	InputTokens, OutputTokens *int64
}

// FlagScope narrows the flagged rows read.
type FlagScope struct {
	// From and To bound the rows' occurred_at to [From, To), and their metered_at to From on: a period's rows,
	// metered in it or later. Zero From: rows of any time.
	From, To time.Time
	// AccountIDs keeps the rows of these customers only, ProviderIDs of these providers only; nil keeps all.
	AccountIDs, ProviderIDs []string
	// Except leaves the rows of these requests out.
	Except []string
	// Limit keeps the latest Limit rows, by occurred_at and then request id, the order they come in; 0 keeps all,
	// in no order.
	Limit int
}

// flaggedColumns are the columns scanFlagged reads, of u (usage_events).
const flaggedColumns = `u.request_id, u.occurred_at, u.account_id::text, u.provider_account_id::text, u.model,
	u.input_tokens, u.output_tokens, u.reported_input_tokens, u.reported_output_tokens, coalesce(u.flag, ''), u.flag_reason,
	u.charge_pico, u.payable_pico`

func scanFlagged(row pgx.CollectableRow) (FlaggedUsage, error) {
	var u FlaggedUsage
	err := row.Scan(&u.RequestID, &u.OccurredAt, &u.AccountID, &u.ProviderID, &u.Model, &u.InputTokens, &u.OutputTokens,
		&u.ReportedInputTokens, &u.ReportedOutputTokens, &u.Flag, &u.FlagReason, &u.Charge, &u.Payable)
	return u, err
}

// where is the scope's condition over u, its arguments numbered after the n the query has already.
func (s FlagScope) where(n int) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", n+len(args))))
	}
	if !s.From.IsZero() {
		add("u.metered_at >= $?", s.From)
		add("u.occurred_at >= $?", s.From)
		add("u.occurred_at < $?", s.To)
	}
	if s.AccountIDs != nil {
		add("u.account_id = ANY ($?::text[]::uuid[])", s.AccountIDs)
	}
	if s.ProviderIDs != nil {
		add("u.provider_account_id = ANY ($?::text[]::uuid[])", s.ProviderIDs)
	}
	if len(s.Except) > 0 {
		add("NOT (u.request_id = ANY ($?::text[]))", s.Except)
	}
	if len(conds) == 0 {
		return "true", nil
	}
	return strings.Join(conds, " AND "), args
}

// order is the ORDER BY and LIMIT of the scope's rows.
func (s FlagScope) order() string {
	if s.Limit <= 0 {
		return ""
	}
	return fmt.Sprintf(" ORDER BY u.occurred_at DESC, u.request_id LIMIT %d", s.Limit)
}

// reportedAboveBilled is the query of the rows the meter flagged whose rig reported more than was billed, through
// usage_events_flagged_idx.
func reportedAboveBilled(s FlagScope) (string, []any) {
	cond, args := s.where(0)
	return `SELECT ` + flaggedColumns + ` FROM usage_events u
		WHERE u.flag IS NOT NULL AND (u.reported_input_tokens > u.input_tokens OR u.reported_output_tokens > u.output_tokens)
			AND ` + cond + s.order(), args
}

// ReportedAboveBilled reads the rows of the scope the meter flagged whose rig reported more tokens than were billed.
func ReportedAboveBilled(ctx context.Context, q Querier, s FlagScope) (_ []FlaggedUsage, err error) {
	defer services.Wrap(&err, "metering.ReportedAboveBilled")
	sql, args := reportedAboveBilled(s)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanFlagged)
}

// QueueReportedAboveBilled queues ReportedAboveBilled's read on b, and calls each with every row as the batch is
// read.
func QueueReportedAboveBilled(b *pgx.Batch, s FlagScope, each func(FlaggedUsage)) {
	sql, args := reportedAboveBilled(s)
	queueFlagged(b, sql, args, each)
}

func queueFlagged(b *pgx.Batch, sql string, args []any, each func(FlaggedUsage)) {
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		list, err := pgx.CollectRows(rows, scanFlagged)
		if err != nil {
			return fmt.Errorf("metering: the rows flagged with an excess: %w", err)
		}
		for _, u := range list {
			each(u)
		}
		return nil
	})
}

// billedAboveResponse is the query of the rows of the requests told names that billed more tokens than their
// responses told, looked up by request id (usage_events_request_idx); ok is false when told names none.
func billedAboveResponse(s FlagScope, told []ResponseTokens) (sql string, args []any, ok bool) {
	if len(told) == 0 {
		return "", nil, false
	}
	ids := make([]string, len(told))
	in, out := make([]pgtype.Int8, len(told)), make([]pgtype.Int8, len(told))
	for i, t := range told {
		ids[i], in[i], out[i] = t.RequestID, int8Of(t.InputTokens), int8Of(t.OutputTokens)
	}
	cond, scoped := s.where(3)
	return `
		SELECT ` + flaggedColumns + `
		FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS g (request_id, input_tokens, output_tokens)
		JOIN usage_events u ON u.request_id = g.request_id
		WHERE (u.input_tokens > g.input_tokens OR u.output_tokens > g.output_tokens) AND ` + cond + s.order(),
		append([]any{ids, in, out}, scoped...), true
}

// BilledAboveResponse reads the rows of the scope, of the requests told names (those the gateway flagged), that
// billed more tokens than their responses told.
func BilledAboveResponse(ctx context.Context, q Querier, s FlagScope, told []ResponseTokens) (_ []FlaggedUsage, err error) {
	defer services.Wrap(&err, "metering.BilledAboveResponse")
	sql, args, ok := billedAboveResponse(s, told)
	if !ok {
		return []FlaggedUsage{}, nil
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanFlagged)
}

// QueueBilledAboveResponse queues BilledAboveResponse's read on b, and calls each with every row as the batch is
// read; it queues nothing when told names no request.
func QueueBilledAboveResponse(b *pgx.Batch, s FlagScope, told []ResponseTokens, each func(FlaggedUsage)) {
	sql, args, ok := billedAboveResponse(s, told)
	if !ok {
		return
	}
	queueFlagged(b, sql, args, each)
}

func int8Of(v *int64) pgtype.Int8 {
	if v == nil {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: *v, Valid: true}
}

// UsageOfRequest reads the usage row of a request, found through usage_event_keys; found is false when the request
// has none.
func UsageOfRequest(ctx context.Context, q Querier, requestID string) (_ FlaggedUsage, found bool, err error) {
	defer services.Wrap(&err, "metering.UsageOfRequest(%s)", requestID)
	rows, err := q.Query(ctx, `
		SELECT `+flaggedColumns+`
		FROM usage_event_keys k
		JOIN usage_events u ON u.occurred_at = k.occurred_at AND u.request_id = k.request_id
		WHERE k.request_id = $1`, requestID)
	if err != nil {
		return FlaggedUsage{}, false, err
	}
	u, err := pgx.CollectExactlyOneRow(rows, scanFlagged)
	if errors.Is(err, pgx.ErrNoRows) {
		return FlaggedUsage{}, false, nil
	}
	return u, err == nil, err
}
