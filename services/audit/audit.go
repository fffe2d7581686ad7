// Package audit owns the finance audit log: every finance action (a close, an approval, a
// void, a payment recorded, an adjustment, a price change, a payout), and an administrator's
// resolution of a discrepancy, with who took it, when, what it acted on, and the state before
// and after as JSON.
//
// The log is append-only: a database trigger refuses UPDATE, DELETE and TRUNCATE of its table
// (audit_log). An action records its entry in the same database transaction as its own
// writes (RecordTx), so that an action without its entry, or an entry without its action,
// cannot be committed.
//
// The email of each entry's actor comes from package accounts (accounts.EmailsByID), looked up after the entries
// are read. It writes only its own table.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
)

// Action is what was done.
type Action string

// The finance actions recorded.
const (
	ActionClose       Action = "close"        // a period closed: drafts computed
	ActionApprove     Action = "approve"      // a draft approved and issued with its number
	ActionVoid        Action = "void"         // an issued document voided, with its credit note
	ActionMarkPaid    Action = "mark_paid"    // an issued document's payment recorded
	ActionAdjustment  Action = "adjustment"   // credit granted or taken back by hand
	ActionPriceChange Action = "price_change" // a price of the price book scheduled
	ActionPayout      Action = "payout"       // a provider paid
	ActionResolveFlag Action = "resolve_flag" // a flagged request's held earnings released or clawed back
	// An administrator's action recorded beside them.
	ActionResolveDiscrepancy Action = "resolve_discrepancy" // a discrepancy marked resolved, with a note
)

// Actions lists the actions in the order pages offer them as filters.
var Actions = []Action{ActionClose, ActionApprove, ActionVoid, ActionMarkPaid, ActionAdjustment, ActionPriceChange, ActionPayout,
	ActionResolveFlag, ActionResolveDiscrepancy}

// Valid reports whether a is a known action.
func (a Action) Valid() bool {
	for _, x := range Actions {
		if a == x {
			return true
		}
	}
	return false
}

// Record is an entry to add.
type Record struct {
	// ActorID is the user who acted; "" for the platform itself (an automatic close).
	ActorID string
	Action  Action
	// SubjectKind and SubjectID name what was acted on: "invoice" and its id, "period" and
	// "2026-03", "account" and its id, "price" and its id.
	SubjectKind string
	SubjectID   string
	// Summary says what happened in a sentence, for the log page.
	Summary string
	// Before and After are the state before and after, written as JSON; nil writes none.
	Before, After any
}

// Limits of a record's text.
const (
	maxSummary     = 1000
	maxSubjectKind = 40
	maxSubjectID   = 200
)

// Entry is a recorded action.
type Entry struct {
	ID          int64           `json:"id"`
	At          time.Time       `json:"at"`
	ActorID     string          `json:"actor_id,omitempty"`
	Actor       string          `json:"actor"` // the user's email, or "system"
	Action      Action          `json:"action"`
	SubjectKind string          `json:"subject_kind"`
	SubjectID   string          `json:"subject_id"`
	Summary     string          `json:"summary"`
	Before      json.RawMessage `json:"before,omitempty"`
	After       json.RawMessage `json:"after,omitempty"`
}

// SystemActor is how an action of the platform itself names its actor.
const SystemActor = "system"

// Log is the audit log on PostgreSQL.
type Log struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// New returns the audit log on the given clock (nil means time.Now).
func New(pool *pgxpool.Pool, now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{pool: pool, now: now}
}

// Record adds an entry in a database transaction of its own.
func (l *Log) Record(ctx context.Context, r Record) error {
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error { return l.RecordTx(ctx, tx, r) })
}

// RecordTx adds an entry inside the caller's database transaction, which commits or rolls
// back the entry with the action it records.
func (l *Log) RecordTx(ctx context.Context, tx pgx.Tx, r Record) (err error) {
	defer services.Wrap(&err, "audit.Record(%s %s %s)", r.Action, r.SubjectKind, r.SubjectID)
	if !r.Action.Valid() {
		return fmt.Errorf("unknown action %q", r.Action)
	}
	if r.SubjectKind == "" || len(r.SubjectKind) > maxSubjectKind || len(r.SubjectID) > maxSubjectID {
		return fmt.Errorf("a subject of kind %q and id %q", r.SubjectKind, r.SubjectID)
	}
	before, err := jsonOf(r.Before)
	if err != nil {
		return err
	}
	after, err := jsonOf(r.After)
	if err != nil {
		return err
	}
	actor := pgtype.Text{String: r.ActorID, Valid: r.ActorID != ""}
	_, err = tx.Exec(ctx, `
		INSERT INTO audit_log (at, actor_id, action, subject_kind, subject_id, summary, before, after)
		VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8)`,
		l.now().UTC(), actor, string(r.Action), r.SubjectKind, r.SubjectID, truncate(r.Summary, maxSummary), before, after)
	return err
}

