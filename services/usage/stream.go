package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
)

// StreamOptions sizes the usage stream. The zero value gives the production defaults.
type StreamOptions struct {
	// DuplicateWindow is how long the stream remembers event ids to drop re-sends. Five
	// minutes covers an agent's reconnect-and-resend after a broker restart or a network
	// blip, the common case, at the cost of an id per event in memory for that long
	// (about 150 MB at 10,000 events/s); re-sends after it are refused by the database's
	// unique keys, which hold forever (docs/failure-cases.md, case 5).
	DuplicateWindow time.Duration
	// MaxAge bounds how long unmetered events are kept: a meter down for longer loses them.
	MaxAge time.Duration
	// MaxBytes bounds the stream's storage; when full, new events are refused (the agents
	// keep them in their outboxes) rather than old ones dropped.
	MaxBytes int64
	// MaxPendingPerRig is the most events of one rig (one subject) that the stream holds
	// unmetered: beyond it the stream refuses that rig's new events, and only that rig's
	// (DefaultMaxPendingPerRig when 0; none when negative, for a benchmark that stands for rigs
	// releasing a backlog at once). See docs/usage-stream.md.
	MaxPendingPerRig int64
	// Replicas is 3 on a production cluster, 1 on the embedded server.
	Replicas int
	// AckWait is how long a delivered, unacknowledged event waits before it is delivered
	// again: longer than a batch's commit, short enough that a crashed meter's events come
	// back soon.
	AckWait time.Duration
	// Log receives what EnsureStreams has to say about an existing stream and what it waits
	// for; slog.Default() when nil.
	Log *slog.Logger
	// WaitForJetStream is how long EnsureStreams waits for JetStream to answer (a cluster that
	// has not elected its JetStream leader yet) before it gives up and says what failed;
	// DefaultWaitForJetStream when 0.
	WaitForJetStream time.Duration
}

// DefaultWaitForJetStream is how long a meter waits for JetStream at its start: three NATS nodes
// started together elect their JetStream leader within seconds, and one restarted into a cluster
// that lost its quorum waits for the other nodes for as long as they take to come back.
const DefaultWaitForJetStream = 2 * time.Minute

// DefaultMaxPendingPerRig is the usage stream's limit on one rig's unmetered events: about
// 2.5 minutes of a busy rig's traffic (64 requests at once, a second each) while the meter is
// stopped, after which the rig's events wait in its outbox instead. It bounds what one rig
// holds in the stream to 10,000 x MaxEventBytes = 81,920,000 bytes (78 MiB).
const DefaultMaxPendingPerRig = 10_000

func (o StreamOptions) withDefaults() StreamOptions {
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = 5 * time.Minute
	}
	if o.MaxAge == 0 {
		o.MaxAge = MaxEventAge
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 10 << 30
	}
	if o.MaxPendingPerRig == 0 {
		o.MaxPendingPerRig = DefaultMaxPendingPerRig
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.AckWait == 0 {
		o.AckWait = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.WaitForJetStream == 0 {
		o.WaitForJetStream = DefaultWaitForJetStream
	}
	return o
}

// jetStreamRetry is how often a step that JetStream did not answer is tried again: from the
// first pause, doubling up to the last.
const (
	jetStreamRetryFirst = 100 * time.Millisecond
	jetStreamRetryMax   = 3 * time.Second
	jetStreamCallWait   = 5 * time.Second // one attempt's own bound
)

// retryJetStream runs step until it succeeds, waiting between attempts with a doubling pause,
// until the deadline; each failed attempt is logged with what it waits for. When the deadline
// passes, the error says what it was waiting for, how long, how many tries, and the last
// failure, never only what a later step made of it.
func retryJetStream(ctx context.Context, log *slog.Logger, deadline time.Time, what string, step func(ctx context.Context) error) error {
	pause := jetStreamRetryFirst
	start := time.Now()
	for attempt := 1; ; attempt++ {
		callCtx, cancel := context.WithTimeout(ctx, min(jetStreamCallWait, max(time.Until(deadline), time.Millisecond)))
		err := step(callCtx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("JetStream answered", "waited_for", what, "after", time.Since(start).Round(time.Millisecond), "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("usage: waiting for JetStream (%s): %w; last failure: %v", what, ctx.Err(), err)
		}
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("usage: JetStream did not answer within %s (%s, %d attempts): %w",
				time.Since(start).Round(time.Second), what, attempt, err)
		}
		log.Warn("waiting for JetStream", "for", what, "attempt", attempt, "err", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return fmt.Errorf("usage: waiting for JetStream (%s): %w; last failure: %v", what, ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, jetStreamRetryMax)
	}
}

// waitForJetStream waits until JetStream answers for the account: on a cluster, once its nodes
// have elected their JetStream leader.
func waitForJetStream(ctx context.Context, js jetstream.JetStream, log *slog.Logger, deadline time.Time) error {
	return retryJetStream(ctx, log, deadline, "its cluster to elect a JetStream leader and answer for the account",
		func(ctx context.Context) error {
			_, err := js.AccountInfo(ctx)
			return err
		})
}

// usageStreamConfig is the usage stream as it should be: interest retention, so that an event
// the meter has acknowledged leaves the stream and what the stream holds of a subject is what
// its rig has pending, and a limit on that, per subject. See docs/usage-stream.md.
func usageStreamConfig(o StreamOptions) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 events.UsageStream,
		Description:          "usage events from gpuagents, metered exactly once",
		Subjects:             usageSubjects(),
		Storage:              jetstream.FileStorage,
		Retention:            jetstream.InterestPolicy,
		Discard:              jetstream.DiscardNew,
		MaxAge:               o.MaxAge,
		MaxBytes:             o.MaxBytes,
		MaxMsgSize:           int32(MaxEventBytes),
		MaxMsgsPerSubject:    o.MaxPendingPerRig,
		DiscardNewPerSubject: o.MaxPendingPerRig > 0,
		Duplicates:           o.DuplicateWindow,
		Replicas:             o.Replicas,
	}
}

