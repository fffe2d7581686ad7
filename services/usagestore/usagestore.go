// Package usagestore keeps the raw usage table, usage_events, one partition per calendar month
// (UTC) of the time each request finished (docs/usage-storage.md). It makes the months ahead
// before any usage of theirs arrives, makes on demand a month the meter is handed that has none
// (MakeMonths), and, when a retention is set, drops the oldest months once their rows are
// rolled up and their documents final.
//
// Invariants: every month the platform writes has its own partition, so the DEFAULT partition
// stays empty (a row found there is moved to its month when that month is made); a month whose
// documents are not all final is never dropped; a month is dropped whole, its usage rows and
// their keys (usage_event_keys) in one transaction.
//
// It keeps the monthly partitions of metering's usage_events table: makes them and, under the
// retention, drops them (docs/usage-storage.md); usage_months_dropped is its own. Attaching a
// month's partition to usage_events, and detaching it with its rows' keys (usage_event_keys),
// is package metering's, through Config's AttachMonth and DetachMonth. Whether a month's
// documents are final and how many requests its rollups hold it asks their owners, through
// Config's MonthNotFinal (package invoicing) and RolledUpRequests (package metering). Both
// packages import this one, so their functions are handed in.
package usagestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/usage"
)

// Defaults of Config.
const (
	// DefaultMonthsAhead is how many months after the current one have their partition made
	// ahead.
	DefaultMonthsAhead = 3
	// DefaultEvery is how often the platform makes the months ahead and applies the retention.
	DefaultEvery = 24 * time.Hour
	// lockTimeout is the longest a partition's creation or drop waits for the table's lock
	// behind long readers; past it, the work is left to the next pass (or, for the meter, the
	// batch goes on and any row of a month still unmade waits in the DEFAULT partition).
	lockTimeout = "5s"
)

// Config is what a Store needs.
type Config struct {
	Pool *pgxpool.Pool
	// MonthsAhead is how many months after the current one are made ahead
	// (DefaultMonthsAhead when 0).
	MonthsAhead int
	// RetentionMonths is how many whole months a month's usage rows are kept after it ends:
	// 0 keeps them forever. A month is dropped only when its documents are final (Retire).
	RetentionMonths int
	// MonthNotFinal and RolledUpRequests are the retention's checks, read in its transaction
	// from the packages that own what they read: invoicing.MonthNotFinal (why a month's documents
	// are not all final, "" when they are) and metering.RolledUpRequests (the requests the
	// rollups hold of [from, to)). A retention needs both: Retire refuses to run without them.
	MonthNotFinal    func(ctx context.Context, tx pgx.Tx, month time.Time) (string, error)
	RolledUpRequests func(ctx context.Context, tx pgx.Tx, from, to time.Time) (int64, error)
	// AttachMonth and DetachMonth change usage_events' partitions, in the transaction that makes
	// or drops a month's: metering.AttachMonth attaches the month's partition (PartitionName), made
	// with the month's bounds (BoundLiteral); metering.DetachMonth deletes the keys of its rows and
	// detaches it. Making a month needs AttachMonth; a retention needs DetachMonth.
	AttachMonth func(ctx context.Context, tx pgx.Tx, month time.Time) error
	DetachMonth func(ctx context.Context, tx pgx.Tx, month time.Time) error
	// Every is how often Start's loop runs Maintain (DefaultEvery when 0).
	Every time.Duration
	Now   func() time.Time
	Log   *slog.Logger
}

// Store keeps usage_events' monthly partitions.
type Store struct {
	cfg Config

	mu   sync.Mutex
	made map[time.Time]bool // months known to have their partition, for MakeMonths

	stop context.CancelFunc
	done chan struct{}
}

