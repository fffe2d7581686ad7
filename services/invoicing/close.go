package invoicing

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/progress"
)

// The close of a period (see docs/invoicing.md, "The close"): one draft invoice per customer
// account with activity in the period and one draft statement per provider, computed from
// the hourly rollups and the ledger, chunk by chunk of accounts, so that its memory holds one
// chunk whatever the number of events. A close takes the period's advisory lock for its whole
// run, so that two processes never close one period at once; the unique indexes hold one
// document per account and period besides.

// CloseInput starts a close.
type CloseInput struct {
	Period Period
	// By is the finance user who closes; "" for the platform itself (the automatic close).
	By string
	// Progress, when set, is called after each chunk and at the end with how far the close is.
	Progress func(CloseProgress)
}

// CloseStatus is where a period's close stands.
type CloseStatus string

// The statuses of a close.
const (
	CloseRunning CloseStatus = "running"
	CloseDone    CloseStatus = "done"
	CloseFailed  CloseStatus = "failed"
)

// CloseProgress is a period's close as finance pages poll it (CloseProgressOf) and the close
// reports it.
type CloseProgress struct {
	Period         Period      `json:"period"`
	Status         CloseStatus `json:"status"`
	StartedBy      string      `json:"started_by"` // the user's email, or "system"
	StartedAt      time.Time   `json:"started_at"`
	FinishedAt     *time.Time  `json:"finished_at,omitempty"`
	Runs           int         `json:"runs"` // how many times the period was closed
	CustomersTotal int         `json:"customers_total"`
	CustomersDone  int         `json:"customers_done"`
	ProvidersTotal int         `json:"providers_total"`
	ProvidersDone  int         `json:"providers_done"`
	Invoices       int         `json:"invoices"`   // drafts written, new or refreshed
	Statements     int         `json:"statements"` // likewise
	LeftIssued     int         `json:"left_issued"`
	Problem        string      `json:"problem,omitempty"`
	// Marks are how far the run was at its last reports, oldest first: those within
	// progress.Window of the last and the one before them (Reading).
	Marks []CloseMark `json:"-"`
}

// CloseMark is how many accounts (customers and providers) a close had done at a report.
type CloseMark struct {
	At   time.Time `json:"at"`
	Done int       `json:"done"`
}

// Reading is how far the close is at now, for its page (docs/progress.md): accounts done of
// all, and how many were done since the earliest mark within the window, over the time since it.
func (pr CloseProgress) Reading(now time.Time) progress.Reading {
	r := progress.Reading{Done: int64(pr.CustomersDone + pr.ProvidersDone), Total: int64(pr.CustomersTotal + pr.ProvidersTotal),
		Running: pr.Status == CloseRunning}
	if !r.Running || len(pr.Marks) == 0 {
		return r
	}
	base := pr.Marks[len(pr.Marks)-1]
	for _, m := range pr.Marks {
		if !m.At.Before(now.Add(-progress.Window)) {
			base = m
			break
		}
	}
	r.Recent, r.Span = r.Done-int64(base.Done), max(0, now.Sub(base.At))
	return r
}

// mark records how far the run is now, keeping the marks within progress.Window and the one
// before them.
func (r *closeRun) mark() {
	now := r.s.now().UTC()
	marks := append(r.progress.Marks, CloseMark{At: now, Done: r.progress.CustomersDone + r.progress.ProvidersDone})
	first := 0
	for first+1 < len(marks) && marks[first+1].At.Before(now.Add(-progress.Window)) {
		first++
	}
	r.progress.Marks = marks[first:]
}

