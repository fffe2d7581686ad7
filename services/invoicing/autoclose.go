package invoicing

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// The close that runs by itself: once a period's grace has passed, the platform closes it (see
// docs/invoicing.md, "The automatic close"). Every process with the web or meter role runs the
// loop; the period's advisory lock lets one of them close it and the others skip it.

// DuePeriods are the periods the platform closes by itself now: every period from the first
// one ever closed to the last one whose grace has passed that is not closed yet (done), or,
// on a platform that has closed nothing, that last one alone; never one that ended before the
// platform's first activity, which Close refuses.
func (s *Service) DuePeriods(ctx context.Context) (_ []Period, err error) {
	defer services.Wrap(&err, "invoicing.DuePeriods")
	last := PeriodOf(s.now().UTC().Add(-s.cfg.Grace)).Prev()
	firstActivity, found, err := s.FirstActivity(ctx)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT period, status FROM invoice_closes ORDER BY period`)
	if err != nil {
		return nil, err
	}
	done := map[Period]bool{}
	var first Period
	for rows.Next() {
		var t time.Time
		var status CloseStatus
		if err := rows.Scan(&t, &status); err != nil {
			return nil, err
		}
		p := periodOfDate(t)
		if first.IsZero() {
			first = p
		}
		done[p] = status == CloseDone
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if first.IsZero() || last.Before(first) {
		first = last
	}
	var due []Period
	for p := first; !last.Before(p); p = p.Next() {
		if !done[p] && p.End().After(firstActivity) {
			due = append(due, p)
		}
	}
	return due, nil
}

// CloseDue closes every due period, oldest first, as the platform itself. A period another
// process is closing is skipped; it is done when that close is.
func (s *Service) CloseDue(ctx context.Context) ([]CloseProgress, error) {
	due, err := s.DuePeriods(ctx)
	if err != nil {
		return nil, err
	}
	var out []CloseProgress
	for _, p := range due {
		pr, err := s.Close(ctx, CloseInput{Period: p})
		if services.ErrorCode(err) == services.CodeConflict {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, pr)
	}
	return out, nil
}

// RunAutoClose closes due periods after first, then every every, until ctx ends. A close that
// fails is logged and tried again on the next round.
func (s *Service) RunAutoClose(ctx context.Context, first, every time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		closed, err := s.CloseDue(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("the automatic close failed; it is tried again", "err", err, "next", every)
		case len(closed) > 0:
			for _, pr := range closed {
				s.log.Info("closed a period by itself", "period", pr.Period.String(), "invoices", pr.Invoices,
					"statements", pr.Statements, "left_issued", pr.LeftIssued)
			}
		}
		t.Reset(every)
	}
}
