package usage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events/natstest"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/usage"
)

func startJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	s := natstest.Start(t, natsserver.EmbeddedOptions{})
	nc, js, err := events.Connect(t.Context(), s.ClientURL(), "test", slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return js
}

// publish publishes n events on subject with ids prefix-0, prefix-1, ... and returns the refusals.
// rigSubject is the usage subject of the one rig most tests publish as.
var rigSubject = events.UsageSubject("p", "o")

func publish(t *testing.T, js jetstream.JetStream, subject, prefix string, n int) []*usage.RefusedError {
	t.Helper()
	var refused []*usage.RefusedError
	for i := range n {
		_, err := js.Publish(t.Context(), subject, []byte(`{}`), jetstream.WithMsgID(fmt.Sprintf("%s-%d", prefix, i)))
		if r := usage.Refused(subject, err); r != nil {
			refused = append(refused, r)
		} else if err != nil {
			t.Fatalf("publish on %s: %v", subject, err)
		}
	}
	return refused
}

// pending is what the usage stream holds of each subject.
func pending(t *testing.T, js jetstream.JetStream) (total uint64, bySubject map[string]uint64) {
	t.Helper()
	s, err := js.Stream(t.Context(), events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(events.Below(events.UsagePrefix)))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs, info.State.Subjects
}