// EnsureStreams creates or updates, idempotently, the usage stream, the stream of rejected
// events, and the meter's durable pull consumer.
//
// An existing usage stream is brought to its configuration without losing an unmetered event
// (docs/usage-stream.md): the consumer first, since a stream that turns to interest retention
// without a consumer drops everything it holds; then interest retention, which removes what the
// meter has acknowledged; then the per-rig limit, which nats-server enforces on the events a
// stream holds already by removing the oldest of each subject above it, so it is applied only
// while no subject holds more (ApplyPendingLimit). When one does, the stream keeps its earlier
// limit, a warning says which rig holds what, and ApplyPendingLimit applies it later.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts StreamOptions) (jetstream.Consumer, error) {
	opts = opts.withDefaults()
	want := usageStreamConfig(opts)
	deadline := time.Now().Add(opts.WaitForJetStream)
	if err := waitForJetStream(ctx, js, opts.Log, deadline); err != nil {
		return nil, err
	}
	unlock, err := lockConfigWaiting(ctx, js, opts.Replicas, opts.Log, deadline)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := js.Stream(ctx, events.UsageStream); errors.Is(err, jetstream.ErrStreamNotFound) {
		// Created with limits retention and no per-rig limit, and turned to what it should be below once the
		// meter's consumer exists: an interest stream drops what it receives while it has no consumer.
		first := want
		first.Retention, first.MaxMsgsPerSubject, first.DiscardNewPerSubject = jetstream.LimitsPolicy, 0, false
		if _, err := js.CreateStream(ctx, first); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("usage: create stream %s: %w", events.UsageStream, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", events.UsageStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        events.RejectedStream,
		Description: "usage events the meter refused, with the reason in the subject",
		Subjects:    []string{events.Below(events.RejectedPrefix)},
		Storage:     jetstream.FileStorage,
		MaxAge:      30 * 24 * time.Hour,
		MaxBytes:    1 << 30,
		Replicas:    opts.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", events.RejectedStream, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, events.UsageStream, jetstream.ConsumerConfig{
		Durable:       events.UsageConsumer,
		Description:   "the meter: prices usage and posts it to the ledger",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxDeliver:    -1, // never give up on an event: exactly once means not zero times
		MaxAckPending: 100_000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("usage: consumer %s: %w", events.UsageConsumer, err)
	}
	if _, err := updateKeepingPendingLimit(ctx, js, want); err != nil {
		return nil, err
	}
	res, err := applyPendingLimit(ctx, js, opts.MaxPendingPerRig)
	if err != nil {
		return nil, err
	}
	if !res.Applied {
		opts.Log.Warn("the usage stream's per-rig limit waits until this rig's backlog is metered: "+
			"applied now, it would remove its oldest unmetered events", "subject", res.Subject, "pending", res.Pending,
			"limit", opts.MaxPendingPerRig, "in_force", res.InForce)
	}
	return cons, nil
}

