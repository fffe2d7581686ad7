package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
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

// usageRow is a stored usage row as plain Go values, for pgx to encode.
type usageRow struct {
	eventID, requestID, accountID, apiKeyID, offeringID, providerID, tier, model string
	inputTokens, outputTokens, reportedInput, reportedOutput                     int64
	ttft                                                                         pgtype.Float8 // NULL for a whole answer
	duration, energy                                                             float64
	energySource, status                                                         string
	priceID, inputPrice, outputPrice, askIn, askOut, charge, payable             int64
	flag, flagReason                                                             pgtype.Text
	occurred, metered                                                            time.Time
	seq                                                                          int64
}

// usageColumns are the columns the meter writes.
var usageColumns = []string{"event_id", "request_id", "account_id", "api_key_id", "offering_id", "provider_account_id",
	"tier", "model", "input_tokens", "output_tokens", "reported_input_tokens", "reported_output_tokens", "ttft_ms",
	"duration_ms", "energy_j", "energy_source", "status", "price_id", "input_price", "output_price", "ask_input_price",
	"ask_output_price", "charge_pico", "payable_pico", "flag", "flag_reason", "occurred_at", "metered_at", "stream_seq"}

// copyCeiling is how fast pgx CopyFrom writes the usage rows the meter stored in its measured
// round (after the warm-up round's skip messages) as the meter must at the least: each row's keys
// into a scratch copy of usage_event_keys (the event and request ids, unique across the monthly
// partitions) and the row into a scratch table with usage_events' columns, constraints and
// indexes (all but the foreign keys), partitioned as it is, in batches of the meter's size, each its own transaction,
// one after the other.
func copyCeiling(ctx context.Context, pool *pgxpool.Pool, skip, batchSize int) (float64, error) {
	rows, err := pool.Query(ctx, `SELECT event_id, request_id, account_id::text, api_key_id, offering_id::text,
		provider_account_id::text, tier, model, input_tokens, output_tokens, reported_input_tokens, reported_output_tokens,
		ttft_ms, duration_ms, energy_j, energy_source, status, price_id, input_price, output_price, ask_input_price,
		ask_output_price, charge_pico::bigint, payable_pico::bigint, flag, flag_reason, occurred_at, metered_at, stream_seq
		FROM usage_events WHERE stream_seq > $1 ORDER BY stream_seq`, skip)
	if err != nil {
		return 0, err
	}
	stored, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (u usageRow, err error) {
		err = r.Scan(&u.eventID, &u.requestID, &u.accountID, &u.apiKeyID, &u.offeringID, &u.providerID, &u.tier,
			&u.model, &u.inputTokens, &u.outputTokens, &u.reportedInput, &u.reportedOutput, &u.ttft, &u.duration,
			&u.energy, &u.energySource, &u.status, &u.priceID, &u.inputPrice, &u.outputPrice, &u.askIn, &u.askOut,
			&u.charge, &u.payable, &u.flag, &u.flagReason, &u.occurred, &u.metered, &u.seq)
		return u, err
	})
	if err != nil {
		return 0, fmt.Errorf("read the usage rows: %w", err)
	}
	// Partitioned by month as usage_events is, so that a row is routed to its partition as the
	// meter's are; one partition takes every month (the measured events are all of this one).
	if _, err := pool.Exec(ctx, `CREATE TABLE meterbench_copy (LIKE usage_events INCLUDING ALL) PARTITION BY RANGE (occurred_at);
		CREATE TABLE meterbench_copy_months PARTITION OF meterbench_copy DEFAULT;
		CREATE TABLE meterbench_keys (LIKE usage_event_keys INCLUDING ALL)`); err != nil {
		return 0, err
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE meterbench_copy, meterbench_keys`) //nolint:errcheck

	start := time.Now()
	for from := 0; from < len(stored); from += batchSize {
		batch := stored[from:min(from+batchSize, len(stored))]
		keys := make([][]any, len(batch))
		for i, u := range batch {
			keys[i] = []any{u.eventID, u.requestID, u.occurred, u.seq}
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"meterbench_keys"}, []string{"event_id", "request_id", "occurred_at", "stream_seq"},
				pgx.CopyFromRows(keys)); err != nil {
				return err
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"meterbench_copy"}, usageColumns, &rowSource{rows: batch, at: -1})
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("copy: %w", err)
		}
	}
	return float64(len(stored)) / time.Since(start).Seconds(), nil
}

// rowSource hands rows to CopyFrom one at a time, each as a fresh []any.
type rowSource struct {
	rows []usageRow
	at   int
}

func (s *rowSource) Next() bool { s.at++; return s.at < len(s.rows) }
func (s *rowSource) Err() error { return nil }
func (s *rowSource) Values() ([]any, error) {
	u := &s.rows[s.at]
	return []any{u.eventID, u.requestID, u.accountID, u.apiKeyID, u.offeringID, u.providerID, u.tier, u.model,
		u.inputTokens, u.outputTokens, u.reportedInput, u.reportedOutput, u.ttft, u.duration, u.energy, u.energySource,
		u.status, u.priceID, u.inputPrice, u.outputPrice, u.askIn, u.askOut, u.charge, u.payable, u.flag, u.flagReason,
		u.occurred, u.metered, u.seq}, nil
}
