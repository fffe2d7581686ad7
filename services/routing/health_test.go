package routing

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events/natstest"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
)

// startNATS starts an embedded NATS server for the test and returns a connection to it.
func startNATS(t *testing.T) *nats.Conn {
	t.Helper()
	return natstest.Connect(t, natstest.Start(t, natsserver.EmbeddedOptions{}))
}

// eventually polls cond for up to five seconds of real time: heartbeats arrive on NATS's goroutine.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestHeartbeatsOnNATSMakeAnOfferingHealthyFor15Seconds: Start subscribes to heartbeat.>; a rig is routed to
// while its last heartbeat is at most 15 s old, with the load it reports.
func TestHeartbeatsOnNATSMakeAnOfferingHealthyFor15Seconds(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	clk := newClock()
	a, other := offering("a", "m", st, 100_000), offering("other", "m", st, 200_000)
	cat := &fakeCatalog{offerings: []catalog.Offering{a, other}, book: defaultPrices()}
	r := New(Config{Catalog: cat, NATS: nc, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	req := Request{Model: "m"}
	wantPickError(t, r, req, ErrUnavailable, services.CodeUnavailable) // no heartbeat yet

	publish := func(subject string, hb Heartbeat) {
		t.Helper()
		body, _ := json.Marshal(hb)
		if err := nc.Publish(subject, body); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// A heartbeat whose body names another rig than its subject is ignored; so is one on a malformed subject.
	publish(events.HeartbeatSubject(a.ProviderAccountID, a.ID), Heartbeat{OfferingID: "other", ProviderID: a.ProviderAccountID, Capacity: 4})
	publish(events.Child(events.HeartbeatPrefix, a.ID), Heartbeat{OfferingID: a.ID, ProviderID: a.ProviderAccountID, Capacity: 4})
	// The other rig's heartbeat tells that the ones before it were processed: a subscription delivers in order.
	publish(events.HeartbeatSubject(other.ProviderAccountID, other.ID), Heartbeat{OfferingID: other.ID, ProviderID: other.ProviderAccountID, Capacity: 4})
	eventually(t, "the other rig's heartbeat", func() bool { _, err := r.Pick(req); return err == nil })
	if got := ids(mustPick(t, r, req)); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("Pick = %v, want only the rig whose heartbeat was well-formed", got)
	}

	publish(events.HeartbeatSubject(a.ProviderAccountID, a.ID), Heartbeat{OfferingID: a.ID, ProviderID: a.ProviderAccountID,
		InFlight: 3, Queued: 1, Capacity: 4, At: clk.Now()})
	eventually(t, "a's heartbeat", func() bool { cs, _ := r.Pick(req); return len(cs) == 2 })
	cs := mustPick(t, r, req)
	// a is at capacity (3 in flight + 1 queued of 4), so the dearer rig with room goes first.
	if got := ids(cs); !slices.Equal(got, []string{"other", "a"}) || cs[1].InFlight != 4 || cs[1].Capacity != 4 {
		t.Fatalf("Pick = %+v", cs)
	}
	if cs[0].Native != nil || cs[1].Native != nil {
		t.Fatalf("Pick = %+v: no heartbeat named a native API", cs)
	}
	// The APIs an agent found its engine serving natively go, as its heartbeat's "native", to the candidate.
	if err := nc.Publish(events.HeartbeatSubject(a.ProviderAccountID, a.ID),
		[]byte(`{"offering_id":"`+a.ID+`","provider_id":"`+a.ProviderAccountID+`","capacity":4,"native":["messages","responses"]}`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's native APIs", func() bool {
		cs, _ := r.Pick(req)
		return len(cs) == 2 && slices.Equal(cs[0].Native, []string{"messages", "responses"})
	})

	clk.Advance(HeartbeatTimeout)
	if got := ids(mustPick(t, r, req)); len(got) != 2 {
		t.Fatalf("Pick = %v 15 s after the heartbeats, want both still healthy", got)
	}
	clk.Advance(time.Millisecond)
	wantPickError(t, r, req, ErrUnavailable, services.CodeUnavailable)
}

func mustPick(t *testing.T, r *Router, req Request) []Candidate {
	t.Helper()
	cs, err := r.Pick(req)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestHeartbeatJSONIsTheAgentsContract: the field names gpuagent publishes.
func TestHeartbeatJSONIsTheAgentsContract(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Heartbeat{OfferingID: "o", ProviderID: "p", InFlight: 1, Queued: 2, Capacity: 3, At: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(m))
	if want := []string{"at", "capacity", "in_flight", "offering_id", "provider_id", "queued"}; !slices.Equal(keys, want) {
		t.Fatalf("heartbeat JSON keys %v, want %v", keys, want)
	}
}

// TestStartReloadsTheCatalog: an offering listed after Start is routed to within RefreshEvery.
func TestStartReloadsTheCatalog(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	cat := &fakeCatalog{book: defaultPrices()}
	r := New(Config{Catalog: cat, NATS: nc, RefreshEvery: 10 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wantPickError(t, r, Request{Model: "m"}, ErrUnknownModel, services.CodeNotFound)
	o := offering("a", "m", st, 100_000)
	cat.add(o)
	r.recordHeartbeat(Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID})
	eventually(t, "the new offering", func() bool { _, err := r.Pick(Request{Model: "m"}); return err == nil })
}
