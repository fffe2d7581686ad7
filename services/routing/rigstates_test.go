package routing

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// TestAPendingRigIsNeverRouted: a rig not yet qualified serves no customer, even as the only and cheapest
// offering of its model; the customer is told no rig is ready (unavailable), not that the model does not exist.
// Its heartbeat makes it a probe target, marked qualifying; without one there is nothing to probe.
func TestAPendingRigIsNeverRouted(t *testing.T) {
	t.Parallel()
	cheap := pending(offering("cheap", "m", st, 100_000))
	dear := offering("dear", "m", st, 200_000)
	alone := pending(offering("alone", "solo", st, 50_000))
	silent := pending(offering("silent", "m", st, 90_000))
	b := setup(t, cheap, dear, alone) // each with a heartbeat
	b.cat.add(silent)
	if err := b.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}

	for range 20 {
		if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{"dear"}) {
			t.Fatalf("Pick = %v; want the qualified dear one alone", got)
		}
	}
	wantPickError(t, b.r, Request{Model: "solo"}, ErrUnavailable, services.CodeUnavailable)
	wantPickError(t, b.r, Request{Model: "m", Offering: "cheap"}, ErrUnavailable, services.CodeUnavailable)
	wantPickError(t, b.r, Request{Model: "m", Tier: ba}, ErrTierNotOffered, services.CodeUnavailable) // dear's tier only
	for _, m := range b.r.Models() {
		if m.Model == "solo" {
			t.Fatalf("Models lists %q, served only by a pending rig", m.Model)
		}
	}

	targets := b.r.ProbeTargets()
	slices.SortFunc(targets, func(a, b Candidate) int { return strings.Compare(a.OfferingID, b.OfferingID) })
	if len(targets) != 2 || targets[0].OfferingID != "alone" || targets[1].OfferingID != "cheap" ||
		!targets[0].Qualifying || !targets[1].Qualifying || targets[1].Tier != st {
		t.Fatalf("probe targets %+v; want alone and cheap, qualifying in standard, not silent (no heartbeat)", targets)
	}
	// Two heartbeats lost, then none: no longer probed once its heartbeat is stale.
	b.clock.Advance(HeartbeatTimeout + time.Second)
	b.beat(dear, 0, 8)
	if got := b.r.ProbeTargets(); len(got) != 0 {
		t.Fatalf("probe targets %v with no fresh heartbeat", ids(got))
	}
}

