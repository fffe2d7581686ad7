package batch

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
)

// Statuses of a batch, OpenAI's.
const (
	StatusValidating = "validating"
	StatusFailed     = "failed"
	StatusInProgress = "in_progress"
	StatusFinalizing = "finalizing"
	StatusCompleted  = "completed"
	StatusExpired    = "expired"
	StatusCancelling = "cancelling"
	StatusCancelled  = "cancelled"
)

// Endpoints a batch may send its lines to.
var Endpoints = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings"}

func validEndpoint(e string) bool {
	for _, x := range Endpoints {
		if x == e {
			return true
		}
	}
	return false
}

// CompletionWindow is the only window OpenAI offers, and the batch tier's promise.
const CompletionWindow = "24h"

// Batch is a batch in OpenAI's shape, with the platform's figures under "gpumarket".
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"` // "batch"
	Endpoint         string            `json:"endpoint"`
	Errors           *BatchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	GPUMarket        Figures           `json:"gpumarket"`
}

// BatchErrors are a batch's validation errors, OpenAI's list.
type BatchErrors struct {
	Object string      `json:"object"` // "list"
	Data   []LineError `json:"data"`
}

// LineError is one reason a batch failed validation; Line is 1-based, nil for the whole file.
type LineError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// RequestCounts are the batch's lines by outcome.
type RequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Figures are the platform's extension: what the batch's metered lines cost, and the bound on its
// cost it was admitted with. Dollars, exact.
type Figures struct {
	CostUSD     string `json:"cost_usd"`
	EstimateUSD string `json:"estimate_usd"`
}

