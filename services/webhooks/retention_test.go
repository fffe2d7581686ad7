package webhooks_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/webhooks"
)

// DeleteLogBefore removes the deliveries that finished before the cutoff, with their attempts,
// and the old events no delivery names any more; a delivery still pending, a recent one and its
// event stay.
func TestDeleteLogBeforeKeepsPendingAndRecent(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	ok := newReceiver(t, http.StatusOK)
	w.endpoint(t, ok.URL)
	w.emit(t, "batch.completed", "old", map[string]string{"batch_id": "old"})
	w.emit(t, "batch.completed", "recent", map[string]string{"batch_id": "recent"})
	w.emit(t, "batch.completed", "pending", map[string]string{"batch_id": "pending"})
	count := func(query string) int {
		t.Helper()
		var n int
		if err := w.pool.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Everything is delivered, then dated: the first finished 40 days ago, the second 10; the
	// third is made pending again, 40 days old.
	w.settle(t, w.svc)
	now := time.Now()
	age := func(key string, d time.Duration) {
		t.Helper()
		if _, err := w.pool.Exec(ctx, `UPDATE webhook_events SET created_at = $2 WHERE event_key = $1`, key, now.Add(-d)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.pool.Exec(ctx, `UPDATE webhook_deliveries d SET created_at = $2, finished_at = $2
			FROM webhook_events e WHERE e.id = d.event_id AND e.event_key = $1`, key, now.Add(-d)); err != nil {
			t.Fatal(err)
		}
	}
	age("old", 40*24*time.Hour)
	age("recent", 10*24*time.Hour)
	age("pending", 40*24*time.Hour)
	if _, err := w.pool.Exec(ctx, `UPDATE webhook_deliveries d SET status = 'pending', finished_at = NULL, next_attempt_at = $1
		FROM webhook_events e WHERE e.id = d.event_id AND e.event_key = 'pending'`, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM webhook_attempts`); n != 3 {
		t.Fatalf("%d attempts before, want 3", n)
	}

	deliveries, events, err := w.svc.DeleteLogBefore(ctx, now.Add(-webhooks.DefaultLogRetention))
	if err != nil || deliveries != 1 || events != 1 {
		t.Fatalf("DeleteLogBefore = %d deliveries, %d events, %v; want the old one of each", deliveries, events, err)
	}
	if n := count(`SELECT count(*) FROM webhook_events WHERE event_key = 'old'`); n != 0 {
		t.Fatal("the old event stayed")
	}
	if n := count(`SELECT count(*) FROM webhook_events WHERE event_key IN ('recent', 'pending')`); n != 2 {
		t.Fatalf("%d of the recent and the pending events stayed, want both", n)
	}
	if n := count(`SELECT count(*) FROM webhook_attempts`); n != 2 {
		t.Fatalf("%d attempts after, want the two of the deliveries that stayed", n)
	}
	list, err := w.svc.Deliveries(ctx, w.account, "", 100)
	if err != nil || len(list) != 2 {
		t.Fatalf("the log after: %+v, %v", list, err)
	}
	if d, e, err := w.svc.DeleteLogBefore(ctx, now.Add(-webhooks.DefaultLogRetention)); err != nil || d != 0 || e != 0 {
		t.Fatalf("a second cleanup deleted %d deliveries and %d events, %v", d, e, err)
	}
}
