package batch

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// QueueWindow is how far back the queue's lines per minute look.
const QueueWindow = time.Hour

// Queue is the batch queue as the admin sees it (docs/batches.md, "The queue"): the open batches
// by status, the lines of the batches in progress by status, how long the oldest pending line has
// waited, and how many lines ended in the last hour.
type Queue struct {
	// Batches counts the open batches by status: validating, in_progress, finalizing, cancelling
	// (each present, 0 when none).
	Batches map[string]int `json:"batches"`
	// Lines counts the lines of the batches in progress by status.
	Lines LineCounts `json:"lines"`
	// OldestPendingSince is when the batch of the oldest pending line was created (the start of
	// its completion window); nil when no line is pending. OldestPendingAgeSeconds is its age.
	OldestPendingSince      *time.Time `json:"oldest_pending_since"`
	OldestPendingAgeSeconds *int64     `json:"oldest_pending_age_seconds"`
	// LinesLastHour is how many lines' last attempt ended (done or failed) in the last hour, of
	// any batch; LinesPerMinute is that over 60.
	LinesLastHour  int64     `json:"lines_last_hour"`
	LinesPerMinute float64   `json:"lines_per_minute"`
	At             time.Time `json:"at"`
}

// LineCounts are lines by status.
type LineCounts struct {
	Pending int64 `json:"pending"`
	Running int64 `json:"running"`
	Done    int64 `json:"done"`
	Failed  int64 `json:"failed"`
}

// openStatuses are the statuses batches_open_idx covers.
var openStatuses = []string{StatusValidating, StatusInProgress, StatusFinalizing, StatusCancelling}

// Queue reads the batch queue in two queries, each on an index: the open batches (batches_open_idx)
// with their lines (the primary key's batch_id prefix), and the lines ended in the window
// (batch_lines_finished_idx). Ended batches and their lines are not read.
func (s *Service) Queue(ctx context.Context) (_ Queue, err error) {
	defer services.Wrap(&err, "batch.Queue")
	now := s.now().UTC()
	q := Queue{Batches: map[string]int{}, At: now}
	for _, st := range openStatuses {
		q.Batches[st] = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT b.status, count(DISTINCT b.id),
		count(l.line) FILTER (WHERE l.status = 'pending'), count(l.line) FILTER (WHERE l.status = 'running'),
		count(l.line) FILTER (WHERE l.status = 'done'), count(l.line) FILTER (WHERE l.status = 'failed'),
		min(b.created_at) FILTER (WHERE l.status = 'pending')
		FROM batches b LEFT JOIN batch_lines l ON l.batch_id = b.id AND b.status = 'in_progress'
		WHERE b.status IN ('validating', 'in_progress', 'finalizing', 'cancelling')
		GROUP BY b.status`)
	if err != nil {
		return Queue{}, err
	}
	var status string
	var n int
	var lc LineCounts
	var oldest *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&status, &n, &lc.Pending, &lc.Running, &lc.Done, &lc.Failed, &oldest}, func() error {
		q.Batches[status] = n
		if status == StatusInProgress {
			q.Lines = lc
			if oldest != nil {
				since := oldest.UTC()
				age := int64(now.Sub(since) / time.Second)
				q.OldestPendingSince, q.OldestPendingAgeSeconds = &since, &age
			}
		}
		return nil
	}); err != nil {
		return Queue{}, err
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM batch_lines WHERE finished_at > $1 AND finished_at IS NOT NULL`,
		now.Add(-QueueWindow)).Scan(&q.LinesLastHour); err != nil {
		return Queue{}, err
	}
	q.LinesPerMinute = float64(q.LinesLastHour) / QueueWindow.Minutes()
	return q, nil
}
