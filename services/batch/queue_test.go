package batch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// clock is a test's settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// answerBy answers each line with the status its custom_id names ("ok-..." 200, else 400).
type answerBy struct{}

func (answerBy) Send(_ context.Context, c Call) (Answer, error) {
	code := 400
	if strings.Contains(string(c.Body), `"ok-`) {
		code = 200
	}
	return Answer{StatusCode: code, Body: []byte(`{}`), RequestID: c.RequestIDPrefix + "_0"}, nil
}

// TestQueue measures the admin's queue figures on batches the service and its scheduler made:
// lines claimed, answered and failed at known times.
func TestQueue(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	_, u := testDeveloper(t, pool, "queue@example.com", "Queue Co")
	store, err := NewLocalDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
	svc := NewService(Config{Pool: pool, Storage: store, Now: clk.now})
	sch := NewScheduler(SchedulerConfig{Service: svc, Gateway: answerBy{}, Offered: func(string) bool { return true },
		Prices: func(context.Context) (catalog.PriceBook, error) {
			return catalog.PriceBook{catalog.TierBatch: {{Tier: catalog.TierBatch, Input: 100_000, Output: 200_000}}}, nil
		},
		Balance: func(context.Context, string) (money.BigPico, error) {
			return money.BigPicoOf(100 * money.PicoPerUSD), nil
		}})

	newBatch := func(ids ...string) Batch {
		t.Helper()
		var sb strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&sb, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":8,"messages":[{"role":"user","content":%q}]}}`+"\n", id, id)
		}
		st, err := svc.Stage(u.AccountID, "in.jsonl", strings.NewReader(sb.String()))
		if err != nil {
			t.Fatal(err)
		}
		f, err := svc.Commit(ctx, st, PurposeBatch)
		if err != nil {
			t.Fatal(err)
		}
		b, err := svc.Create(ctx, CreateInput{AccountID: u.AccountID, APIKeyID: "key", InputFileID: f.ID,
			Endpoint: "/v1/chat/completions", CompletionWindow: CompletionWindow})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	runNext := func(finish bool) {
		t.Helper()
		l, ok, err := sch.claim(ctx)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if finish {
			if err := sch.run(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}

	q, err := svc.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Batches[StatusInProgress] != 0 || q.Lines != (LineCounts{}) || q.OldestPendingAgeSeconds != nil || q.LinesLastHour != 0 {
		t.Fatalf("empty queue: %+v", q)
	}

	// At 9:00 a batch of five lines is created and admitted, and its first line answered.
	a := newBatch("ok-1", "bad-2", "ok-3", "ok-4", "ok-5")
	if ok, err := sch.validateOne(ctx); !ok || err != nil {
		t.Fatalf("validate: %v %v", ok, err)
	}
	runNext(true) // ok-1 done at 9:00
	// At 9:50 the second fails (400) and the third is claimed and still in flight.
	clk.add(50 * time.Minute)
	runNext(true)  // bad-2 failed at 9:50
	runNext(false) // ok-3 running
	// At 9:55 another batch waits to be checked.
	clk.add(5 * time.Minute)
	newBatch("ok-x")
	// At 10:10 the line answered at 9:00 is out of the hour.
	clk.add(15 * time.Minute)

	q, err = svc.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{StatusValidating: 1, StatusInProgress: 1, StatusFinalizing: 0, StatusCancelling: 0}
	if fmt.Sprint(q.Batches) != fmt.Sprint(want) {
		t.Fatalf("batches by status %v, want %v", q.Batches, want)
	}
	if q.Lines != (LineCounts{Pending: 2, Running: 1, Done: 1, Failed: 1}) {
		t.Fatalf("lines %+v, want 2 pending, 1 running, 1 done, 1 failed", q.Lines)
	}
	created := time.Unix(a.CreatedAt, 0).UTC()
	if q.OldestPendingSince == nil || !q.OldestPendingSince.Equal(created) || *q.OldestPendingAgeSeconds != 70*60 {
		t.Fatalf("oldest pending since %v age %v, want %v and 4200 s", q.OldestPendingSince, q.OldestPendingAgeSeconds, created)
	}
	if q.LinesLastHour != 1 || q.LinesPerMinute != 1.0/60 {
		t.Fatalf("%d lines in the last hour, %v a minute; want 1 (the one failed at 9:50), 1/60", q.LinesLastHour, q.LinesPerMinute)
	}

	// The last lines are answered at 10:10: the batch has nothing pending, and three more lines
	// ended within the hour.
	runNext(true)
	runNext(true)
	q, err = svc.Queue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Lines != (LineCounts{Pending: 0, Running: 1, Done: 3, Failed: 1}) || q.OldestPendingAgeSeconds != nil || q.LinesLastHour != 3 {
		t.Fatalf("after two more lines: %+v", q)
	}
}