// updateKeepingPendingLimit updates the usage stream to want in all but its per-subject limit,
// which it changes only when that cannot remove a message: raising it, or leaving it.
func updateKeepingPendingLimit(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, events.UsageStream)
	if err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", events.UsageStream, err)
	}
	cur := s.CachedInfo().Config
	if !raisesOrKeeps(cur.MaxMsgsPerSubject, want.MaxMsgsPerSubject) {
		want.MaxMsgsPerSubject, want.DiscardNewPerSubject = cur.MaxMsgsPerSubject, cur.DiscardNewPerSubject
	}
	if s, err = js.UpdateStream(ctx, want); err != nil {
		return nil, fmt.Errorf("usage: update stream %s: %w", events.UsageStream, err)
	}
	return s, nil
}

// raisesOrKeeps says whether changing a stream's per-subject limit from cur to next removes no
// message: nats-server trims each subject to the limit when one is set where none was (0 or
// -1) or lowered, and leaves the messages alone otherwise.
func raisesOrKeeps(cur, next int64) bool {
	switch {
	case next <= 0:
		return true
	case cur <= 0:
		return false
	default:
		return next >= cur
	}
}

// PendingLimit is what ApplyPendingLimit did.
type PendingLimit struct {
	Applied bool
	// InForce is the per-rig limit the stream has now (0 for none).
	InForce int64
	// Subject and Pending name the rig that holds the most events, when the limit had to wait.
	Subject string
	Pending uint64
}

// usageSubjects are the subjects the usage stream takes events on. While its per-rig limit is
// lowered the stream listens only on events.UsagePausedSubject: no rig can publish there, so no
// subject grows between the count and the change; agents publishing meanwhile get no answer
// and send again from their outboxes. A pause always ends on
// these, never on the subjects the stream had when the pause began: that may have been
// another meter's pause, and restoring it would leave the stream refusing every event.
func usageSubjects() []string { return []string{events.Below(events.UsagePrefix)} }

// The usage stream's configuration is changed by one meter at a time: each change reads the
// whole configuration and writes it back, so two meters starting together (replicas,
// docs/deploy.md) would each write back what the other had just changed, pause or limit. The
// lock is a key in a JetStream key-value bucket, created only when absent; a meter that stopped
// while holding it leaves it to lapse after configLockTTL.
const (
	configLockKey  = "usage"
	configLockTTL  = 15 * time.Second
	configLockPoll = 20 * time.Millisecond
)

// lockConfig waits for the lock on the usage stream's configuration and returns its release.
// replicas is the lock bucket's, the usage stream's own.
func lockConfig(ctx context.Context, js jetstream.JetStream, replicas int) (unlock func(), err error) {
	kv, err := lockBucket(ctx, js, replicas)
	if err != nil {
		return nil, err
	}
	return takeLock(ctx, kv)
}

// lockConfigWaiting is lockConfig at a start, when the lock bucket's own replicas may still be
// electing their leader: its bucket is tried again until the deadline.
func lockConfigWaiting(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger, deadline time.Time) (unlock func(), err error) {
	var kv jetstream.KeyValue
	if err := retryJetStream(ctx, log, deadline, "the lock bucket "+events.UsageConfigLockBucket, func(ctx context.Context) (err error) {
		kv, err = lockBucket(ctx, js, replicas)
		return err
	}); err != nil {
		return nil, err
	}
	return takeLock(ctx, kv)
}

// lockBucket creates the lock bucket, or opens it when another meter has just created it. When
// neither works, the error is the creation's: that the bucket is not there only follows from it.
func lockBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, createErr := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.UsageConfigLockBucket,
		Description: "held by the meter changing the usage stream's configuration", TTL: configLockTTL, History: 1,
		Storage: jetstream.FileStorage, Replicas: max(replicas, 1)})
	if createErr == nil {
		return kv, nil
	}
	// Another meter may have created it in the same moment.
	kv, err := js.KeyValue(ctx, events.UsageConfigLockBucket)
	if err == nil {
		return kv, nil
	}
	return nil, fmt.Errorf("usage: lock bucket %s: create: %w (open: %v)", events.UsageConfigLockBucket, createErr, err)
}

