package mail_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/mail"
)

// DeleteSent removes the messages sent before the cutoff, and only those: a message sent after
// it, a queued one and a failed one stay, however old.
func TestDeleteSentKeepsWhatIsNotSentAndRecent(t *testing.T) {
	pool, o, _ := setup(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	rows := map[string]struct {
		status string
		sentAt *time.Time
	}{
		"old-sent":    {"sent", ptr(now.Add(-31 * 24 * time.Hour))},
		"old-sent-2":  {"sent", ptr(now.Add(-400 * 24 * time.Hour))},
		"recent-sent": {"sent", ptr(now.Add(-29 * 24 * time.Hour))},
		"old-queued":  {"queued", nil},
		"old-failed":  {"failed", nil},
	}
	for key, r := range rows {
		enqueue(t, pool, o, mail.Message{Key: key, To: []string{"someone@example.com"}, Subject: key, Text: "hello"})
		if _, err := pool.Exec(ctx, `UPDATE mail_outbox SET status = $2, sent_at = $3, created_at = $4 WHERE key = $1`,
			key, r.status, r.sentAt, now.Add(-500*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := o.DeleteSent(ctx, now.Add(-mail.DefaultSentRetention))
	if err != nil || n != 2 {
		t.Fatalf("DeleteSent = %d, %v; want the two old sent messages", n, err)
	}
	for key := range rows {
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM mail_outbox WHERE key = $1`, key).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[key == "old-sent" || key == "old-sent-2"]; left != want {
			t.Errorf("%s: %d rows left, want %d", key, left, want)
		}
	}
	if n, err := o.DeleteSent(ctx, now.Add(-mail.DefaultSentRetention)); err != nil || n != 0 {
		t.Fatalf("a second cleanup deleted %d, %v", n, err)
	}
}

// DeleteSent goes through more rows than one statement deletes.
func TestDeleteSentInBatches(t *testing.T) {
	pool, o, _ := setup(t)
	ctx := context.Background()
	for i := range 1100 {
		enqueue(t, pool, o, mail.Message{Key: fmt.Sprintf("bulk-%d", i), To: []string{"someone@example.com"}, Subject: "s", Text: "t"})
	}
	old := time.Now().Add(-60 * 24 * time.Hour)
	if _, err := pool.Exec(ctx, `UPDATE mail_outbox SET status = 'sent', sent_at = $1`, old); err != nil {
		t.Fatal(err)
	}
	if n, err := o.DeleteSent(ctx, time.Now().Add(-mail.DefaultSentRetention)); err != nil || n != 1100 {
		t.Fatalf("DeleteSent = %d, %v; want 1100", n, err)
	}
}

func ptr[T any](v T) *T { return &v }