// TestARigQualifiesGoesOfflineAndQualifiesAgain, on the database: listed, the rig is pending and neither
// routed nor in the public catalog; its heartbeats are written down; a probe answered by another model keeps it
// pending with that reason; three passes in a row make it active, routed and listed at once. Without heartbeats
// for OfflineAfter it goes offline, leaves routing and the catalog, and comes back only by probes again. Two
// replicas deciding at once change it once.
func TestARigQualifiesGoesOfflineAndQualifiesAgain(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := context.Background()
	o, err := b.catalog.Create(ctx, b.provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: "m", AskInput: 60_000, AskOutput: 120_000, ClaimedTTFTP99Ms: f64(300)})
	if err != nil {
		t.Fatal(err)
	}
	replica := New(Config{Pool: b.pool, Now: b.clock.Now, Log: b.r.log})
	for _, r := range []*Router{b.r, replica} {
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		r.ready.requested(b.clock.Now().Add(-readyWait))
	}
	reason := func(want string) {
		t.Helper()
		got, err := b.catalog.Own(ctx, b.provider, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r := got.RigStateReason(b.clock.Now()); r != want {
			t.Fatalf("reason %q; want %q", r, want)
		}
	}
	listed := func() bool {
		t.Helper()
		all, err := b.catalog.List(ctx, catalog.ListInput{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(all, func(x catalog.Offering) bool { return x.ID == o.ID })
	}
	beat := func() {
		t.Helper()
		for _, r := range []*Router{b.r, replica} {
			r.recordHeartbeat(Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID, Capacity: 8, At: b.clock.Now()})
		}
	}
	settle := func() {
		t.Helper()
		for _, r := range []*Router{b.r, replica} {
			if err := r.SettleRigStates(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	probe := func(r *Router, passed bool, problem string) {
		t.Helper()
		targets := r.ProbeTargets()
		if len(targets) != 1 || targets[0].OfferingID != o.ID || !targets[0].Qualifying {
			t.Fatalf("probe targets %+v; want the rig, qualifying", targets)
		}
		res := catalog.ProbeResult{At: b.clock.Now(), Passed: passed, Problem: problem, TTFTMs: 180, TokensPerSec: 95}
		if err := r.RecordProbe(ctx, targets[0], res); err != nil {
			t.Fatal(err)
		}
	}

	reason("Pending: waiting for your agent to connect")
	settle()
	if got := b.r.ProbeTargets(); len(got) != 0 {
		t.Fatalf("probe targets %v before the agent connected", ids(got))
	}
	beat()
	settle()
	reason("Pending: 0 of 3 probes passed")
	wantPickError(t, b.r, Request{Model: "m"}, ErrUnavailable, services.CodeUnavailable)

	probe(b.r, true, "")
	probe(replica, false, `its answer named the model "other", not the listed "m"`)
	reason(`Pending: 0 of 3 probes passed; the last one failed: its answer named the model "other", not the listed "m"`)
	probe(b.r, true, "")
	probe(replica, true, "")
	reason("Pending: 2 of 3 probes passed")
	if listed() {
		t.Fatal("a pending rig is in the public catalog")
	}
	wantPickError(t, b.r, Request{Model: "m"}, ErrUnavailable, services.CodeUnavailable)
	b.clock.Advance(time.Minute)
	beat()
	settle()
	probe(b.r, true, "")
	reason("Active since 12:01 UTC")
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{o.ID}) {
		t.Fatalf("Pick = %v once qualified; want the rig (the replica that saw it qualify routes at once)", got)
	}
	if !listed() {
		t.Fatal("a qualified rig is not in the public catalog")
	}
	if got := b.r.ProbeTargets(); len(got) != 0 {
		t.Fatalf("an active rig in its claimed tier is still probed: %v", ids(got))
	}
	got, _ := b.catalog.Own(ctx, b.provider, o.ID)
	if got.RigProbeTTFTMs == nil || *got.RigProbeTTFTMs != 180 || got.RigProbeTokensPerSec == nil || *got.RigProbeTokensPerSec != 95 {
		t.Fatalf("the last probe's figures: %v ms, %v tokens/s", got.RigProbeTTFTMs, got.RigProbeTokensPerSec)
	}

	// Heartbeats stop. Within OfflineAfter it stays; after it, offline, whichever replica decides.
	lastBeat := b.clock.Now()
	b.clock.Advance(catalog.OfflineAfter - RigStatesEvery)
	settle()
	reason("Active since 12:01 UTC")
	b.clock.Advance(2 * RigStatesEvery)
	settle() // both replicas at once: the first turns it offline and reloads, the second finds nothing to do
	reason("Offline: no heartbeat since " + lastBeat.Format("15:04 UTC"))
	offlineSince := b.clock.Now()
	if got, _ := b.catalog.Own(ctx, b.provider, o.ID); got.RigState != catalog.RigOffline || !got.RigStateSince.Equal(offlineSince) {
		t.Fatalf("state %s since %v; want offline since %v", got.RigState, got.RigStateSince, offlineSince)
	}
	if listed() {
		t.Fatal("an offline rig is in the public catalog")
	}
	b.clock.Advance(RigStatesEvery)
	beat()
	for _, r := range []*Router{b.r, replica} {
		wantPickError(t, r, Request{Model: "m"}, ErrUnavailable, services.CodeUnavailable)
	}

	// Back: its heartbeats resume, and probes qualify it again.
	settle()
	reason("Offline since " + offlineSince.Format("15:04 UTC") + ": heartbeats are back, 0 of 3 probes passed")
	for range catalog.ProbesToQualify {
		probe(replica, true, "")
	}
	if err := b.r.Refresh(ctx); err != nil { // the other replica's next reload
		t.Fatal(err)
	}
	if got := b.pickIDs(t, Request{Model: "m"}); !slices.Equal(got, []string{o.ID}) {
		t.Fatalf("Pick = %v once qualified again", got)
	}
	if !listed() {
		t.Fatal("the rig qualified again is not in the public catalog")
	}
}
