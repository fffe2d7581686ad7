package batch

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/progress"
)

// Progress of batches as their pages follow it (docs/progress.md): what is done of a batch's
// lines, and how many of them ended within the recent window, from each line's finished_at
// (migration 00025), so that the time left is told from the pace of the last minutes.

// open says the batch has not ended: its lines may still move.
func open(status string) bool {
	return status == StatusValidating || status == StatusInProgress || status == StatusFinalizing || status == StatusCancelling
}

// Progress returns the account's batch and how far its lines are (Reading).
func (s *Service) Progress(ctx context.Context, accountID, id string) (_ Batch, _ progress.Reading, err error) {
	defer services.Wrap(&err, "batch.Progress")
	b, err := s.Batch(ctx, accountID, id)
	if err != nil {
		return Batch{}, progress.Reading{}, err
	}
	r, err := s.Reading(ctx, accountID, b)
	return b, r, err
}

// Reading is how far the account's batch b, as read, is: a line counts as done once its last
// attempt ended, answered or failed. Only a batch in progress is read again, for the lines that
// ended within the window.
func (s *Service) Reading(ctx context.Context, accountID string, b Batch) (_ progress.Reading, err error) {
	defer services.Wrap(&err, "batch.Reading")
	r := progress.Reading{Done: int64(b.RequestCounts.Completed + b.RequestCounts.Failed), Total: int64(b.RequestCounts.Total),
		Running: open(b.Status)}
	if b.InProgressAt == nil || !r.Running {
		return r, nil
	}
	now := s.now().UTC()
	r.Span = progress.RecentSpan(time.Unix(*b.InProgressAt, 0), now)
	// The batch's own lines (the primary key's prefix), read for its owner only.
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM batch_lines l JOIN batches b ON b.id = l.batch_id
		WHERE l.batch_id = $1 AND b.account_id::text = $2 AND l.finished_at > $3`,
		b.ID, accountID, now.Add(-r.Span)).Scan(&r.Recent); err != nil {
		return progress.Reading{}, err
	}
	return r, nil
}

// QueueProgress is how far the lines of every batch in progress are, for the admin's queue:
// done (answered or failed) of all their lines, and how many of them ended within the window.
func (s *Service) QueueProgress(ctx context.Context) (_ progress.Reading, err error) {
	defer services.Wrap(&err, "batch.QueueProgress")
	now := s.now().UTC()
	var r progress.Reading
	var started *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT count(l.line), count(l.line) FILTER (WHERE l.status IN ('done', 'failed')),
		count(l.line) FILTER (WHERE l.finished_at > $1), min(b.in_progress_at)
		FROM batches b JOIN batch_lines l ON l.batch_id = b.id WHERE b.status = 'in_progress'`,
		now.Add(-progress.Window)).Scan(&r.Total, &r.Done, &r.Recent, &started); err != nil {
		return progress.Reading{}, err
	}
	if started != nil {
		r.Running = true
		r.Span = progress.RecentSpan(*started, now)
	}
	return r, nil
}