// Close computes the period's drafts: new ones where none exists, refreshed ones where a
// draft does, and leaves every issued document as it is. It refuses a period that has not
// ended, and one that another close is running for (a conflict).
func (s *Service) Close(ctx context.Context, in CloseInput) (_ CloseProgress, err error) {
	defer services.Wrap(&err, "invoicing.Close(%s)", in.Period)
	p := in.Period
	now := s.now().UTC()
	switch {
	case p.IsZero():
		return CloseProgress{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"period": "Choose the month to close, like 2026-03."}}
	case p.End().After(now):
		return CloseProgress{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"period": fmt.Sprintf("%s has not ended: it can be closed from %s.", p, p.End().Format("2006-01-02 15:04 UTC"))}}
	case in.By != "" && !isUUID(in.By):
		return CloseProgress{}, services.Errorf(services.CodeInvalid, "A close is made by a user, or by the platform itself.")
	}
	first, found, err := s.FirstActivity(ctx)
	if err != nil {
		return CloseProgress{}, err
	}
	switch {
	case !found:
		return CloseProgress{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"period": "The platform has no usage and no ledger movement yet: there is nothing to close."}}
	case !p.End().After(first):
		return CloseProgress{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"period": fmt.Sprintf("%s ended before the platform's first usage (%s): there is nothing to close. "+
				"The first period to close is %s.", p, first.UTC().Format("2006-01-02 15:04 UTC"), PeriodOf(first.UTC()))}}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return CloseProgress{}, err
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockClose, p.lockKey()).Scan(&locked); err != nil {
		return CloseProgress{}, err
	}
	if !locked {
		return CloseProgress{}, services.Errorf(services.CodeConflict, "A close of %s is running already; its progress shows when it is done.", p)
	}
	defer func() {
		// On a connection that is still good the lock goes back; a broken one takes it along.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, $2)`, lockClose, p.lockKey())
	}()

	run := &closeRun{s: s, conn: conn, p: p, in: in, now: now}
	if err := run.start(ctx); err != nil {
		return CloseProgress{}, err
	}
	if err := run.closeAll(ctx); err != nil {
		run.fail(ctx, err)
		return run.progress, err
	}
	return run.progress, nil
}

// FirstActivity is when the platform's money first moved: its first hour of usage or its first
// ledger transaction (a credit bought before any request), whichever is earlier; found is false
// while there is neither. No period ending at or before it has anything to close.
func (s *Service) FirstActivity(ctx context.Context) (first time.Time, found bool, err error) {
	defer services.Wrap(&err, "invoicing.FirstActivity")
	var usage, moved time.Time
	var used, anyMoved bool
	b := &pgx.Batch{}
	metering.QueueFirstRollupHour(b, &usage, &used)
	ledger.QueueFirstTransaction(b, &moved, &anyMoved)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return time.Time{}, false, err
	}
	switch {
	case used && (!anyMoved || usage.Before(moved)):
		return usage, true, nil
	case anyMoved:
		return moved, true, nil
	}
	return time.Time{}, false, nil
}

// closeRun is one run of a period's close.
type closeRun struct {
	s        *Service
	conn     *pgxpool.Conn // holds the period's lock and the run's lists of accounts
	p        Period
	in       CloseInput
	now      time.Time
	lateOpen bool
	bound    int64
	prices   map[int64]price
	progress CloseProgress
	checks   []checkCandidate // the sample of invoices checked against their usage rows
	seen     int              // active accounts seen, for the sample
}

// checkCandidate is a draft invoice to check exactly against its usage rows.
type checkCandidate struct{ invoiceID, accountID string }

