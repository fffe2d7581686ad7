package routing

import (
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

func TestCircuitOpensAfterConsecutiveFailuresAndHalfOpensAfterAWhile(t *testing.T) {
	t.Parallel()
	a := offering("a", "m", st, 100_000)
	b := setup(t, a)
	req := Request{Model: "m"}
	pickable := func() bool {
		_, err := b.r.Pick(req)
		if err != nil && services.ErrorCode(err) != services.CodeUnavailable {
			t.Fatal(err)
		}
		return err == nil
	}
	keepAlive := func(d time.Duration) { b.clock.Advance(d); b.beat(a, 0, 8) }

	// Failures must be consecutive: a success in between starts the count again.
	for range FailureThreshold - 1 {
		b.r.Failure("a")
	}
	b.r.Success("a")
	for range FailureThreshold - 1 {
		b.r.Failure("a")
	}
	if !pickable() {
		t.Fatal("open after fewer than FailureThreshold consecutive failures")
	}
	b.r.Failure("a")
	if pickable() {
		t.Fatal("still routed to after FailureThreshold consecutive failures")
	}
	wantPickError(t, b.r, req, ErrUnavailable, services.CodeUnavailable)

	keepAlive(OpenFor - time.Millisecond)
	if pickable() {
		t.Fatal("routed to before OpenFor passed")
	}
	keepAlive(time.Millisecond)
	if !pickable() {
		t.Fatal("no trial once OpenFor passed")
	}
	if pickable() {
		t.Fatal("a second request was let through while the half-open trial is out")
	}
	b.r.Failure("a") // the trial failed: open again for OpenFor
	keepAlive(OpenFor - time.Millisecond)
	if pickable() {
		t.Fatal("routed to before OpenFor passed after a failed trial")
	}
	keepAlive(time.Millisecond)
	if !pickable() {
		t.Fatal("no second trial")
	}
	// A trial nobody reports on (a failover candidate the gateway did not need) is given up after a while.
	keepAlive(trialLease)
	if !pickable() {
		t.Fatal("no new trial after the lease of an unreported one")
	}
	b.r.Success("a") // the trial worked: closed
	for range 5 {
		if !pickable() {
			t.Fatal("not routed to after a successful trial")
		}
	}
}

// TestAnOpenCircuitFailsOverToTheNextCandidate: the half-open offering is handed to one request, as a first
// choice or a failover candidate, while the others keep routing to the healthy ones.
func TestAnOpenCircuitFailsOverToTheNextCandidate(t *testing.T) {
	t.Parallel()
	os := []catalog.Offering{offering("a", "m", st, 100_000), offering("b", "m", st, 150_000), offering("c", "m", st, 200_000)}
	b := setup(t, os...)
	for range FailureThreshold {
		b.r.Failure("a")
	}
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("Pick = %v with a's circuit open", got)
	}
	b.clock.Advance(OpenFor)
	for _, o := range os {
		b.beat(o, 0, 8)
	}
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Pick = %v, want a's trial first", got)
	}
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("Pick = %v while a's trial is out", got)
	}
}
