package audit

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
)

// Entries are listed newest first with who acted, filtered by action, actor and time, and
// paged; the platform's own actions name "system" as their actor.
func TestRecordAndList(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 4, 4, 9, 0, 0, 0, time.UTC)
	log := New(pool, func() time.Time { return now })
	org := fixtures.Account(t, pool, "gpumarket")
	user := func(email string) string { return fixtures.User(t, pool, org, email, "finance") }
	alice, bob := user("alice@example.test"), user("bob@example.test")
	records := []Record{
		{ActorID: "", Action: ActionClose, SubjectKind: "period", SubjectID: "2026-03", Summary: "Closed 2026-03",
			After: map[string]int{"invoices": 2}},
		{ActorID: alice, Action: ActionApprove, SubjectKind: "invoice", SubjectID: "i1", Summary: "Issued GPM-2026-000001",
			Before: map[string]string{"status": "draft"}, After: map[string]string{"status": "issued"}},
		{ActorID: bob, Action: ActionVoid, SubjectKind: "invoice", SubjectID: "i1", Summary: "Voided GPM-2026-000001"},
	}
	for i, r := range records {
		now = now.Add(time.Minute)
		if err := log.Record(ctx, r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	page, err := log.List(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 3 || page.Entries[0].Action != ActionVoid || page.Entries[0].Actor != "bob@example.test" ||
		page.Entries[2].Actor != SystemActor || page.Entries[2].ActorID != "" {
		t.Fatalf("entries %+v", page.Entries)
	}
	approve := page.Entries[1]
	var before, after map[string]string
	if json.Unmarshal(approve.Before, &before) != nil || json.Unmarshal(approve.After, &after) != nil ||
		before["status"] != "draft" || after["status"] != "issued" || !approve.At.Equal(time.Date(2026, 4, 4, 9, 2, 0, 0, time.UTC)) {
		t.Errorf("the approval: %+v", approve)
	}
	if page.Entries[0].Before != nil {
		t.Errorf("an entry recorded with no before has one: %s", page.Entries[0].Before)
	}

	for _, c := range []struct {
		name string
		f    Filter
		want []Action
	}{
		{"by action", Filter{Action: ActionApprove}, []Action{ActionApprove}},
		{"by actor", Filter{ActorID: bob}, []Action{ActionVoid}},
		{"by subject", Filter{SubjectKind: "invoice", SubjectID: "i1"}, []Action{ActionVoid, ActionApprove}},
		{"by kind of subject", Filter{SubjectKind: "period"}, []Action{ActionClose}},
		{"another subject", Filter{SubjectKind: "invoice", SubjectID: "i2"}, nil},
		{"by time", Filter{From: time.Date(2026, 4, 4, 9, 1, 30, 0, time.UTC), To: time.Date(2026, 4, 4, 9, 2, 30, 0, time.UTC)}, []Action{ActionApprove}},
		{"a page of two", Filter{Limit: 2}, []Action{ActionVoid, ActionApprove}},
		{"the next page", Filter{Limit: 2, Before: page.Entries[1].ID}, []Action{ActionClose}},
	} {
		got, err := log.List(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var actions []Action
		for _, e := range got.Entries {
			actions = append(actions, e.Action)
		}
		if len(actions) != len(c.want) || (len(actions) > 0 && actions[0] != c.want[0]) || (len(actions) > 1 && actions[1] != c.want[1]) {
			t.Errorf("%s: %v, want %v", c.name, actions, c.want)
		}
	}
	if first, _ := log.List(ctx, Filter{Limit: 2}); first.Next != page.Entries[1].ID {
		t.Errorf("the first page of two continues from %d, want %d", first.Next, page.Entries[1].ID)
	}

	var e *services.Error
	if _, err := log.List(ctx, Filter{Action: "delete_everything"}); !errors.As(err, &e) || e.Fields["action"] == "" {
		t.Errorf("an unknown action filter: %v", err)
	}
	if _, err := log.List(ctx, Filter{ActorID: "bob"}); !errors.As(err, &e) || e.Fields["actor"] == "" {
		t.Errorf("an actor that is no user id: %v", err)
	}
	if _, err := log.List(ctx, Filter{SubjectID: "i1"}); !errors.As(err, &e) || e.Fields["subject_kind"] == "" {
		t.Errorf("a subject id without its kind: %v", err)
	}
	if err := log.Record(ctx, Record{Action: "rewrite_history", SubjectKind: "x"}); err == nil {
		t.Error("an unknown action was recorded")
	}
}

// The log is append-only: the database refuses to change, delete or truncate an entry, even
// for a connection that writes SQL itself.
func TestTheLogIsAppendOnly(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	log := New(pool, nil)
	if err := log.Record(ctx, Record{Action: ActionAdjustment, SubjectKind: "account", SubjectID: "a", Summary: "Granted $5.00"}); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`UPDATE audit_log SET summary = 'Granted $500.00'`,
		`DELETE FROM audit_log`,
		`TRUNCATE audit_log`,
	} {
		_, err := pool.Exec(ctx, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23001" {
			t.Errorf("%s: %v, want refused (restrict_violation)", sql, err)
		}
	}
	var summary string
	if err := pool.QueryRow(ctx, `SELECT summary FROM audit_log`).Scan(&summary); err != nil || summary != "Granted $5.00" {
		t.Errorf("the entry after the attempts: %q, %v", summary, err)
	}
	// An entry recorded in a transaction that rolls back is not kept: it goes with its action.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := log.RecordTx(ctx, tx, Record{Action: ActionVoid, SubjectKind: "invoice", SubjectID: "i"}); err != nil {
			return err
		}
		return context.Canceled
	})
	var n int
	if err == nil || pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n) != nil || n != 1 {
		t.Errorf("after a rolled back action: %d entries, %v", n, err)
	}
}
