package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/metering"
)

// ceilingConsumer is the durable consumer jetStreamCeiling reads with: the meter's consumer
// settings, from the first message after the warm-up round's skip messages.
func ceilingConsumer(skip int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: events.CeilingBenchConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxDeliver: -1, MaxAckPending: 100_000,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: uint64(skip) + 1,
	}
}

// holdForCeiling creates the ceiling's consumer before the measured round: the usage stream
// keeps a message only while a consumer has yet to acknowledge it, so without this one the
// messages the meter acknowledges would be gone when jetStreamCeiling reads them.
func holdForCeiling(ctx context.Context, js jetstream.JetStream, skip int) error {
	if _, err := js.CreateOrUpdateConsumer(ctx, events.UsageStream, ceilingConsumer(skip)); err != nil {
		return fmt.Errorf("ceiling consumer: %w", err)
	}
	return nil
}

// jetStreamCeiling is how fast a plain pull consumer fetches and acknowledges the n messages
// the meter has just metered in its measured round, from the same stream (they follow the
// warm-up round's skip messages, and holdForCeiling kept them): a durable consumer of its own
// with the meter's consumer settings, pulling as many at a time as the meter does and
// acknowledging each message. It ends when the server has every acknowledgement.
func jetStreamCeiling(ctx context.Context, natsURL string, skip, n, batchSize int) (float64, error) {
	nc, js, err := events.Connect(ctx, natsURL, "meterbench-ceiling", nil)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	cons, err := js.CreateOrUpdateConsumer(ctx, events.UsageStream, ceilingConsumer(skip))
	if err != nil {
		return 0, fmt.Errorf("ceiling consumer: %w", err)
	}
	start := time.Now()
	it, err := cons.Messages(jetstream.PullMaxMessages(2 * batchSize))
	if err != nil {
		return 0, err
	}
	for range n {
		msg, err := it.Next()
		if err != nil {
			it.Stop()
			return 0, fmt.Errorf("ceiling consumer: %w", err)
		}
		if err := msg.Ack(); err != nil {
			it.Stop()
			return 0, fmt.Errorf("ceiling consumer: %w", err)
		}
	}
	it.Stop()
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, err
		}
		if info.AckFloor.Stream >= uint64(skip+n) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// copyCeiling is how fast pgx CopyFrom writes the usage rows the meter stored in its measured
// round (after the warm-up round's skip messages) as the meter must at the least: each row's keys
// into a scratch copy of usage_event_keys (the event and request ids, unique across the monthly
// partitions) and the row into a scratch table with usage_events' columns, constraints and
// indexes (all but the foreign keys), partitioned as it is, in batches of the meter's size, each its own transaction,
// one after the other (metering.UsageTablesLike).
func copyCeiling(ctx context.Context, pool *pgxpool.Pool, skip, batchSize int) (float64, error) {
	stored, err := metering.ReadUsageRows(ctx, pool, int64(skip))
	if err != nil {
		return 0, fmt.Errorf("read the usage rows: %w", err)
	}
	tables, err := metering.CreateUsageTablesLike(ctx, pool, "meterbench_copy", "meterbench_keys")
	if err != nil {
		return 0, err
	}
	defer tables.Drop(context.WithoutCancel(ctx), pool) //nolint:errcheck

	start := time.Now()
	for from := 0; from < len(stored); from += batchSize {
		batch := stored[from:min(from+batchSize, len(stored))]
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return tables.Copy(ctx, tx, batch) }); err != nil {
			return 0, fmt.Errorf("copy: %w", err)
		}
	}
	return float64(len(stored)) / time.Since(start).Seconds(), nil
}
