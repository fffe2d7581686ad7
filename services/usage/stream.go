package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names and the meter's durable consumer.
const (
	StreamName         = "USAGE"
	RejectedStreamName = "USAGE_REJECTED"
	RejectedSubject    = "usage_rejected" // + "." + reason
	ConsumerName       = "meter"
)

// StreamOptions sizes the usage stream. The zero value gives the production defaults.
type StreamOptions struct {
	// DuplicateWindow is how long the stream remembers event ids to drop re-sends. Five
	// minutes covers an agent's reconnect-and-resend after a broker restart or a network
	// blip, the common case, at the cost of an id per event in memory for that long
	// (about 150 MB at 10,000 events/s); re-sends after it are refused by the database's
	// unique keys, which hold forever (FIELD-CASES 5).
	DuplicateWindow time.Duration
	// MaxAge bounds how long unmetered events are kept: a meter down for longer loses them.
	MaxAge time.Duration
	// MaxBytes bounds the stream's storage; when full, new events are refused (the agents
	// keep them in their outboxes) rather than old ones dropped.
	MaxBytes int64
	// Replicas is 3 on a production cluster, 1 on the embedded server.
	Replicas int
	// AckWait is how long a delivered, unacknowledged event waits before it is delivered
	// again: longer than a batch's commit, short enough that a crashed meter's events come
	// back soon.
	AckWait time.Duration
}

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
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.AckWait == 0 {
		o.AckWait = 30 * time.Second
	}
	return o
}

// EnsureStreams creates or updates, idempotently, the usage stream, the stream of rejected
// events, and the meter's durable pull consumer.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts StreamOptions) (jetstream.Consumer, error) {
	opts = opts.withDefaults()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "usage events from gpuagents, metered exactly once",
		Subjects:    []string{SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxAge:      opts.MaxAge,
		MaxBytes:    opts.MaxBytes,
		MaxMsgSize:  int32(MaxEventBytes),
		Duplicates:  opts.DuplicateWindow,
		Replicas:    opts.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", StreamName, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        RejectedStreamName,
		Description: "usage events the meter refused, with the reason in the subject",
		Subjects:    []string{RejectedSubject + ".>"},
		Storage:     jetstream.FileStorage,
		MaxAge:      30 * 24 * time.Hour,
		MaxBytes:    1 << 30,
		Replicas:    opts.Replicas,
	}); err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", RejectedStreamName, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "the meter: prices usage and posts it to the ledger",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxDeliver:    -1, // never give up on an event: exactly once means not zero times
		MaxAckPending: 100_000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("usage: consumer %s: %w", ConsumerName, err)
	}
	return cons, nil
}
