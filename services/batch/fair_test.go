package batch

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
)

// gatedGateway answers each line only when the test releases it by its request id prefix, and
// says which line arrived, in order.
type gatedGateway struct {
	arrived chan string
	mu      sync.Mutex
	gates   map[string]chan struct{}
}

func (g *gatedGateway) gate(prefix string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates[prefix] == nil {
		g.gates[prefix] = make(chan struct{})
	}
	return g.gates[prefix]
}

func (g *gatedGateway) Send(_ context.Context, c Call) (Answer, error) {
	g.arrived <- c.RequestIDPrefix
	<-g.gate(c.RequestIDPrefix)
	return Answer{StatusCode: 200, Body: []byte(`{}`), RequestID: AttemptRequestID(c.RequestIDPrefix, 0)}, nil
}

// TestFairShares runs one account's long batch (6 lines) and, once its lines fill every worker,
// another account's short one (2 lines), answering the lines in flight oldest first. Each time a
// worker comes free, the account with fewer lines in hand gets it: the short batch's lines each
// wait for one line of the long one, never for the long batch.
func TestFairShares(t *testing.T) {
	for _, tc := range []struct {
		workers int
		want    string // the lines in the order they were sent: a account "Long", b "Short"
	}{
		// One worker: the two accounts take turns while both have lines.
		{1, "a1 b1 a2 b2 a3 a4 a5 a6"},
		// Two workers, both on the long batch when the short one comes: the first to come free
		// goes to the short batch, the next to the long one (one line each in hand), and so on.
		{2, "a1 a2 b1 a3 b2 a4 a5 a6"},
	} {
		t.Run(strings.Repeat("worker ", tc.workers), func(t *testing.T) { testFairShares(t, tc.workers, tc.want) })
	}
}

func testFairShares(t *testing.T, workers int, want string) {
	ctx := context.Background()
	pool := dbtest.New(t)
	_, long := testDeveloper(t, pool, "long@example.com", "Long Co")
	_, short := testDeveloper(t, pool, "short@example.com", "Short Co")
	store, err := NewLocalDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(Config{Pool: pool, Storage: store})
	gw := &gatedGateway{arrived: make(chan string, 16), gates: map[string]chan struct{}{}}
	sch := testScheduler(svc, gw, time.Minute)
	sch.cfg.Concurrency = workers
	a := newTestBatch(t, svc, long.AccountID, 6)
	name := map[string]string{}
	for i := 1; i <= 6; i++ {
		name[firstAttempt(a.ID, i)] = "a" + string(rune('0'+i))
	}
	sch.Start(ctx)
	defer sch.Close()
	var order, inFlight []string
	next := func() {
		t.Helper()
		select {
		case p := <-gw.arrived:
			order, inFlight = append(order, name[p]), append(inFlight, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("no line sent after %v", order)
		}
	}
	for range workers {
		next()
	}
	// The workers' first lines arrive in either order; they are answered oldest line first.
	slices.Sort(order)
	slices.SortFunc(inFlight, func(x, y string) int { return strings.Compare(name[x], name[y]) })
	b := newTestBatch(t, svc, short.AccountID, 2)
	for i := 1; i <= 2; i++ {
		name[firstAttempt(b.ID, i)] = "b" + string(rune('0'+i))
	}
	// The short batch is admitted while the long one holds every worker.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var status string
		if err := pool.QueryRow(ctx, `SELECT status FROM batches WHERE id = $1`, b.ID).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status == "in_progress" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the short batch is %s", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the claimer's polls: nothing is claimed with no worker free
	for len(order) < 8 {
		close(gw.gate(inFlight[0])) // the oldest line in flight is answered
		inFlight = inFlight[1:]
		next()
	}
	for _, p := range inFlight {
		close(gw.gate(p))
	}
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("lines sent in the order %s, want %s", got, want)
	}
}

// firstAttempt is a line's first attempt's request id prefix.
func firstAttempt(batchID string, line int) string {
	return claimed{batchID: batchID, line: line, attempts: 1}.requestIDPrefix()
}