// takeLock waits for the lock's key in kv and returns its release.
func takeLock(ctx context.Context, kv jetstream.KeyValue) (unlock func(), err error) {
	for {
		rev, err := kv.Create(ctx, configLockKey, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		if err == nil {
			return func() {
				_ = kv.Delete(context.WithoutCancel(ctx), configLockKey, jetstream.LastRevision(rev))
			}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("usage: lock %s: %w", events.UsageConfigLockBucket, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("usage: waiting for another meter to finish changing stream %s: %w", events.UsageStream, ctx.Err())
		case <-time.After(configLockPoll):
		}
	}
}

// ApplyPendingLimit sets the usage stream's per-rig limit to limit when that removes no event:
// directly when it raises the limit, and otherwise only after it has stopped the stream taking
// events, counted every subject's events and found none above the limit; the stream takes
// events again at once either way, within a few milliseconds. See docs/usage-stream.md.
func ApplyPendingLimit(ctx context.Context, js jetstream.JetStream, limit int64) (res PendingLimit, err error) {
	s, err := js.Stream(ctx, events.UsageStream)
	if err != nil {
		return res, fmt.Errorf("usage: per-rig limit on stream %s: %w", events.UsageStream, err)
	}
	unlock, err := lockConfig(ctx, js, s.CachedInfo().Config.Replicas)
	if err != nil {
		return res, err
	}
	defer unlock()
	return applyPendingLimit(ctx, js, limit)
}

// applyPendingLimit is ApplyPendingLimit under the lock already held.
func applyPendingLimit(ctx context.Context, js jetstream.JetStream, limit int64) (res PendingLimit, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("usage: per-rig limit on stream %s: %w", events.UsageStream, err)
		}
	}()
	s, err := js.Stream(ctx, events.UsageStream)
	if err != nil {
		return res, err
	}
	// A stream found paused was left so by a meter that stopped mid-count: this one ends the
	// pause, on the stream's own subjects.
	cfg := s.CachedInfo().Config
	paused := len(cfg.Subjects) == 1 && cfg.Subjects[0] == events.UsagePausedSubject
	cfg.Subjects = usageSubjects()
	if cfg.MaxMsgsPerSubject == limit && cfg.DiscardNewPerSubject == (limit > 0) {
		if paused {
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				return res, err
			}
		}
		return PendingLimit{Applied: true, InForce: limit}, nil
	}
	next := cfg
	next.MaxMsgsPerSubject, next.DiscardNewPerSubject = limit, limit > 0
	if raisesOrKeeps(cfg.MaxMsgsPerSubject, limit) {
		if _, err := js.UpdateStream(ctx, next); err != nil {
			return res, err
		}
		return PendingLimit{Applied: true, InForce: limit}, nil
	}

	// A first count, with the stream taking events: when a rig holds more already, there is no need to stop it.
	most, count, err := mostPending(ctx, s)
	if err != nil {
		return res, err
	}
	if count > uint64(limit) {
		return PendingLimit{InForce: max(cfg.MaxMsgsPerSubject, 0), Subject: most, Pending: count}, nil
	}
	pause := cfg
	pause.Subjects = []string{events.UsagePausedSubject}
	if _, err := js.UpdateStream(ctx, pause); err != nil {
		return res, err
	}
	defer func() {
		// Whatever happened, the stream takes events again, with the limit it has now.
		restore := context.WithoutCancel(ctx)
		cur, ierr := js.Stream(restore, events.UsageStream)
		if ierr == nil {
			back := cur.CachedInfo().Config
			back.Subjects = usageSubjects()
			_, ierr = js.UpdateStream(restore, back)
		}
		if ierr != nil && err == nil {
			err = fmt.Errorf("take events again: %w", ierr)
		}
	}()
	// The count that decides, with no event arriving.
	if most, count, err = mostPending(ctx, s); err != nil {
		return res, err
	}
	if count > uint64(limit) {
		return PendingLimit{InForce: max(cfg.MaxMsgsPerSubject, 0), Subject: most, Pending: count}, nil
	}
	next.Subjects = pause.Subjects
	if _, err := js.UpdateStream(ctx, next); err != nil {
		return res, err
	}
	return PendingLimit{Applied: true, InForce: limit}, nil
}

// mostPending is the subject of the usage stream that holds the most events, and how many.
func mostPending(ctx context.Context, s jetstream.Stream) (string, uint64, error) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.Below(events.UsagePrefix)))
	if err != nil {
		return "", 0, err
	}
	var most string
	var count uint64
	for subject, n := range info.State.Subjects {
		if n > count || n == count && subject < most {
			most, count = subject, n
		}
	}
	return most, count, nil
}
