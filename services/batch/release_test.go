package batch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// heldGateway answers a line only when the test lets it, and says when one arrives.
type heldGateway struct {
	arrived chan string
	answer  chan struct{}
}

func (g heldGateway) Send(_ context.Context, c Call) (Answer, error) {
	g.arrived <- c.RequestIDPrefix
	<-g.answer
	return Answer{StatusCode: 200, Body: []byte(`{}`), RequestID: c.RequestIDPrefix + "_0"}, nil
}

// TestCloseReleasesLinesNotSent: a scheduler claims lines only for idle workers, never ahead of
// them. Closed while lines are in flight, it waits for them, which are answered and recorded;
// a line it had claimed but not sent would go back to pending with no attempt counted: none is
// sent after Close, none is left running for the lease.
func TestCloseReleasesLinesNotSent(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	_, u := testDeveloper(t, pool, "release@example.com", "Release Co")
	store, err := NewLocalDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(Config{Pool: pool, Storage: store})
	gw := heldGateway{arrived: make(chan string, 8), answer: make(chan struct{})}
	sch := NewScheduler(SchedulerConfig{Service: svc, Gateway: gw, Offered: func(string) bool { return true },
		Prices: func(context.Context) (catalog.PriceBook, error) {
			return catalog.PriceBook{catalog.TierBatch: {{Tier: catalog.TierBatch, Input: 100_000, Output: 200_000}}}, nil
		},
		Balance: func(context.Context, string) (money.BigPico, error) {
			return money.BigPicoOf(100 * money.PicoPerUSD), nil
		},
		Concurrency: 2, PollEvery: 20 * time.Millisecond})

	var sb strings.Builder
	for i := range 6 {
		fmt.Fprintf(&sb, `{"custom_id":"ok-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}}`+"\n", i)
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
	sch.Start(ctx)
	// Both workers hold a line, and nothing more is claimed while they do.
	<-gw.arrived
	<-gw.arrived
	count := func(status string) (n, attempts int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(attempts), 0) FROM batch_lines WHERE batch_id = $1 AND status = $2`,
			b.ID, status).Scan(&n, &attempts); err != nil {
			t.Fatal(err)
		}
		return n, attempts
	}
	time.Sleep(200 * time.Millisecond) // ten of the claimer's polls
	if n, _ := count("running"); n != 2 {
		t.Fatalf("%d lines running, want the two in flight only", n)
	}
	closed := make(chan struct{})
	go func() { sch.Close(); close(closed) }()
	time.Sleep(50 * time.Millisecond)
	close(gw.answer) // the two in flight are answered
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case id := <-gw.arrived:
		t.Fatalf("line %s was sent after Close", id)
	default:
	}
	if n, _ := count("running"); n != 0 {
		t.Fatalf("%d lines left running", n)
	}
	if n, attempts := count("done"); n != 2 || attempts != 2 {
		t.Fatalf("%d lines done with %d attempts, want the 2 in flight, one attempt each", n, attempts)
	}
	if n, attempts := count("pending"); n != 4 || attempts != 0 {
		t.Fatalf("%d lines pending with %d attempts, want 4 with none counted", n, attempts)
	}
}