func (r *closeRun) start(ctx context.Context) error {
	by := pgtype.Text{String: r.in.By, Valid: r.in.By != ""}
	if _, err := r.conn.Exec(ctx, `
		INSERT INTO invoice_closes (period, status, started_by, started_at, runs)
		VALUES ($1, 'running', $2::uuid, $3, 1)
		ON CONFLICT (period) DO UPDATE SET status = 'running', started_by = EXCLUDED.started_by,
			started_at = EXCLUDED.started_at, finished_at = NULL, runs = invoice_closes.runs + 1, customers_total = 0,
			customers_done = 0, providers_total = 0, providers_done = 0, invoices = 0, statements = 0, left_issued = 0,
			problem = '', progress_marks = '[]'`, r.p.Start(), by, r.now); err != nil {
		return wrapf(err, "invoicing: record the close's start")
	}
	var err error
	if r.progress, err = r.s.CloseProgressOf(ctx, r.p); err != nil {
		return err
	}
	if err := r.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM invoice_closes WHERE period = $1)`,
		r.p.Prev().Start()).Scan(&r.lateOpen); err != nil {
		return err
	}
	if r.bound, err = ledgerBound(ctx, r.conn, r.p.Start()); err != nil {
		return err
	}
	r.prices, err = loadPrices(ctx, r.conn)
	return err
}

// closeAll drafts the invoices, then the statements, then checks the sample.
func (r *closeRun) closeAll(ctx context.Context) error {
	from := r.p.Start()
	if r.lateOpen {
		from = r.p.Prev().Start()
	}
	// The accounts and providers with activity in the period: rollups (of the period before too,
	// whose late usage may be carried), ledger transactions (for providers, credit notes' claw
	// backs), and drafts already made. The rollups' and the ledger's are read from their owners;
	// all are listed in a table of the run's session and read a chunk at a time.
	if _, err := r.conn.Exec(ctx, `
		DROP TABLE IF EXISTS pg_temp.close_customers, pg_temp.close_providers;
		CREATE TEMP TABLE close_customers (id uuid PRIMARY KEY);
		CREATE TEMP TABLE close_providers (id uuid PRIMARY KEY)`); err != nil {
		return err
	}
	defer func() {
		_, _ = r.conn.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS pg_temp.close_customers, pg_temp.close_providers`)
	}()
	var usedBy, movedFor, servedBy, clawedFrom []string
	b := &pgx.Batch{}
	metering.QueueRolledUpCustomers(b, from, r.p.End(), &usedBy)
	ledger.QueueOwnersMoved(b, ledger.AccountCustomerCredit, "", r.p.Start(), r.p.End(), &movedFor)
	metering.QueueRolledUpProviders(b, from, r.p.End(), &servedBy)
	ledger.QueueOwnersMoved(b, ledger.AccountProviderPayable, ledger.TransactionCreditNote, r.p.Start(), r.p.End(), &clawedFrom)
	if err := r.conn.SendBatch(ctx, b).Close(); err != nil {
		return wrapf(err, "invoicing: list the period's customers and providers")
	}
	b = &pgx.Batch{}
	b.Queue(`
		WITH listed AS (
			INSERT INTO close_customers (id)
			SELECT unnest($1::text[]::uuid[])
			UNION
			SELECT unnest($2::text[]::uuid[])
			UNION
			SELECT account_id FROM invoices WHERE period = $3::date AND status = 'draft'
			RETURNING 1)
		SELECT count(*) FROM listed`, usedBy, movedFor, r.p.Start()).QueryRow(func(row pgx.Row) error {
		return wrapf(row.Scan(&r.progress.CustomersTotal), "invoicing: list the period's customers")
	})
	b.Queue(`
		WITH listed AS (
			INSERT INTO close_providers (id)
			SELECT unnest($1::text[]::uuid[])
			UNION
			SELECT unnest($2::text[]::uuid[])
			UNION
			SELECT provider_account_id FROM statements WHERE period = $3::date AND status = 'draft'
			RETURNING 1)
		SELECT count(*) FROM listed`, servedBy, clawedFrom, r.p.Start()).QueryRow(func(row pgx.Row) error {
		return wrapf(row.Scan(&r.progress.ProvidersTotal), "invoicing: list the period's providers")
	})
	if err := r.conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if err := r.report(ctx); err != nil {
		return err
	}
	if err := r.eachChunk(ctx, "close_customers", r.customers); err != nil {
		return err
	}
	if err := r.eachChunk(ctx, "close_providers", r.providers); err != nil {
		return err
	}
	if err := r.checkSample(ctx); err != nil {
		return err
	}
	return r.finish(ctx)
}

// eachChunk hands the ids listed in table to do, a chunk at a time in id order.
func (r *closeRun) eachChunk(ctx context.Context, table string, do func(ctx context.Context, ids []string) error) error {
	last := "00000000-0000-0000-0000-000000000000" // below every id gen_random_uuid makes
	for {
		rows, err := r.conn.Query(ctx, `SELECT id::text FROM `+table+` WHERE id > $1::uuid ORDER BY id LIMIT $2`,
			last, r.s.cfg.Chunk)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := do(ctx, ids); err != nil {
			return err
		}
		if err := r.report(ctx); err != nil {
			return err
		}
		last = ids[len(ids)-1]
	}
}