// New returns a Store; Start runs its loop.
func New(cfg Config) *Store {
	if cfg.MonthsAhead <= 0 {
		cfg.MonthsAhead = DefaultMonthsAhead
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Store{cfg: cfg, made: map[time.Time]bool{}}
}

// MonthOf is the first instant (UTC) of the calendar month holding t.
func MonthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// PartitionName is the name of month's partition of usage_events.
func PartitionName(month time.Time) string {
	return fmt.Sprintf("usage_events_%04d_%02d", month.Year(), int(month.Month()))
}

const defaultPartition = "usage_events_default"

var partitionRE = regexp.MustCompile(`^usage_events_(\d{4})_(\d{2})$`)

// Months lists the months that have their partition, oldest first.
func (s *Store) Months(ctx context.Context) (_ []time.Time, err error) {
	defer services.Wrap(&err, "usagestore.Months")
	rows, err := s.cfg.Pool.Query(ctx, `
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'usage_events'::regclass`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var months []time.Time
	for _, n := range names {
		m := partitionRE.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		y, _ := strconv.Atoi(m[1])
		mo, _ := strconv.Atoi(m[2])
		months = append(months, time.Date(y, time.Month(mo), 1, 0, 0, 0, 0, time.UTC))
	}
	sort.Slice(months, func(i, j int) bool { return months[i].Before(months[j]) })
	return months, nil
}

// EnsureAhead makes the partitions of the months the meter may still be handed usage of (from
// the month of the oldest event it accepts, usage.MaxEventAge ago) through the current month
// and MonthsAhead more, and of every month that has rows waiting in the DEFAULT partition.
func (s *Store) EnsureAhead(ctx context.Context) (err error) {
	defer services.Wrap(&err, "usagestore.EnsureAhead")
	now := s.cfg.Now()
	var months []time.Time
	last := MonthOf(now).AddDate(0, s.cfg.MonthsAhead, 0)
	for m := MonthOf(now.Add(-usage.MaxEventAge)); !m.After(last); m = m.AddDate(0, 1, 0) {
		months = append(months, m)
	}
	rows, err := s.cfg.Pool.Query(ctx, `SELECT DISTINCT date_trunc('month', occurred_at, 'UTC') FROM `+defaultPartition)
	if err != nil {
		return err
	}
	waiting, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return err
	}
	return s.make(ctx, append(months, waiting...), true)
}

// MakeMonths makes the partition of each month holding one of times that has none yet. The
// meter calls it before it writes a batch, so that every row goes to its month's partition;
// months already known cost a map lookup.
func (s *Store) MakeMonths(ctx context.Context, times []time.Time) error {
	var months []time.Time
	s.mu.Lock()
	for _, t := range times {
		if m := MonthOf(t); !s.made[m] {
			months = append(months, m)
		}
	}
	s.mu.Unlock()
	if len(months) == 0 {
		return nil
	}
	return s.make(ctx, months, false)
}

// make makes the months' partitions that are missing, each in a transaction of its own.
// always says to look in the database even for months known to have one.
func (s *Store) make(ctx context.Context, months []time.Time, always bool) error {
	seen := map[time.Time]bool{}
	for _, m := range months {
		m = MonthOf(m)
		if seen[m] {
			continue
		}
		seen[m] = true
		s.mu.Lock()
		known := s.made[m]
		s.mu.Unlock()
		if known && !always {
			continue
		}
		if err := s.makeMonth(ctx, m); err != nil {
			return err
		}
		s.mu.Lock()
		s.made[m] = true
		s.mu.Unlock()
	}
	return nil
}

// makeMonth makes month's partition unless it has one. The table is made on its own and then
// attached (Config.AttachMonth), which locks usage_events only against other changes of its
// partitions (SHARE UPDATE EXCLUSIVE), never against the meter's writes or the readers. Rows
// of the month found in the DEFAULT partition are moved into it first.
func (s *Store) makeMonth(ctx context.Context, month time.Time) (err error) {
	name := PartitionName(month)
	defer services.Wrap(&err, "usagestore: make %s", name)
	if s.cfg.AttachMonth == nil {
		return errors.New("making a month needs Config.AttachMonth")
	}
	var moved int64
	err = pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if err := lockPartitions(ctx, tx); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE `+name+
			` (LIKE usage_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `WITH moved AS (DELETE FROM `+defaultPartition+`
			WHERE occurred_at >= $1 AND occurred_at < $2 RETURNING *)
			INSERT INTO `+name+` SELECT * FROM moved`, month, month.AddDate(0, 1, 0))
		if err != nil {
			return err
		}
		moved = tag.RowsAffected()
		return s.cfg.AttachMonth(ctx, tx, month)
	})
	if err != nil {
		return err
	}
	if moved > 0 {
		s.cfg.Log.Warn("usage rows of a month without its partition waited in the default partition; moved to their month",
			"partition", name, "rows", moved)
	}
	return nil
}

// lockPartitions makes one transaction at a time change usage_events' partitions, across
// processes, and bounds how long its DDL waits for the table's locks.
func lockPartitions(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('usage_events partitions')); SET LOCAL lock_timeout = '`+lockTimeout+`'`)
	return err
}

// BoundLiteral writes t as a timestamptz literal for the DDL of a partition's bounds, which
// takes no parameters.
func BoundLiteral(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02 15:04:05") + "+00'"
}

// Maintain makes the months ahead, then applies the retention.
func (s *Store) Maintain(ctx context.Context) error {
	if err := s.EnsureAhead(ctx); err != nil {
		return err
	}
	_, err := s.Retire(ctx)
	return err
}

// Start runs Maintain every Config.Every until Close or ctx ends. The caller runs Maintain
// once itself before (at the platform's start, after the migrations).
func (s *Store) Start(ctx context.Context) {
	ctx, s.stop = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.cfg.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.Maintain(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("keeping the usage partitions failed; tried again at the next pass", "err", err, "next", s.cfg.Every)
			}
		}
	}()
}

// Close stops Start's loop and waits for its pass in progress.
func (s *Store) Close() {
	if s.stop == nil {
		return
	}
	s.stop()
	<-s.done
}
