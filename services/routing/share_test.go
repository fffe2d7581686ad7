package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// TestReplicasShareWhatTheyObserve: two gateway replicas on one NATS. Each request one of them observed is in
// both windows, once: the observer skips its own batch, the other counts a request it receives twice once, and
// observations no gateway would publish are ignored. Both then hold the offering's whole traffic: 60 requests at
// 100 ms from one, 60 at 300 ms from the other.
func TestReplicasShareWhatTheyObserve(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	clk := newClock()
	cat := &fakeCatalog{offerings: []catalog.Offering{offering("a", "m", st, 100_000)}, book: defaultPrices()}
	replica := func(name string) *Router {
		r := New(Config{Catalog: cat, NATS: nc, Now: clk.Now, Instance: name, ShareEvery: 10 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, two := replica("one"), replica("two")
	observe := func(r *Router, prefix string, n int, ttftMs float64) {
		for i := range n {
			r.Observe("a", Observation{RequestID: fmt.Sprintf("%s-%d", prefix, i), At: clk.Now(), TTFT: millis(ttftMs), Streamed: true,
				Duration: time.Second, InputTokens: 100, OutputTokens: 100, Status: usage.StatusOK})
		}
	}
	observe(one, "one", 60, 100)
	observe(two, "two", 60, 300)
	eventually(t, "both windows whole", func() bool { return one.Figures("a").Requests == 120 && two.Figures("a").Requests == 120 })

	// Another replica's copy of requests already counted, and of requests no gateway would publish.
	dup, _ := json.Marshal(ObservedBatch{Instance: "three", Observations: []ObservedRequest{
		{OfferingID: "a", RequestID: "one-0", At: clk.Now(), TTFTMs: 9000, Streamed: true, Status: usage.StatusOK},
		{OfferingID: "a", RequestID: "", At: clk.Now(), TTFTMs: 9000, Streamed: true, Status: usage.StatusOK},
		{OfferingID: "a", RequestID: "neg", At: clk.Now(), TTFTMs: -1, Streamed: true, Status: usage.StatusOK},
		{OfferingID: "a", RequestID: "status", At: clk.Now(), TTFTMs: 9000, Streamed: true, Status: "done"},
		{OfferingID: "a", RequestID: "no-time", TTFTMs: 9000, Streamed: true, Status: usage.StatusOK},
		{OfferingID: "a", RequestID: "last", At: clk.Now(), TTFTMs: 100, Streamed: true, Status: usage.StatusOK},
	}})
	if err := nc.Publish(events.ObservedSubject, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(events.ObservedSubject, dup); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the last request of the copy", func() bool { return one.Figures("a").Requests == 121 && two.Figures("a").Requests == 121 })
	for name, r := range map[string]*Router{"one": one, "two": two} {
		if f := r.Figures("a"); f.Requests != 121 || f.TTFTP50Ms != 100 || f.TTFTP99Ms != 300 {
			t.Errorf("replica %s: %+v; want 121 requests, P50 100 ms, P99 300 ms, none at 9 s", name, f)
		}
	}
}

// TestSharedBatchesStayBounded: a burst of 1,001 observations leaves in messages of at most maxShareBatch, the
// first as soon as a full batch waits (ShareEvery is an hour here), the rest at the latest when the router stops;
// each observation once.
func TestSharedBatchesStayBounded(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	got := make(chan []ObservedRequest, 64)
	sub, err := nc.Subscribe(events.ObservedSubject, func(m *nats.Msg) {
		var b ObservedBatch
		if json.Unmarshal(m.Data, &b) == nil && b.Instance == "burst" {
			got <- b.Observations
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	r := New(Config{Catalog: &fakeCatalog{book: defaultPrices()}, NATS: nc, Instance: "burst", ShareEvery: time.Hour,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 2*maxShareBatch + 1
	for i := range n {
		r.Observe("a", Observation{RequestID: fmt.Sprintf("r%d", i), TTFT: time.Millisecond, Streamed: true, Status: usage.StatusOK})
	}
	seen := map[string]bool{}
	take := func(batch []ObservedRequest) {
		t.Helper()
		if len(batch) == 0 || len(batch) > maxShareBatch {
			t.Fatalf("a batch of %d, want 1 to %d", len(batch), maxShareBatch)
		}
		for _, o := range batch {
			if seen[o.RequestID] {
				t.Fatalf("%s shared twice", o.RequestID)
			}
			seen[o.RequestID] = true
		}
	}
	select {
	case batch := <-got:
		take(batch)
	case <-time.After(5 * time.Second):
		t.Fatal("no batch published while a full one waited")
	}
	cancel()
	for deadline := time.After(5 * time.Second); len(seen) < n; {
		select {
		case batch := <-got:
			take(batch)
		case <-deadline:
			t.Fatalf("%d of %d observations shared by the end", len(seen), n)
		}
	}
}