// customers computes and writes a chunk's invoice drafts in one transaction.
func (r *closeRun) customers(ctx context.Context, ids []string) error {
	return pgx.BeginFunc(ctx, r.s.pool, func(tx pgx.Tx) error {
		if err := lockAccounts(ctx, tx, lockCustomer, ids); err != nil {
			return err
		}
		inputs, err := loadCustomers(ctx, tx, r.p, r.lateOpen, r.bound, ids)
		if err != nil {
			return err
		}
		var drafts []pendingInvoice
		for _, id := range ids {
			in := inputs[id]
			w, ok, err := r.s.draftInvoice(r.p, in, r.prices)
			if err != nil {
				return err
			}
			if in.current != nil && in.current.status != string(StatusDraft) {
				r.progress.LeftIssued++
			}
			if !ok {
				continue
			}
			drafts = append(drafts, w)
			r.sample(w)
		}
		if err := writeInvoices(ctx, tx, r.p, r.now, drafts); err != nil {
			return err
		}
		r.progress.CustomersDone += len(ids)
		r.progress.Invoices += len(drafts)
		return nil
	})
}

// draftInvoice computes an account's draft for the period: ok is false when the account has
// nothing to invoice, or its invoice is issued already and left alone.
func (s *Service) draftInvoice(p Period, in *customerInputs, prices map[int64]price) (pendingInvoice, bool, error) {
	if in.current != nil && in.current.status != string(StatusDraft) {
		return pendingInvoice{}, false, nil
	}
	d, err := buildInvoice(p, in, prices)
	if err != nil || !d.active {
		return pendingInvoice{}, false, wrapf(err, "invoicing: the invoice of %s for %s", in.accountID, p)
	}
	w := pendingInvoice{accountID: in.accountID, d: d}
	if in.current != nil {
		w.id, w.existed, w.poNumber = in.current.id, true, in.current.poNumber
	} else if w.id, err = newID(); err != nil {
		return pendingInvoice{}, false, err
	}
	return w, true, nil
}

// sample keeps a uniform sample of the drafts for the exact check (reservoir sampling).
func (r *closeRun) sample(w pendingInvoice) {
	k := r.s.cfg.UsageChecks
	if k <= 0 {
		return
	}
	r.seen++
	c := checkCandidate{invoiceID: w.id, accountID: w.accountID}
	if len(r.checks) < k {
		r.checks = append(r.checks, c)
	} else if j := rand.IntN(r.seen); j < k {
		r.checks[j] = c
	}
}

// providers computes and writes a chunk's statement drafts in one transaction.
func (r *closeRun) providers(ctx context.Context, ids []string) error {
	return pgx.BeginFunc(ctx, r.s.pool, func(tx pgx.Tx) error {
		if err := lockAccounts(ctx, tx, lockProvider, ids); err != nil {
			return err
		}
		inputs, err := loadProviders(ctx, tx, r.p, r.lateOpen, r.bound, ids)
		if err != nil {
			return err
		}
		var drafts []pendingStatement
		for _, id := range ids {
			in := inputs[id]
			if in.current != nil && in.current.status != string(StatusDraft) {
				r.progress.LeftIssued++
			}
			w, ok, err := r.s.draftStatement(r.p, in)
			if err != nil {
				return err
			}
			if ok {
				drafts = append(drafts, w)
			}
		}
		if err := writeStatements(ctx, tx, r.p, r.now, r.s.cfg.MinimumPayout, drafts); err != nil {
			return err
		}
		r.progress.ProvidersDone += len(ids)
		r.progress.Statements += len(drafts)
		return nil
	})
}

// draftStatement computes a provider's draft for the period, as draftInvoice does.
func (s *Service) draftStatement(p Period, in *providerInputs) (pendingStatement, bool, error) {
	if in.current != nil && in.current.status != string(StatusDraft) {
		return pendingStatement{}, false, nil
	}
	d, err := buildStatement(p, in, s.cfg.MinimumPayout)
	if err != nil || !d.active {
		return pendingStatement{}, false, wrapf(err, "invoicing: the statement of %s for %s", in.providerID, p)
	}
	w := pendingStatement{providerID: in.providerID, d: d}
	if in.current != nil {
		w.id, w.existed = in.current.id, true
	} else if w.id, err = newID(); err != nil {
		return pendingStatement{}, false, err
	}
	return w, true, nil
}

