// Package batch is the OpenAI Batch API (docs/batches.md): files uploaded for batches, the
// batches themselves, and the scheduler that runs their lines through the gateway at the batch
// tier. It owns three invariants: a file is seen whole or not at all (written to a temporary
// name and renamed, or an S3 multipart upload completed only on commit), a batch is admitted only when the account's balance covers the
// bound on its cost, and no line of a batch is sent twice once its answer was kept.
//
// Tables of other packages it reads: usage_by_batch, usage_event_keys (package metering). It writes
// only its own.
package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// Limits on an uploaded file, OpenAI's for batch input.
const (
	MaxFileLines = 50_000
	MaxFileBytes = 200 << 20
)

// Purposes of files.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// File is a stored file, in OpenAI's shape.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // "file"
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"` // "processed": a file is stored whole before it is listed
	accountID string
	lines     int
}

// Service is the files and batches of every account. Every call takes the caller's account and
// sees only that account's files and batches: another account's are not found.
type Service struct {
	pool    *pgxpool.Pool
	store   Storage
	now     func() time.Time
	wake    chan struct{} // tells a scheduler in this process that a batch was created
	maxFile int64
	events  Events
}

// Events records an event for an account's webhooks inside the transaction of what happened
// (webhooks.Service.Emit).
type Events interface {
	Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error
}

// Config builds a Service.
type Config struct {
	Pool    *pgxpool.Pool
	Storage Storage
	Now     func() time.Time // nil means time.Now
	// MaxFileBytes is the largest upload; zero means MaxFileBytes.
	MaxFileBytes int64
	// Events is told of each batch completed, in the transaction that completes it
	// (batch.completed, docs/webhooks.md); nil tells no one.
	Events Events
}

// NewService builds the files and batches service.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = MaxFileBytes
	}
	return &Service{pool: cfg.Pool, store: cfg.Storage, now: cfg.Now, wake: make(chan struct{}, 1), maxFile: cfg.MaxFileBytes,
		events: cfg.Events}
}

var errFileNotFound = services.Errorf(services.CodeNotFound, "No such file.")

// Staged is an upload written to storage and not yet committed: the purpose comes after the file
// in OpenAI's multipart form.
type Staged struct {
	id, accountID, filename string
	bytes                   int64
	lines                   int
	up                      Upload
}

// Abort throws the staged bytes away.
func (st *Staged) Abort() { st.up.Abort() }

// StripBidi drops the characters that change the direction text is shown in: the embeddings and
// overrides U+202A..U+202E, the isolates U+2066..U+2069 and the marks U+200E, U+200F. In a file
// name they make "x\u202Elnosj.exe" show as "xexe.jsonl"; nothing a file is named for
// needs them.
func StripBidi(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= '\u202A' && r <= '\u202E', r >= '\u2066' && r <= '\u2069', r == '\u200E', r == '\u200F':
			return -1
		}
		return r
	}, s)
}

// Stage streams an upload to storage, counting its bytes and lines as they pass, and refuses one
// larger than the limits; what it refuses is thrown away. Nothing is held whole in memory.
func (s *Service) Stage(accountID, filename string, body io.Reader) (_ *Staged, err error) {
	defer services.Wrap(&err, "batch.Stage")
	filename = StripBidi(filename)
	if filename == "" || len(filename) > 255 {
		return nil, services.Errorf(services.CodeInvalid, "Name the file (up to 255 characters).")
	}
	id := services.NewTimeOrderedID("file-", s.now())
	up, err := s.store.Create(id)
	if err != nil {
		return nil, err
	}
	st := &Staged{id: id, accountID: accountID, filename: filename, up: up}
	defer func() {
		if err != nil {
			up.Abort()
		}
	}()
	buf := make([]byte, 64<<10)
	last := byte('\n')
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			st.bytes += int64(n)
			if st.bytes > s.maxFile {
				return nil, services.Errorf(services.CodeInvalid, "The file is larger than %d bytes.", s.maxFile)
			}
			st.lines += bytes.Count(chunk, []byte{'\n'})
			last = chunk[n-1]
			if st.lines > MaxFileLines {
				return nil, services.Errorf(services.CodeInvalid, "The file has more than %d lines.", MaxFileLines)
			}
			if _, err := up.Write(chunk); err != nil {
				return nil, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			// The body stopped before its end: a multipart form cut off before its closing
			// boundary, a connection dropped. That is the upload's fault, not ours.
			return nil, &services.Error{Code: services.CodeInvalid, Cause: rerr, Message: fmt.Sprintf(
				"The upload was cut off after %d bytes of the file; send the whole file again.", st.bytes)}
		}
	}
	if last != '\n' {
		st.lines++
	}
	if st.lines > MaxFileLines {
		return nil, services.Errorf(services.CodeInvalid, "The file has more than %d lines.", MaxFileLines)
	}
	if st.bytes == 0 {
		return nil, services.Errorf(services.CodeInvalid, "The file is empty.")
	}
	return st, nil
}

// Commit stores a staged upload as a file of the purpose; only "batch" is taken.
func (s *Service) Commit(ctx context.Context, st *Staged, purpose string) (_ File, err error) {
	defer services.Wrap(&err, "batch.Commit")
	if purpose != PurposeBatch {
		st.Abort()
		return File{}, services.Errorf(services.CodeInvalid, `The purpose of an upload here must be "batch".`)
	}
	if err := st.up.Commit(); err != nil {
		return File{}, err
	}
	f := File{ID: st.id, Object: "file", Bytes: st.bytes, CreatedAt: s.now().Unix(), Filename: st.filename,
		Purpose: purpose, Status: "processed", accountID: st.accountID, lines: st.lines}
	if err := s.insertFile(ctx, s.pool, f); err != nil {
		_ = s.store.Remove(st.id)
		return File{}, err
	}
	return f, nil
}