// CreateInput is POST /v1/batches.
type CreateInput struct {
	AccountID        string
	APIKeyID         string
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// Validate checks the request; the file's lines are checked by the scheduler, as OpenAI does.
func (in CreateInput) Validate() error {
	fe := services.FieldErrors{}
	if in.InputFileID == "" {
		fe.Add("input_file_id", "Name the uploaded file of requests.")
	}
	if !validEndpoint(in.Endpoint) {
		fe.Add("endpoint", "The endpoint must be /v1/chat/completions, /v1/completions or /v1/embeddings.")
	}
	if in.CompletionWindow != CompletionWindow {
		fe.Add("completion_window", `The completion window must be "24h".`)
	}
	if len(in.Metadata) > 16 {
		fe.Add("metadata", "Metadata holds at most 16 pairs.")
	}
	for k, v := range in.Metadata {
		if len(k) > 64 || len(v) > 512 {
			fe.Add("metadata", "Metadata keys are up to 64 characters, values up to 512.")
		}
	}
	return fe.Err()
}

var errBatchNotFound = services.Errorf(services.CodeNotFound, "No such batch.")

// Create records a batch, validating; the scheduler checks its lines and admits it.
func (s *Service) Create(ctx context.Context, in CreateInput) (_ Batch, err error) {
	defer services.Wrap(&err, "batch.Create")
	if err := in.Validate(); err != nil {
		return Batch{}, err
	}
	f, err := s.File(ctx, in.AccountID, in.InputFileID)
	if err != nil {
		return Batch{}, err
	}
	if f.Purpose != PurposeBatch {
		return Batch{}, services.Errorf(services.CodeInvalid, `The input file must have been uploaded with purpose "batch".`)
	}
	now := s.now().UTC()
	id := services.NewTimeOrderedID("batch_", now)
	var meta []byte
	if in.Metadata != nil {
		if meta, err = json.Marshal(in.Metadata); err != nil {
			return Batch{}, err
		}
	}
	// The answer is the batch as created, validating, as OpenAI answers: read in the
	// transaction that writes it, before any scheduler can see it and admit it.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Batch{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO batches (id, account_id, api_key_id, input_file_id, endpoint,
		completion_window, metadata, status, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'validating', $8, $9)`,
		id, in.AccountID, in.APIKeyID, in.InputFileID, in.Endpoint, in.CompletionWindow, meta, now, now.Add(24*time.Hour)); err != nil {
		return Batch{}, err
	}
	b, err := readBatch(ctx, tx, ` WHERE b.id = $1`, id)
	if err != nil {
		return Batch{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Batch{}, err
	}
	s.Wake()
	return b, nil
}

// Wake tells a scheduler in this process to look for work now rather than at its next poll.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// batchSelect reads batches with their line counts and their account, for readBatches. It is
// planned for each call (pgx.QueryExecModeExec) where the caller asks: a plan cached while
// batch_lines was nearly empty would scan it whole, and go on doing so as it grows.
const batchSelect = `SELECT b.id, b.endpoint, b.errors, b.input_file_id, b.completion_window, b.status,
	b.output_file_id, b.error_file_id, b.created_at, b.in_progress_at, b.expires_at, b.finalizing_at, b.completed_at,
	b.failed_at, b.expired_at, b.cancelling_at, b.cancelled_at, b.metadata, coalesce(b.estimate_pico, 0)::text,
	c.total, c.done, c.failed, b.account_id::text
	FROM batches b, LATERAL (SELECT count(*) AS total, count(*) FILTER (WHERE status = 'done') AS done,
		count(*) FILTER (WHERE status = 'failed') AS failed FROM batch_lines WHERE batch_id = b.id) c`

// dbQuery is a pool or a transaction.
type dbQuery interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readBatches reads the batches batchSelect and the conditions that follow it (where, with
// args) select, in their order, with their cost: what the meter billed the requests of the
// batch's lines, every attempt's, which it sums as it stores their usage rows
// (metering.BatchCosts), so that it is exact once their usage is metered. Both are read through
// q, a transaction when the batches must be read in it.
func readBatches(ctx context.Context, q dbQuery, where string, args ...any) ([]Batch, error) {
	rows, err := q.Query(ctx, batchSelect+where, args...)
	if err != nil {
		return nil, err
	}
	var accounts []string
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) {
		b, account, err := scanBatch(r)
		accounts = append(accounts, account)
		return b, err
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i := range list {
		ids[i] = list[i].ID
	}
	costs, err := metering.BatchCosts(ctx, q, ids, accounts)
	if err != nil {
		return nil, err
	}
	for i := range list {
		list[i].GPUMarket.CostUSD = costs[list[i].ID].Decimal(12)
	}
	return list, nil
}

// readBatch is the one batch readBatches selects, pgx.ErrNoRows when there is none.
func readBatch(ctx context.Context, q dbQuery, where string, args ...any) (Batch, error) {
	list, err := readBatches(ctx, q, where, args...)
	switch {
	case err != nil:
		return Batch{}, err
	case len(list) == 0:
		return Batch{}, pgx.ErrNoRows
	case len(list) > 1:
		return Batch{}, pgx.ErrTooManyRows
	}
	return list[0], nil
}

func unix(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	u := t.Unix()
	return &u
}

// scanBatch reads a row of batchSelect: the batch, without its cost, and its account.
func scanBatch(r pgx.CollectableRow) (_ Batch, account string, _ error) {
	b := Batch{Object: "batch"}
	var errs, meta []byte
	var created, expires time.Time
	var inProgress, finalizing, completed, failed, expired, cancelling, cancelled *time.Time
	var estimate money.BigPico
	var estimateText string
	err := r.Scan(&b.ID, &b.Endpoint, &errs, &b.InputFileID, &b.CompletionWindow, &b.Status, &b.OutputFileID, &b.ErrorFileID,
		&created, &inProgress, &expires, &finalizing, &completed, &failed, &expired, &cancelling, &cancelled, &meta,
		&estimateText, &b.RequestCounts.Total, &b.RequestCounts.Completed, &b.RequestCounts.Failed, &account)
	if err != nil {
		return Batch{}, "", err
	}
	if err := estimate.Scan(estimateText); err != nil {
		return Batch{}, "", err
	}
	b.CreatedAt, b.ExpiresAt = created.Unix(), unix(&expires)
	b.InProgressAt, b.FinalizingAt, b.CompletedAt, b.FailedAt = unix(inProgress), unix(finalizing), unix(completed), unix(failed)
	b.ExpiredAt, b.CancellingAt, b.CancelledAt = unix(expired), unix(cancelling), unix(cancelled)
	if len(errs) > 0 {
		b.Errors = &BatchErrors{Object: "list"}
		if err := json.Unmarshal(errs, &b.Errors.Data); err != nil {
			return Batch{}, "", err
		}
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &b.Metadata); err != nil {
			return Batch{}, "", err
		}
	}
	b.GPUMarket = Figures{EstimateUSD: estimate.Decimal(12)}
	return b, account, nil
}

// Batch returns the account's batch.
func (s *Service) Batch(ctx context.Context, accountID, id string) (_ Batch, err error) {
	defer services.Wrap(&err, "batch.Batch")
	b, err := readBatch(ctx, s.pool, ` WHERE b.id = $1 AND b.account_id::text = $2`, pgx.QueryExecModeExec, id, accountID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Batch{}, errBatchNotFound
	}
	return b, err
}

// Page is a page of batches, newest first.
type Page struct {
	Object  string  `json:"object"` // "list"
	Data    []Batch `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// Batches lists the account's batches newest first: limit of them (1 to 100, default 20) after
// the batch named by after, if any.
func (s *Service) Batches(ctx context.Context, accountID, after string, limit int) (_ Page, err error) {
	defer services.Wrap(&err, "batch.Batches")
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 100)
	list, err := readBatches(ctx, s.pool, ` WHERE b.account_id::text = $1 AND ($2 = '' OR (b.created_at, b.id) <
		(SELECT created_at, id FROM batches WHERE id = $2 AND account_id::text = $1))
		ORDER BY b.created_at DESC, b.id DESC LIMIT $3`, pgx.QueryExecModeExec, accountID, after, limit+1)
	if err != nil {
		return Page{}, err
	}
	p := Page{Object: "list", Data: list}
	if len(list) > limit {
		p.Data, p.HasMore = list[:limit], true
	}
	if p.Data == nil {
		p.Data = []Batch{}
	}
	if n := len(p.Data); n > 0 {
		p.FirstID, p.LastID = &p.Data[0].ID, &p.Data[n-1].ID
	}
	return p, nil
}

// Cancel asks for the account's batch to stop: no line is sent after this, the lines in flight
// finish, and the scheduler writes the output of what finished (docs/batches.md).
func (s *Service) Cancel(ctx context.Context, accountID, id string) (_ Batch, err error) {
	defer services.Wrap(&err, "batch.Cancel")
	b, err := s.Batch(ctx, accountID, id)
	if err != nil {
		return Batch{}, err
	}
	switch b.Status {
	case StatusCancelling, StatusCancelled:
		return b, nil
	case StatusValidating, StatusInProgress:
	default:
		return Batch{}, services.Errorf(services.CodeConflict, "A batch that is %s cannot be cancelled.", b.Status)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE batches SET status = 'cancelling', cancelling_at = $2
		WHERE id = $1 AND status IN ('validating', 'in_progress')`, id, s.now().UTC())
	if err != nil {
		return Batch{}, err
	}
	if tag.RowsAffected() == 0 { // it moved on meanwhile
		return s.Cancel(ctx, accountID, id)
	}
	s.Wake()
	return s.Batch(ctx, accountID, id)
}