// checkSample checks the sampled drafts exactly against their usage rows and flags those that
// differ.
func (r *closeRun) checkSample(ctx context.Context) error {
	for _, c := range r.checks {
		check, err := r.s.checkUsage(ctx, r.conn, c.accountID, r.p)
		if err != nil {
			return err
		}
		if check.Matches || check.RowsDropped {
			continue
		}
		if _, err := r.conn.Exec(ctx, `
			UPDATE invoices SET flags = array_append(flags, $2), flag_notes = array_append(flag_notes, 'the total differs from the usage rows it sums')
			WHERE id = $1 AND status = 'draft' AND NOT ($2 = ANY (flags))`, c.invoiceID, string(FlagUsageMismatch)); err != nil {
			return err
		}
		r.s.log.Warn("an invoice's rollups differ from its usage rows", "period", r.p.String(), "account", c.accountID,
			"invoice", c.invoiceID, "differences", len(check.Differences))
	}
	return nil
}

// report writes the progress to the close's row and hands it to the caller.
func (r *closeRun) report(ctx context.Context) error {
	r.mark()
	pr := r.progress
	marks, err := json.Marshal(pr.Marks)
	if err != nil {
		return err
	}
	if _, err := r.conn.Exec(ctx, `
		UPDATE invoice_closes SET customers_total = $2, customers_done = $3, providers_total = $4, providers_done = $5,
			invoices = $6, statements = $7, left_issued = $8, progress_marks = $9
		WHERE period = $1`, r.p.Start(), pr.CustomersTotal, pr.CustomersDone, pr.ProvidersTotal, pr.ProvidersDone,
		pr.Invoices, pr.Statements, pr.LeftIssued, marks); err != nil {
		return wrapf(err, "invoicing: record the close's progress")
	}
	if r.in.Progress != nil {
		r.in.Progress(pr)
	}
	return nil
}

// finish records the close as done, with its audit entry, in one transaction.
func (r *closeRun) finish(ctx context.Context) error {
	done := r.s.now().UTC()
	r.progress.Status, r.progress.FinishedAt = CloseDone, &done
	pr := r.progress
	err := pgx.BeginFunc(ctx, r.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE invoice_closes SET status = 'done', finished_at = $2 WHERE period = $1`,
			r.p.Start(), done); err != nil {
			return err
		}
		return r.s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: r.in.By, Action: audit.ActionClose, SubjectKind: "period", SubjectID: r.p.String(),
			Summary: fmt.Sprintf("Closed %s: %d invoice and %d statement drafts written, %d issued documents left as they were",
				r.p, pr.Invoices, pr.Statements, pr.LeftIssued),
			After: pr,
		})
	})
	if err != nil {
		return wrapf(err, "invoicing: record the close as done")
	}
	if r.in.Progress != nil {
		r.in.Progress(pr)
	}
	return nil
}

// fail records the close as failed with what went wrong; a later close runs it again.
func (r *closeRun) fail(ctx context.Context, cause error) {
	r.progress.Status, r.progress.Problem = CloseFailed, truncate(cause.Error(), 500)
	done := r.s.now().UTC()
	r.progress.FinishedAt = &done
	if _, err := r.conn.Exec(context.WithoutCancel(ctx), `UPDATE invoice_closes SET status = 'failed', finished_at = $2,
		problem = $3 WHERE period = $1`, r.p.Start(), done, r.progress.Problem); err != nil {
		r.s.log.Warn("recording a failed close failed", "period", r.p.String(), "err", err)
	}
	if r.in.Progress != nil {
		r.in.Progress(r.progress)
	}
}

// CloseProgressOf returns the period's close as it stands: running, done or failed, with its
// counts. A period never closed is not found.
func (s *Service) CloseProgressOf(ctx context.Context, p Period) (_ CloseProgress, err error) {
	defer services.Wrap(&err, "invoicing.CloseProgressOf(%s)", p)
	list, err := s.readCloses(ctx, ` WHERE c.period = $1`, p.Start())
	if err != nil {
		return CloseProgress{}, err
	}
	if len(list) == 0 {
		return CloseProgress{}, services.Errorf(services.CodeNotFound, "%s has not been closed.", p)
	}
	return s.settleInterrupted(ctx, list[0])
}

// interruptedProblem is the problem of a close whose process stopped while it ran.
const interruptedProblem = "The close stopped before it finished: the process running it ended. Close the period again to complete it."

// settleInterrupted reports a close recorded as running that nothing runs any more as failed.
// A close takes its period's lock before its row says running, and gives it back only after
// the row says done or failed; a process that stops while closing gives the lock back with
// its connection and leaves the row running. So a row that still says running when read
// after the lock was seen free was left by a process that stopped: closing the period again
// completes it (see docs/invoicing.md, "Pages and API").
func (s *Service) settleInterrupted(ctx context.Context, pr CloseProgress) (CloseProgress, error) {
	if pr.Status != CloseRunning {
		return pr, nil
	}
	var held bool
	if err := s.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid::int8 = $1 AND objid::int8 = $2 AND objsubid = 2)`,
		int64(lockClose), int64(pr.Period.lockKey())).Scan(&held); err != nil {
		return CloseProgress{}, err
	}
	if held {
		return pr, nil
	}
	list, err := s.readCloses(ctx, ` WHERE c.period = $1`, pr.Period.Start())
	if err != nil {
		return CloseProgress{}, err
	}
	if len(list) != 1 {
		return CloseProgress{}, pgx.ErrNoRows
	}
	again := list[0]
	if again.Status == CloseRunning {
		again.Status, again.Problem = CloseFailed, interruptedProblem
	}
	return again, nil
}