// jsonOf writes v as JSON for a jsonb column; nil stays NULL.
func jsonOf(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("write the state as JSON: %w", err)
	}
	return b, nil
}

// truncate keeps at most n bytes of s, cut at a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Page sizes of List.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Filter selects entries. Zero values filter nothing.
type Filter struct {
	Action  Action
	ActorID string
	// SubjectKind and SubjectID select the entries of one subject ("invoice" and its id): a
	// document's history. SubjectID is matched only with its kind.
	SubjectKind, SubjectID string
	// From and To bound the time of the action: From <= at < To.
	From, To time.Time
	// Limit is the most entries a page holds (0: DefaultLimit); Before continues a list from
	// the Next of its previous page.
	Limit  int
	Before int64
}

// Validate names every bad field.
func (f Filter) Validate() error {
	fe := services.FieldErrors{}
	if f.Action != "" && !f.Action.Valid() {
		names := make([]string, len(Actions))
		for i, a := range Actions {
			names[i] = string(a)
		}
		fe.Add("action", "Choose one of "+strings.Join(names, ", ")+".")
	}
	if f.ActorID != "" && !isUUID(f.ActorID) {
		fe.Add("actor", "Choose a user.")
	}
	if len(f.SubjectKind) > maxSubjectKind || len(f.SubjectID) > maxSubjectID {
		fe.Add("subject", "Name a subject as the log does, like invoice and its id.")
	}
	if f.SubjectID != "" && f.SubjectKind == "" {
		fe.Add("subject_kind", "Say what kind of subject the id is of, like invoice.")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		fe.Add("to", "End after the start.")
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		fe.Add("limit", "Ask for 1 to "+strconv.Itoa(MaxLimit)+" entries a page.")
	}
	if f.Before < 0 {
		fe.Add("before", "This page link is not valid; start again from the first page.")
	}
	return fe.Err()
}

// Page is a page of entries, newest first.
type Page struct {
	Entries []Entry `json:"entries"`
	// Next is the Before of the following (older) page; 0 on the last page.
	Next int64 `json:"next_before,omitempty"`
}

// List returns the entries that match the filter, newest first.
func (l *Log) List(ctx context.Context, f Filter) (_ Page, err error) {
	defer services.Wrap(&err, "audit.List")
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.Action != "" {
		add("l.action = $?", string(f.Action))
	}
	if f.ActorID != "" {
		add("l.actor_id = $?::uuid", f.ActorID)
	}
	// No index leads with the subject: a subject's entries are found by reading the log, which
	// holds one entry per finance action (see docs/invoicing.md, "Pages and API").
	if f.SubjectKind != "" {
		add("l.subject_kind = $?", f.SubjectKind)
	}
	if f.SubjectID != "" {
		add("l.subject_id = $?", f.SubjectID)
	}
	if !f.From.IsZero() {
		add("l.at >= $?", f.From.UTC())
	}
	if !f.To.IsZero() {
		add("l.at < $?", f.To.UTC())
	}
	if f.Before > 0 {
		add("l.id < $?", f.Before)
	}
	where := ""
	if len(conds) > 0 {
		where = "WHERE " + strings.Join(conds, " AND ")
	}
	args = append(args, limit+1)
	rows, err := l.pool.Query(ctx, `
		SELECT l.id, l.at, coalesce(l.actor_id::text, ''), l.action, l.subject_kind, l.subject_id, l.summary,
			l.before, l.after
		FROM audit_log l
		`+where+`
		ORDER BY l.id DESC
		LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return Page{}, err
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		var before, after []byte
		err := r.Scan(&e.ID, &e.At, &e.ActorID, &e.Action, &e.SubjectKind, &e.SubjectID, &e.Summary, &before, &after)
		e.At = e.At.UTC()
		e.Before, e.After = before, after
		return e, err
	})
	if err != nil {
		return Page{}, err
	}
	actors := make([]string, len(entries))
	for i, e := range entries {
		actors[i] = e.ActorID
	}
	emails, err := accounts.EmailsByID(ctx, l.pool, actors)
	if err != nil {
		return Page{}, err
	}
	for i, e := range entries {
		entries[i].Actor = emails[e.ActorID]
		if e.ActorID == "" {
			entries[i].Actor = SystemActor
		}
	}
	page := Page{Entries: entries}
	if len(entries) > limit {
		page.Entries = entries[:limit]
		page.Next = page.Entries[limit-1].ID
	}
	return page, nil
}

// isUUID reports whether s is a uuid as PostgreSQL writes it.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