// fetchAndAck takes n events from the meter's consumer and acknowledges the first ack of them, as a meter that
// committed those; the rest stay delivered and unacknowledged.
func fetchAndAck(t *testing.T, cons jetstream.Consumer, n, ack int) {
	t.Helper()
	// Fetch, not FetchNoWait: the consumer may not have every published event yet when the test asks, and waiting
	// for n of them (at most five seconds) is what the test means.
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got int
	for msg := range batch.Messages() {
		if got < ack {
			if err := msg.DoubleAck(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		got++
	}
	if got != n {
		t.Fatalf("fetched %d events, want %d", got, n)
	}
}

// An installation from before per-rig limits has a limits-retention stream that keeps what the meter acknowledged.
// nats-server (2.10 and later) lets it turn to interest retention in place: EnsureStreams does so and removes what
// was metered, never an unmetered event; it applies the per-rig limit only once no rig holds more than it, since
// nats-server would trim each subject to the limit by removing its oldest events, metered or not.
func TestExistingLimitsStreamTurnsToInterestLosingNoUnmeteredEvent(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	ctx := t.Context()
	// The stream and consumer as earlier versions made them.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.UsageStream, Subjects: []string{events.Below(events.UsagePrefix)},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew,
		MaxAge: usage.MaxEventAge, MaxBytes: 10 << 30, MaxMsgSize: int32(usage.MaxEventBytes), Duplicates: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	old, err := js.CreateOrUpdateConsumer(ctx, events.UsageStream, jetstream.ConsumerConfig{Durable: events.UsageConsumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	busy, calm := events.UsageSubject("prov-a", "off-busy"), events.UsageSubject("prov-b", "off-calm")
	publish(t, js, busy, "busy", 40)
	publish(t, js, calm, "calm", 10)
	// The meter has metered 20 of the busy rig's events and holds 10 more, delivered and unacknowledged.
	fetchAndAck(t, old, 30, 20)
	if total, _ := pending(t, js); total != 50 {
		t.Fatalf("the limits stream holds %d events, want all 50 published", total)
	}

	var logs bytes.Buffer
	opts := usage.StreamOptions{MaxPendingPerRig: 15, AckWait: time.Minute, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	cons, err := usage.EnsureStreams(ctx, js, opts)
	if err != nil {
		t.Fatalf("EnsureStreams on the limits stream: %v", err)
	}
	s, err := js.Stream(ctx, events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Retention != jetstream.InterestPolicy {
		t.Fatalf("retention %s, want interest", cfg.Retention)
	}
	total, bySubject := pending(t, js)
	if total != 30 || bySubject[busy] != 20 || bySubject[calm] != 10 {
		t.Fatalf("the stream holds %d events (%v), want the 30 unmetered: 20 of the busy rig, 10 of the other", total, bySubject)
	}
	// 20 unmetered events of the busy rig: a limit of 15 would remove 5 of them, so it waits.
	if cfg.MaxMsgsPerSubject > 0 || cfg.DiscardNewPerSubject {
		t.Fatalf("per-subject limit %d (discard new per subject %t) applied over a backlog of 20", cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject)
	}
	if !bytes.Contains(logs.Bytes(), []byte("subject="+busy)) || !bytes.Contains(logs.Bytes(), []byte("pending=20")) {
		t.Errorf("the warning does not name the rig and its backlog:\n%s", logs.String())
	}

	// The meter catches up on the ten it had not been delivered: 10 left, under the limit, which now applies.
	fetchAndAck(t, cons, 10, 10)
	res, err := usage.ApplyPendingLimit(ctx, js, 15)
	if err != nil || !res.Applied || res.InForce != 15 {
		t.Fatalf("ApplyPendingLimit: %+v, %v; want 15 applied", res, err)
	}
	if total, bySubject = pending(t, js); total != 20 || bySubject[busy] != 10 || bySubject[calm] != 10 {
		t.Fatalf("after the meter's catch-up the stream holds %d (%v), want the 20 unmetered, 10 of each rig", total, bySubject)
	}
	refusedBusy := publish(t, js, busy, "busy-more", 20)
	refusedCalm := publish(t, js, calm, "calm-more", 10)
	if len(refusedBusy) != 15 || len(refusedCalm) != 5 {
		t.Fatalf("refused %d of the busy rig's 20 and %d of the other's 10; want 15 and 5: each rig up to 15", len(refusedBusy), len(refusedCalm))
	}
	for _, r := range append(refusedBusy, refusedCalm...) {
		if r.Reason != usage.RefusedRigPending || (r.Subject != busy && r.Subject != calm) {
			t.Errorf("refusal %+v, want the rig pending limit", r)
		}
	}
	if want := "refused an event on " + busy; !bytes.Contains([]byte(refusedBusy[0].Error()), []byte(want)) {
		t.Errorf("refusal %q does not name the rig's subject", refusedBusy[0])
	}
	if total, bySubject = pending(t, js); total != 30 || bySubject[busy] != 15 || bySubject[calm] != 15 {
		t.Errorf("the stream holds %d (%v), want 15 of each rig", total, bySubject)
	}

	// Started again with the same settings, nothing changes; with a higher limit, it is raised at once.
	if _, err := usage.EnsureStreams(ctx, js, opts); err != nil {
		t.Fatal(err)
	}
	opts.MaxPendingPerRig = 100
	if _, err := usage.EnsureStreams(ctx, js, opts); err != nil {
		t.Fatal(err)
	}
	if s, err = js.Stream(ctx, events.UsageStream); err != nil || s.CachedInfo().Config.MaxMsgsPerSubject != 100 {
		t.Fatalf("limit after raising: %v", err)
	}
	if total, _ = pending(t, js); total != 30 {
		t.Errorf("the stream holds %d events after the restarts, want the 30", total)
	}
	if refused := publish(t, js, busy, "busy-after", 10); len(refused) != 0 {
		t.Errorf("%d refused under the raised limit", len(refused))
	}
}

// A new installation gets the stream as it should be, and events the meter acknowledges leave it.
func TestNewUsageStreamHoldsOnlyWhatIsUnmetered(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	cons, err := usage.EnsureStreams(t.Context(), js, usage.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Retention != jetstream.InterestPolicy || cfg.MaxMsgsPerSubject != usage.DefaultMaxPendingPerRig ||
		!cfg.DiscardNewPerSubject || cfg.Discard != jetstream.DiscardNew || cfg.MaxMsgSize != int32(usage.MaxEventBytes) {
		t.Fatalf("config %+v: want interest retention, %d per subject, discard new (per subject too), %d bytes a message",
			cfg, usage.DefaultMaxPendingPerRig, usage.MaxEventBytes)
	}
	if n := usage.DefaultMaxPendingPerRig * int64(cfg.MaxMsgSize); n != 81_920_000 {
		t.Errorf("a rig may hold %d bytes, want 81,920,000 (78 MiB)", n)
	}
	publish(t, js, rigSubject, "e", 5)
	fetchAndAck(t, cons, 5, 3)
	if total, _ := pending(t, js); total != 2 {
		t.Errorf("the stream holds %d events, want the 2 unacknowledged", total)
	}
}

// Lowering the limit over a subject that holds more leaves the stream as it was and takes events again.
func TestLoweringThePendingLimitWaitsForTheBacklog(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	ctx := t.Context()
	if _, err := usage.EnsureStreams(ctx, js, usage.StreamOptions{MaxPendingPerRig: 50}); err != nil {
		t.Fatal(err)
	}
	publish(t, js, rigSubject, "e", 30)
	res, err := usage.ApplyPendingLimit(ctx, js, 20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied || res.InForce != 50 || res.Subject != rigSubject || res.Pending != 30 {
		t.Fatalf("ApplyPendingLimit(20) over 30 pending: %+v; want it left at 50, naming %s with 30", res, rigSubject)
	}
	s, err := js.Stream(ctx, events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; len(cfg.Subjects) != 1 || cfg.Subjects[0] != events.Below(events.UsagePrefix) || cfg.MaxMsgsPerSubject != 50 {
		t.Fatalf("stream left with subjects %v and limit %d, want usage.> and 50", cfg.Subjects, cfg.MaxMsgsPerSubject)
	}
	if total, _ := pending(t, js); total != 30 {
		t.Errorf("the stream holds %d, want the 30", total)
	}
	if refused := publish(t, js, rigSubject, "more", 25); len(refused) != 5 {
		t.Errorf("%d of 25 more refused, want 5: the limit of 50 still holds", len(refused))
	}
	var api *jetstream.APIError
	_, err = js.Publish(ctx, rigSubject, []byte(`{}`), jetstream.WithMsgID("over"))
	if !errors.As(err, &api) || usage.Refused(rigSubject, err).Reason != usage.RefusedRigPending {
		t.Errorf("publish over the limit: %v, want the per-rig refusal", err)
	}
	if r := usage.Refused(rigSubject, context.DeadlineExceeded); r != nil {
		t.Errorf("a timeout read as a refusal: %v", r)
	}
}

// What the careful order in EnsureStreams guards against, as nats-server does it: a stream turned to interest
// retention while it has no consumer drops every event it holds, and a per-subject limit set on a stream removes
// the oldest events of each subject above it, acknowledged or not, whatever the discard policy.
func TestNATSDropsEventsOnCarelessChanges(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	ctx := t.Context()
	cfg := jetstream.StreamConfig{Name: events.UsageStream, Subjects: []string{events.Below(events.UsagePrefix)}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publish(t, js, rigSubject, "e", 20)
	cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject = 15, true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if total, _ := pending(t, js); total != 15 {
		t.Errorf("after setting a limit of 15 over 20 unconsumed events the stream holds %d; the guard in EnsureStreams assumes 15", total)
	}
	cfg.Retention = jetstream.InterestPolicy
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if total, _ := pending(t, js); total != 0 {
		t.Errorf("after turning to interest retention with no consumer the stream holds %d; the guard in EnsureStreams assumes 0", total)
	}
}

// Meters started together, as replicas are, each bring the usage stream to its configuration at once. However their
// steps interleave (the per-rig limit pauses the stream while it counts), the stream ends taking every rig's events,
// with its limit, and no step fails.
func TestMetersStartingTogetherLeaveTheStreamTakingEvents(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	const meters, rounds = 3, 15
	for round := range rounds {
		errs := make(chan error, meters)
		for range meters {
			go func() {
				_, err := usage.EnsureStreams(t.Context(), js, usage.StreamOptions{})
				errs <- err
			}()
		}
		for range meters {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round+1, err)
			}
		}
		s, err := js.Stream(t.Context(), events.UsageStream)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if len(cfg.Subjects) != 1 || cfg.Subjects[0] != events.Below(events.UsagePrefix) || cfg.MaxMsgsPerSubject != usage.DefaultMaxPendingPerRig {
			t.Fatalf("round %d: the stream listens on %v with %d per rig, want %s with %d", round+1, cfg.Subjects,
				cfg.MaxMsgsPerSubject, events.Below(events.UsagePrefix), usage.DefaultMaxPendingPerRig)
		}
		if refused := publish(t, js, rigSubject, fmt.Sprintf("r%d-", round), 1); len(refused) > 0 {
			t.Fatalf("round %d: an event was refused: %v", round+1, refused[0])
		}
		if err := js.DeleteStream(t.Context(), events.UsageStream); err != nil {
			t.Fatal(err)
		}
	}
}

// A meter that stopped while it had the stream paused to count leaves it refusing every event; the next check of the
// limit (every meter's, every few seconds) ends the pause, even with the limit already in force.
func TestAStreamLeftPausedTakesEventsAgain(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	if _, err := usage.EnsureStreams(t.Context(), js, usage.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	paused := s.CachedInfo().Config
	paused.Subjects = []string{events.UsagePausedSubject}
	if _, err := js.UpdateStream(t.Context(), paused); err != nil {
		t.Fatal(err)
	}
	res, err := usage.ApplyPendingLimit(t.Context(), js, usage.DefaultMaxPendingPerRig)
	if err != nil || !res.Applied {
		t.Fatalf("ApplyPendingLimit: %+v, %v", res, err)
	}
	if s, err = js.Stream(t.Context(), events.UsageStream); err != nil {
		t.Fatal(err)
	}
	if subj := s.CachedInfo().Config.Subjects; len(subj) != 1 || subj[0] != events.Below(events.UsagePrefix) {
		t.Fatalf("the stream listens on %v, want %s", subj, events.Below(events.UsagePrefix))
	}
	if refused := publish(t, js, rigSubject, "after-pause", 1); len(refused) > 0 {
		t.Fatalf("an event was refused: %v", refused[0])
	}
}

// While another meter holds the lock on the stream's configuration, a meter starting waits for it.
func TestAMeterWaitsForTheConfigurationLock(t *testing.T) {
	t.Parallel()
	js := startJetStream(t)
	if _, err := usage.EnsureStreams(t.Context(), js, usage.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), events.UsageConfigLockBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(t.Context(), "usage", []byte("another meter")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := usage.EnsureStreams(ctx, js, usage.StreamOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EnsureStreams with the lock held elsewhere: %v, want it to wait until its deadline", err)
	}
	if err := kv.Delete(t.Context(), "usage"); err != nil {
		t.Fatal(err)
	}
	if _, err := usage.EnsureStreams(t.Context(), js, usage.StreamOptions{}); err != nil {
		t.Fatalf("EnsureStreams once the lock is released: %v", err)
	}
}
