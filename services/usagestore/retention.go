package usagestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpumarket/gpumarket/services"
)

// Retention (docs/usage-storage.md, "Retention"): with RetentionMonths R above 0, a month's
// usage rows are dropped once R whole months have passed since it ended, and only when
//   - its close has run to the end and none of its invoices or statements is still a draft:
//     every document that reads its usage is final (Config.MonthNotFinal, package invoicing's);
//   - its rollups hold every one of its rows: the rollups' requests of the month
//     (Config.RolledUpRequests, package metering's) are the partition's rows, and the DEFAULT
//     partition holds none of the month.
// A month that fails a condition is kept, and the log says why; the next pass looks again.
// Its rollups, invoices and statements are never touched.

// Retired is what Retire did with an old month.
type Retired struct {
	Month   time.Time
	Dropped bool
	Events  int64  // the rows dropped, or kept
	Kept    string // why it was kept; "" when dropped
}

// Retire applies the retention to the months past it, oldest first.
func (s *Store) Retire(ctx context.Context) (_ []Retired, err error) {
	defer services.Wrap(&err, "usagestore.Retire")
	if s.cfg.RetentionMonths <= 0 {
		return nil, nil
	}
	if s.cfg.MonthNotFinal == nil || s.cfg.RolledUpRequests == nil || s.cfg.DetachMonth == nil {
		return nil, errors.New("a retention needs Config.MonthNotFinal, Config.RolledUpRequests and Config.DetachMonth")
	}
	months, err := s.Months(ctx)
	if err != nil {
		return nil, err
	}
	// A month ending at or before this is past its retention.
	cutoff := MonthOf(s.cfg.Now()).AddDate(0, -s.cfg.RetentionMonths, 0)
	var out []Retired
	for _, m := range months {
		if m.AddDate(0, 1, 0).After(cutoff) {
			break
		}
		r, err := s.retireMonth(ctx, m)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if r.Dropped {
			s.cfg.Log.Info("dropped a month of usage rows past its retention; its rollups and documents stay",
				"month", m.Format("2006-01"), "events", r.Events, "retention_months", s.cfg.RetentionMonths)
		} else {
			s.cfg.Log.Info("kept a month of usage rows past its retention", "month", m.Format("2006-01"),
				"events", r.Events, "why", r.Kept)
		}
	}
	return out, nil
}

// retireMonth drops month's partition, its rows' keys and records it, in one transaction, when
// the month's documents are final and its rollups hold its rows; else it says why not.
func (s *Store) retireMonth(ctx context.Context, month time.Time) (Retired, error) {
	r := Retired{Month: month}
	name := PartitionName(month)
	end := month.AddDate(0, 1, 0)
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if err := lockPartitions(ctx, tx); err != nil {
			return err
		}
		// The checks are separate statements, each reading what its package owns: the month is past
		// usage.MaxEventAge, so no row of it, nor of its rollups, can be written between them.
		notFinal, err := s.cfg.MonthNotFinal(ctx, tx, month)
		if err != nil {
			return err
		}
		rolledUp, err := s.cfg.RolledUpRequests(ctx, tx, month, end)
		if err != nil {
			return err
		}
		var waiting int64
		if err := tx.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM `+defaultPartition+` WHERE occurred_at >= $1 AND occurred_at < $2),
				(SELECT count(*) FROM `+name+`)`,
			month, end).Scan(&waiting, &r.Events); err != nil {
			return err
		}
		switch {
		case notFinal != "":
			r.Kept = notFinal
		case waiting > 0:
			r.Kept = fmt.Sprintf("%d rows of the month wait in the default partition", waiting)
		case rolledUp != r.Events:
			r.Kept = fmt.Sprintf("the rollups count %d requests and the month holds %d rows", rolledUp, r.Events)
		}
		if r.Kept != "" {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO usage_months_dropped (month, events, dropped_at) VALUES ($1, $2, $3)
			ON CONFLICT (month) DO UPDATE SET events = usage_months_dropped.events + EXCLUDED.events, dropped_at = EXCLUDED.dropped_at`,
			month, r.Events, s.cfg.Now()); err != nil {
			return err
		}
		// The month's keys go with its rows (Config.DetachMonth): no event of it can reach the
		// database again, since the meter refuses an event older than usage.MaxEventAge before it
		// looks at keys.
		if err := s.cfg.DetachMonth(ctx, tx, month); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DROP TABLE `+name)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeLockNotAvailable {
		return Retired{Month: month, Kept: "the table's lock was not granted within " + lockTimeout + "; tried again at the next pass"}, nil
	}
	if err != nil {
		return Retired{}, fmt.Errorf("retire %s: %w", name, err)
	}
	r.Dropped = r.Kept == ""
	s.mu.Lock()
	if r.Dropped {
		delete(s.made, month)
	}
	s.mu.Unlock()
	return r, nil
}

const codeLockNotAvailable = "55P03"
