package batch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// lineCharge is what the meter charges for one line in these tests: $0.000123.
const lineCharge = 123 * money.PicoPerUSD / 1_000_000

// insertUsage stores a usage row for a request as the meter would, charged or not. The row's
// offering and provider are not made: the session skips the foreign keys (this package has no
// catalog), which changes nothing of what recoverLines reads.
func insertUsage(t *testing.T, pool *pgxpool.Pool, accountID, requestID, status string, charge money.Pico) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, `SET session_replication_role = DEFAULT`)
	if _, err := conn.Exec(ctx, `
		INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
			input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
		VALUES ('evt_' || $1, $1, $2, gen_random_uuid(), gen_random_uuid(), 'batch', 'm', 10, 5, 0, 10, 1, 'estimated', $3,
			80000, 160000, 60000, 60000, $4, $5, now(), now(), 1)`,
		requestID, accountID, status, int64(charge), int64(charge)/2); err != nil {
		t.Fatal(err)
	}
}

// meteringGateway answers every line at once, and stores its charged usage row as the meter
// would, counting what it was sent.
type meteringGateway struct {
	t         *testing.T
	pool      *pgxpool.Pool
	accountID string
	mu        sync.Mutex
	sent      []string
}

func (g *meteringGateway) Send(_ context.Context, c Call) (Answer, error) {
	g.mu.Lock()
	g.sent = append(g.sent, c.RequestIDPrefix)
	g.mu.Unlock()
	id := AttemptRequestID(c.RequestIDPrefix, 0)
	insertUsage(g.t, g.pool, g.accountID, id, "ok", lineCharge)
	return Answer{StatusCode: 200, Body: []byte(`{}`), RequestID: id}, nil
}

func (g *meteringGateway) sentPrefixes() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

func testScheduler(svc *Service, gw Gateway, lease time.Duration) *Scheduler {
	return NewScheduler(SchedulerConfig{Service: svc, Gateway: gw, Offered: func(string) bool { return true },
		Prices: func(context.Context) (catalog.PriceBook, error) {
			return catalog.PriceBook{catalog.TierBatch: {{Tier: catalog.TierBatch, Input: 100_000, Output: 200_000}}}, nil
		},
		Balance: func(context.Context, string) (money.BigPico, error) {
			return money.BigPicoOf(100 * money.PicoPerUSD), nil
		},
		Concurrency: 2, PollEvery: 50 * time.Millisecond, Lease: lease})
}

// newTestBatch admits a batch of n lines of the account.
func newTestBatch(t *testing.T, svc *Service, accountID string, n int) Batch {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `{"custom_id":"ok-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}}`+"\n", i)
	}
	st, err := svc.Stage(accountID, "in.jsonl", strings.NewReader(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Commit(ctx, st, PurposeBatch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Create(ctx, CreateInput{AccountID: accountID, APIKeyID: "key", InputFileID: f.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: CompletionWindow})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A scheduler holding two lines is killed mid-line (it stops renewing its claims; its requests
// never come back). Line 1's request was cancelled when its holder died (an uncharged usage row);
// line 2's was answered and charged before the answer was lost. A second scheduler, which never
// took a line while the first was alive however long its requests ran, takes them back once the
// lease (2 s here, 45 s by default) has passed: line 1 is sent again, well within a minute, and
// billed exactly once, $0.000123; line 2 is not sent again and fails as interrupted, billed once.
func TestALineOfAKilledHolderIsRerunAndBilledOnce(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	_, u := testDeveloper(t, pool, "holder@example.com", "Holder Co")
	store, err := NewLocalDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(Config{Pool: pool, Storage: store})
	const lease = 2 * time.Second
	held := heldGateway{arrived: make(chan string, 8), answer: make(chan struct{})}
	defer close(held.answer)
	first := testScheduler(svc, held, lease)
	b := newTestBatch(t, svc, u.AccountID, 2)
	firstCtx, kill := context.WithCancel(ctx)
	first.Start(firstCtx)
	prefixes := map[string]bool{<-held.arrived: true, <-held.arrived: true}
	line0, line1 := services.BatchRequestPrefix(b.ID, 1, 1), services.BatchRequestPrefix(b.ID, 2, 1)
	if !prefixes[line0] || !prefixes[line1] {
		t.Fatalf("the first scheduler holds %v, want lines 1 and 2 at their first attempt", prefixes)
	}

	second := &meteringGateway{t: t, pool: pool, accountID: u.AccountID}
	other := testScheduler(svc, second, lease)
	other.Start(ctx)
	defer other.Close()
	// Alive, the first holder keeps its lines through three leases of slow requests.
	time.Sleep(3 * lease)
	if sent := second.sentPrefixes(); len(sent) != 0 {
		t.Fatalf("lines of a live holder were sent again: %v", sent)
	}

	insertUsage(t, pool, u.AccountID, AttemptRequestID(line0, 0), "canceled", 0)
	insertUsage(t, pool, u.AccountID, AttemptRequestID(line1, 0), "ok", lineCharge)
	kill()
	killedAt := time.Now()
	var status0, status1, err1 string
	var attempts0 int
	for {
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT status FROM batch_lines WHERE batch_id = $1 AND line = 1), (SELECT attempts FROM batch_lines WHERE batch_id = $1 AND line = 1),
			(SELECT status FROM batch_lines WHERE batch_id = $1 AND line = 2), (SELECT coalesce(error->>'code', '') FROM batch_lines WHERE batch_id = $1 AND line = 2)`,
			b.ID).Scan(&status0, &attempts0, &status1, &err1); err != nil {
			t.Fatal(err)
		}
		if status0 == "done" && status1 == "failed" {
			break
		}
		if time.Since(killedAt) > time.Minute {
			t.Fatalf("a minute after the kill: line 1 %s, line 2 %s", status0, status1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took := time.Since(killedAt); took > lease+3*time.Second {
		t.Errorf("line 1 was re-run %s after its holder was killed, want within its %s lease and a few polls", took, lease)
	}
	if attempts0 != 2 || err1 != "batch_line_interrupted" {
		t.Fatalf("line 1 done after %d attempts, want 2; line 2 failed with %q", attempts0, err1)
	}
	if sent := second.sentPrefixes(); len(sent) != 1 || sent[0] != services.BatchRequestPrefix(b.ID, 1, 2) {
		t.Fatalf("the second scheduler sent %v, want line 1's second attempt only", sent)
	}
	for line, prefix := range map[int]string{1: "req_" + strings.TrimPrefix(b.ID, "batch_") + "_1_", 2: "req_" + strings.TrimPrefix(b.ID, "batch_") + "_2_"} {
		var charged, rows int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(charge_pico), 0)::bigint, count(*) FILTER (WHERE charge_pico > 0)
			FROM usage_events WHERE request_id LIKE $1 || '%'`, prefix).Scan(&charged, &rows); err != nil {
			t.Fatal(err)
		}
		if charged != int64(lineCharge) || rows != 1 {
			t.Errorf("line %d: %d charged usage rows, %d pico in all; want one, %d pico ($0.000123)", line, rows, charged, int64(lineCharge))
		}
	}
}
