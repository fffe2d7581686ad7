package requestlog

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
)

// An administrator looks into each discrepancy and marks it resolved with a short note of what
// was found (table discrepancy_resolutions). The discrepancies page shows the open ones by
// default, the resolved ones apart; the administrators' home counts the open ones.

// DiscrepancyState selects discrepancies by whether they are resolved.
type DiscrepancyState string

const (
	DiscrepanciesAll      DiscrepancyState = ""         // open and resolved
	DiscrepanciesOpen     DiscrepancyState = "open"     // not yet resolved
	DiscrepanciesResolved DiscrepancyState = "resolved" // marked resolved by an administrator
)

// DiscrepancyFilter selects the discrepancies Discrepancies lists.
type DiscrepancyFilter struct {
	State DiscrepancyState
	// Limit is the most listed: 1 to 500, 100 when outside.
	Limit int
}

// DiscrepancyResolution is an administrator's resolution of a discrepancy.
type DiscrepancyResolution struct {
	Note         string    `json:"note"`
	ResolvedByID string    `json:"resolved_by_id"`
	ResolvedBy   string    `json:"resolved_by"` // the administrator's email
	ResolvedAt   time.Time `json:"resolved_at"`
}

// MaxResolutionNote is the longest note of a resolution, in characters.
const MaxResolutionNote = 500

// ResolveInput marks a discrepancy resolved.
type ResolveInput struct {
	RequestID string
	By        string // the administrator's user id
	Note      string // what was found; required
}

// ResolveDiscrepancy marks the flagged request's discrepancy resolved with the note, and records
// the action in the audit log in the same transaction. A request that is not flagged is not
// found; one resolved already is a conflict: a resolution is not changed.
func (l *RequestLog) ResolveDiscrepancy(ctx context.Context, log *audit.Log, in ResolveInput) (_ DiscrepancyResolution, err error) {
	defer services.Wrap(&err, "requestlog.RequestLog.ResolveDiscrepancy(%s)", in.RequestID)
	note := strings.TrimSpace(in.Note)
	fe := services.FieldErrors{}
	switch {
	case note == "":
		fe.Add("note", "Say in a few words what was found.")
	case utf8.RuneCountInString(note) > MaxResolutionNote:
		fe.Add("note", "Keep the note to 500 characters.")
	}
	if err := fe.Err(); err != nil {
		return DiscrepancyResolution{}, err
	}
	if log == nil {
		return DiscrepancyResolution{}, errors.New("no audit log to record the resolution in")
	}
	out := DiscrepancyResolution{Note: note, ResolvedByID: in.By, ResolvedAt: l.now().UTC()}
	if l.usage == nil {
		return DiscrepancyResolution{}, errNoUsage
	}
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var flagged bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM gateway_requests WHERE request_id = $1 AND flagged_at IS NOT NULL)`,
			in.RequestID).Scan(&flagged); err != nil {
			return err
		}
		if !flagged { // the meter's flag is on its usage row
			usage, err := l.usage.MeteredUsage(ctx, tx, []string{in.RequestID})
			if err != nil {
				return err
			}
			flagged = usage[in.RequestID].Flag != ""
		}
		if !flagged {
			return services.Errorf(services.CodeNotFound, "No discrepancy is flagged on request %s.", in.RequestID)
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO discrepancy_resolutions (request_id, note, resolved_by, resolved_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (request_id) DO NOTHING`, in.RequestID, note, in.By, out.ResolvedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return services.Errorf(services.CodeConflict, "The discrepancy on request %s is resolved already.", in.RequestID)
		}
		type state struct {
			Resolved bool   `json:"resolved"`
			Note     string `json:"note,omitempty"`
		}
		return log.RecordTx(ctx, tx, audit.Record{
			ActorID: in.By, Action: audit.ActionResolveDiscrepancy, SubjectKind: "request", SubjectID: in.RequestID,
			Summary: "Marked the discrepancy on request " + in.RequestID + " resolved: " + note,
			Before:  state{}, After: state{Resolved: true, Note: note},
		})
	})
	if err != nil {
		return DiscrepancyResolution{}, err
	}
	return out, nil
}

// resolutions reads every resolution, by request id. Administrators resolve discrepancies one by one: the table
// stays small.
func (l *RequestLog) resolutions(ctx context.Context) (map[string]DiscrepancyResolution, error) {
	rows, err := l.pool.Query(ctx, `SELECT request_id, note, resolved_by::text, resolved_at FROM discrepancy_resolutions`)
	if err != nil {
		return nil, err
	}
	out := map[string]DiscrepancyResolution{}
	var id string
	var r DiscrepancyResolution
	_, err = pgx.ForEachRow(rows, []any{&id, &r.Note, &r.ResolvedByID, &r.ResolvedAt}, func() error {
		out[id] = r
		return nil
	})
	return out, err
}
