package routing

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
)

// runRig stands for a running rig's agent: it publishes a heartbeat every interval, the first at once, and, when
// answers is set, one more as soon as a gateway asks on events.HeartbeatRequestSubject.
func runRig(t *testing.T, nc *nats.Conn, o catalog.Offering, interval time.Duration, answers bool) {
	t.Helper()
	beat := func() {
		body, _ := json.Marshal(Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID, Capacity: 8, At: time.Now()})
		_ = nc.Publish(events.HeartbeatSubject(o.ProviderAccountID, o.ID), body)
	}
	if answers {
		sub, err := nc.Subscribe(events.HeartbeatRequestSubject, func(*nats.Msg) { beat() })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			beat()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
}

// TestARestartedRouterRoutesWithinASecond: rigs already running, beating every 5 s, have sent their last
// heartbeat before the router started listening. Start asks them for one at once: the router routes to them
// within a second of Start and is ready as soon as they answered, not after a whole interval. A rig whose agent
// does not answer the request is routed only once its next beat comes, and readiness waits for it no more than
// two seconds.
func TestARestartedRouterRoutesWithinASecond(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	a, b, silent := offering("a", "m", st, 100_000), offering("b", "m", st, 110_000), offering("silent", "m2", st, 100_000)
	for _, o := range []catalog.Offering{a, b} {
		runRig(t, nc, o, 5*time.Second, true)
	}
	runRig(t, nc, silent, 5*time.Second, false)
	time.Sleep(200 * time.Millisecond) // the rigs' first beats are gone: nobody listened

	r := New(Config{Catalog: &fakeCatalog{offerings: []catalog.Offering{a, b, silent}, book: defaultPrices()}, NATS: nc,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := r.Ready(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Ready before Start = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	for {
		if cs, err := r.Pick(Request{Model: "m"}); err == nil && len(cs) == 2 {
			break
		}
		if time.Since(started) > time.Second {
			t.Fatalf("not routing to both answering rigs a second after Start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	routedAfter := time.Since(started)
	if _, err := r.Pick(Request{Model: "m2"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the rig that did not answer: Pick = %v, want unavailable until its next beat", err)
	}
	if err := r.Ready(ctx); !errors.Is(err, ErrAwaitingBeats) {
		t.Fatalf("Ready with a rig yet to answer = %v", err)
	}
	eventually(t, "readiness", func() bool { return r.Ready(ctx) == nil })
	if waited := time.Since(started); waited < readyWait || waited > readyWait+time.Second {
		t.Fatalf("ready %v after Start, want about %v", waited, readyWait)
	}
	t.Logf("routed %v after Start", routedAfter)
}

// TestReadyOnceEveryRigAnswered: with every listed rig answering, the router is ready at once; without a
// catalog, never.
func TestReadyOnceEveryRigAnswered(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	clk := newClock()
	a := offering("a", "m", st, 100_000)
	cat := &fakeCatalog{offerings: []catalog.Offering{a}, book: defaultPrices()}
	r := New(Config{Catalog: cat, NATS: nc, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(ctx); !errors.Is(err, ErrAwaitingBeats) {
		t.Fatalf("Ready before any heartbeat = %v", err)
	}
	clk.Advance(readyWait - time.Millisecond)
	if err := r.Ready(ctx); !errors.Is(err, ErrAwaitingBeats) {
		t.Fatalf("Ready %v after the request = %v", readyWait-time.Millisecond, err)
	}
	r.recordHeartbeat(Heartbeat{OfferingID: a.ID, ProviderID: a.ProviderAccountID})
	if err := r.Ready(ctx); err != nil {
		t.Fatalf("Ready once the rig answered = %v", err)
	}

	// A router whose rigs never answer is ready readyWait after its request.
	quiet := New(Config{Catalog: cat, NATS: nc, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := quiet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(readyWait)
	if err := quiet.Ready(ctx); err != nil {
		t.Fatalf("Ready %v after the request = %v", readyWait, err)
	}
}

// TestStartAsksForHeartbeatsOnceSubscribed: the request is one empty message, sent after the subscriptions are
// up and the catalog is loaded.
func TestStartAsksForHeartbeatsOnceSubscribed(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	got := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(events.HeartbeatRequestSubject, got)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	cat := &fakeCatalog{offerings: []catalog.Offering{offering("a", "m", st, 100_000)}, book: defaultPrices()}
	r := New(Config{Catalog: cat, NATS: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-got:
		if len(msg.Data) != 0 || r.snap.Load() == nil {
			t.Fatalf("heartbeat request %q, catalog loaded %v", msg.Data, r.snap.Load() != nil)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat request")
	}
	select {
	case msg := <-got:
		t.Fatalf("a second heartbeat request %q", msg.Data)
	case <-time.After(100 * time.Millisecond):
	}
}