// dbExec is a pool or a transaction.
type dbExec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *Service) insertFile(ctx context.Context, db dbExec, f File) error {
	_, err := db.Exec(ctx, `INSERT INTO batch_files (id, account_id, filename, purpose, bytes, lines, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, f.ID, f.accountID, f.Filename, f.Purpose, f.Bytes, f.lines, time.Unix(f.CreatedAt, 0).UTC())
	return err
}

const fileColumns = `id, account_id::text, bytes, created_at, filename, purpose, lines`

func scanFile(r pgx.CollectableRow) (File, error) {
	f := File{Object: "file", Status: "processed"}
	var at time.Time
	err := r.Scan(&f.ID, &f.accountID, &f.Bytes, &at, &f.Filename, &f.Purpose, &f.lines)
	f.CreatedAt = at.Unix()
	return f, err
}

// File returns the account's file.
func (s *Service) File(ctx context.Context, accountID, id string) (_ File, err error) {
	defer services.Wrap(&err, "batch.File")
	rows, err := s.pool.Query(ctx, `SELECT `+fileColumns+` FROM batch_files
		WHERE id = $1 AND account_id::text = $2 AND deleted_at IS NULL`, id, accountID)
	if err != nil {
		return File{}, err
	}
	f, err := pgx.CollectExactlyOneRow(rows, scanFile)
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, errFileNotFound
	}
	return f, err
}

// FileQuery is a page of GET /v1/files, as OpenAI pages it: the files after the one named by
// After, in Order of creation ("asc" or "desc", the default), Limit of them (1 to 10,000, the
// default), of Purpose when one is given.
type FileQuery struct {
	Purpose, After, Order string
	Limit                 int
}

// FilePage is a page of files, OpenAI's list object.
type FilePage struct {
	Object  string  `json:"object"` // "list"
	Data    []File  `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// Files lists a page of the account's files. The order is (created_at, id), so files created in
// the same second still page without a gap or a repeat (ids are time-ordered, so id order is
// creation order within the second); one row past the limit is read to tell has_more. An after
// that names no file of the account is not found, as OpenAI answers it.
func (s *Service) Files(ctx context.Context, accountID string, q FileQuery) (_ FilePage, err error) {
	defer services.Wrap(&err, "batch.Files")
	if q.Limit <= 0 || q.Limit > 10_000 {
		q.Limit = 10_000
	}
	cmp, dir := "<", "DESC"
	switch q.Order {
	case "", "desc":
	case "asc":
		cmp, dir = ">", "ASC"
	default:
		return FilePage{}, services.Errorf(services.CodeInvalid, `The order must be "asc" or "desc".`)
	}
	if q.After != "" {
		if _, err := s.File(ctx, accountID, q.After); err != nil {
			return FilePage{}, err
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+fileColumns+` FROM batch_files
		WHERE account_id::text = $1 AND deleted_at IS NULL AND ($2 = '' OR purpose = $2)
		AND ($3 = '' OR (created_at, id) `+cmp+` (SELECT created_at, id FROM batch_files WHERE id = $3 AND account_id::text = $1))
		ORDER BY created_at `+dir+`, id `+dir+` LIMIT $4`, accountID, q.Purpose, q.After, q.Limit+1)
	if err != nil {
		return FilePage{}, err
	}
	list, err := pgx.CollectRows(rows, scanFile)
	if err != nil {
		return FilePage{}, err
	}
	p := FilePage{Object: "list", Data: list}
	if len(list) > q.Limit {
		p.Data, p.HasMore = list[:q.Limit], true
	}
	if p.Data == nil {
		p.Data = []File{}
	}
	if n := len(p.Data); n > 0 {
		p.FirstID, p.LastID = &p.Data[0].ID, &p.Data[n-1].ID
	}
	return p, nil
}

// Content opens the account's file for reading.
func (s *Service) Content(ctx context.Context, accountID, id string) (File, io.ReadCloser, error) {
	f, err := s.File(ctx, accountID, id)
	if err != nil {
		return File{}, nil, err
	}
	r, err := s.store.Open(id)
	if err != nil {
		return File{}, nil, fmt.Errorf("batch.Content(%s): %w", id, err)
	}
	return f, r, nil
}

// DeleteFile deletes the account's file. The input of a batch still running is kept until the
// batch ends: its lines are read from it.
func (s *Service) DeleteFile(ctx context.Context, accountID, id string) (err error) {
	defer services.Wrap(&err, "batch.DeleteFile")
	if _, err := s.File(ctx, accountID, id); err != nil {
		return err
	}
	var open bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM batches WHERE input_file_id = $1
		AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling'))`, id).Scan(&open); err != nil {
		return err
	}
	if open {
		return services.Errorf(services.CodeConflict, "The file is the input of a batch that has not ended; cancel the batch first.")
	}
	if _, err := s.pool.Exec(ctx, `UPDATE batch_files SET deleted_at = $2 WHERE id = $1`, id, s.now().UTC()); err != nil {
		return err
	}
	return s.store.Remove(id)
}