// Closes lists the periods closed, latest first.
func (s *Service) Closes(ctx context.Context, limit int) (_ []CloseProgress, err error) {
	defer services.Wrap(&err, "invoicing.Closes")
	if limit <= 0 || limit > 120 {
		limit = 24
	}
	list, err := s.readCloses(ctx, ` ORDER BY c.period DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i], err = s.settleInterrupted(ctx, list[i]); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// readCloses reads the closes that rest selects (a WHERE, an ORDER BY), each started by the
// email of the user who started it (accounts.EmailsByID), or "system".
func (s *Service) readCloses(ctx context.Context, rest string, args ...any) ([]CloseProgress, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT c.period, c.status, coalesce(c.started_by::text, ''), c.started_at, c.finished_at, c.runs, c.customers_total,
			c.customers_done, c.providers_total, c.providers_done, c.invoices, c.statements, c.left_issued, c.problem,
			c.progress_marks
		FROM invoice_closes c`+rest, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanClose)
	if err != nil {
		return nil, err
	}
	starters := make([]string, len(list))
	for i, pr := range list {
		starters[i] = pr.StartedBy
	}
	emails, err := accounts.EmailsByID(ctx, s.pool, starters)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if email, ok := emails[list[i].StartedBy]; ok {
			list[i].StartedBy = email
		} else {
			list[i].StartedBy = "system"
		}
	}
	return list, nil
}

// scanClose reads a close, StartedBy holding the id of the user who started it ("" for the
// platform) until readCloses writes the user's email there.
func scanClose(r pgx.CollectableRow) (CloseProgress, error) {
	var pr CloseProgress
	var period time.Time
	var marks []byte
	err := r.Scan(&period, &pr.Status, &pr.StartedBy, &pr.StartedAt, &pr.FinishedAt, &pr.Runs, &pr.CustomersTotal,
		&pr.CustomersDone, &pr.ProvidersTotal, &pr.ProvidersDone, &pr.Invoices, &pr.Statements, &pr.LeftIssued, &pr.Problem, &marks)
	if err != nil {
		return CloseProgress{}, err
	}
	if err := json.Unmarshal(marks, &pr.Marks); err != nil {
		return CloseProgress{}, err
	}
	pr.Period, pr.StartedAt = periodOfDate(period), pr.StartedAt.UTC()
	if pr.FinishedAt != nil {
		t := pr.FinishedAt.UTC()
		pr.FinishedAt = &t
	}
	return pr, err
}

// truncate keeps at most n bytes of s.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
