package metering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usagestore"
)

// The meter turns usage events into priced usage rows and ledger postings, exactly once.
//
// How exactly once holds (docs/failure-cases.md, cases 1-8):
//   - Nothing is claimed before it is written: there is no "seen" set outside the database.
//     A batch's usage rows, rollups, rejections and ledger postings are written in one
//     PostgreSQL transaction; only after it commits are the batch's messages acknowledged.
//     A crash before the commit leaves nothing and the messages are delivered again; a crash
//     after the commit and before the acks delivers them again too, and then the database's
//     unique keys (event id, request id) find every one already stored (cases 1 and 2).
//   - The first event for an event id or a request id wins, whatever a later one says
//     (case 3): a later one is refused as a duplicate, for review.
//   - A batch holding stored events, duplicates of each other and new events stores every new
//     event and reports each duplicate (case 4); the stream's dedupe window is only an
//     optimisation, the unique keys hold forever (case 5).
//   - An event that breaks the contract is rejected with its reason, counted per rig, reason
//     and hour, kept whole if it is among the first few of its rig and reason in the hour, and
//     acknowledged: it never blocks the stream (case 7).
//   - Charges are integers of picodollars: tokens times micro-dollars per million tokens,
//     summed with overflow checks per request and per batch and in NUMERIC in the database
//     (case 8). A request that produced no completion token is stored and charged nothing
//     (case 18).
//
// What is billed (see docs/metering-integrity.md): the customer pays the price version its
// route ticket names and the provider is paid the ticket's asks, whatever either is when the
// event arrives; no event pays its provider more than its customer paid. Billable tokens are
// bounded by the ticket and by the gateway's record of the attempt (gateway_requests): an
// attempt the gateway saw fail bills nothing, and an event whose record has not landed yet
// waits for it. The ledger gets one transaction per customer account per batch, crediting
// each provider's payable and the platform's revenue, so the ledger grows with batches, not
// with traffic.
//
// The meter never stalls on one batch: an event whose sums would overflow is refused, a batch
// the database refuses for what one of its events holds is split until that event is found
// and refused, and only a fault of the database or the network (a lost connection, a timeout)
// makes a batch wait and try again whole.
//
// Throughput: Run is a pipeline. One goroutine collects the next batch and checks it
// (decodes, validates, verifies its tickets, on every core) while up to two batches commit,
// each in its own transaction and acknowledged only after its own commit, so nothing above
// changes. Two batches may commit in either order, as two meters' batches always could:
// which of two racing copies of an event is stored is the unique keys' decision, and every
// transaction takes its locks in one order (event ids, rollup keys, ledger accounts,
// rejection counts), so that two of them queue instead of deadlocking. A batch's rows and rollups are
// written by one statement, the rows as one array per column: no staging table, since a
// temporary one costs catalog writes on every batch and a permanent one would be shared by
// concurrent meters. That statement takes every event for new, as nearly every one is; when
// one is stored already, the database refuses it and the batch is written again by a
// statement that skips and reports each duplicate (commit).

// The meter's own reasons for refusing an event, beside the contract's (package usage).
const (
	// RejectUnknownOffering is an event for an offering the catalog does not hold.
	RejectUnknownOffering usage.RejectReason = "unknown_offering"
	// RejectForeign is an event whose NATS subject names another provider than the offering's.
	RejectForeign usage.RejectReason = "foreign_offering"
	// RejectNoPrice is an event whose ticket names no price of its tier and offering: a price
	// version the price book does not hold, one of another tier, or one of another model than
	// the offering's.
	RejectNoPrice usage.RejectReason = "no_price"
	// RejectAskAbovePrice is an event that would pay its provider, at the ticket's asks, more
	// than its customer pays at the ticket's price version.
	RejectAskAbovePrice usage.RejectReason = "ask_above_price"
	// RejectOverflow is an event whose charge, or whose addition to its batch's sums, does not
	// fit the 64-bit picodollars of a ledger posting, or that the database refused as out of
	// range.
	RejectOverflow usage.RejectReason = "overflow"
	// RejectRefusedByDatabase is an event the database refused for a reason the meter's
	// checks did not foresee (a data exception or an integrity violation), found by splitting
	// its batch.
	RejectRefusedByDatabase usage.RejectReason = "refused_by_database"
)

// MeterConfig wires the meter.
type MeterConfig struct {
	Pool     *pgxpool.Pool
	Ledger   *ledger.Ledger
	Tickets  *ticket.Signer
	JS       jetstream.JetStream // for the dead-letter subject
	Consumer jetstream.Consumer
	// BatchSize is the most events written in one database transaction (DefaultBatchSize
	// when 0).
	BatchSize int
	// Linger is how long a batch waits to fill after its first event.
	Linger time.Duration
	// SettleTime is how long after an event entered the stream the gateway's record of its
	// attempt has had time to land (the gateway writes its records every tenth of a second).
	// An event that finds no record is looked at again once it has been in the stream that
	// long (DefaultSettleTime when 0).
	SettleTime time.Duration
	// RecordLag is how long the gateway's record of an attempt may take to land after the
	// attempt's usage event reached the meter (the gateway writes its records every tenth of a
	// second): a batch that is not full is committed once its newest event has been in hand
	// this long, so that its events find their records at the first look rather than being put
	// off for SettleTime and delivered again (DefaultRecordLag when 0; negative: no wait).
	RecordLag time.Duration
	// RecordWait is how long an event waits for the gateway's record of its attempt before it
	// is billed without one, within its ticket's bounds only and flagged no_gateway_record
	// (DefaultRecordWait when 0). Ages are measured from the stream's own timestamp of the
	// event, never from the agent's clock.
	RecordWait time.Duration
	// RejectionSamples is how many refused events are kept whole per rig, reason and hour
	// (DefaultRejectionSamples when 0); the rest are counted.
	RejectionSamples int
	Now              func() time.Time
	Log              *slog.Logger
	Metrics          *Metrics
	// OnCommit, when set, is called after each batch's transaction commits and before its
	// messages are acknowledged, with what the batch did and the time it committed. It is
	// called from the committing goroutines, two of which may call it at once, and holds
	// them up until it returns. The benchmark measures publish-to-commit latency with it
	// (BatchResult.Occurred).
	OnCommit func(res BatchResult, committed time.Time)
}

// Defaults of MeterConfig.
const (
	// DefaultBatchSize is the meter's batch size unless MeterConfig says otherwise. Batches
	// grow to it while the committers are busy: a batch costs a few round trips and one ledger
	// transaction per customer whatever its size, and 5,000 events commit in well under the
	// stream's AckWait.
	DefaultBatchSize        = 5000
	DefaultSettleTime       = time.Second
	DefaultRecordLag        = 250 * time.Millisecond
	DefaultRecordWait       = 2 * time.Minute
	DefaultRejectionSamples = 20
)

// committers is how many batch transactions may be in flight at once. With two full batches,
// the database inserts one batch's rows while the other waits on its rollup and ledger locks,
// posts and commits; more would only queue on those locks.
const committers = 2

// Meter consumes the usage stream.
type Meter struct {
	cfg        MeterConfig
	holding    atomic.Int32 // batches a committer holds for RecordLag before it commits them
	committing atomic.Int32 // batches being committed, after their hold
	// partial lets one batch that is not full commit at a time: two commit at once only when
	// both are full (collectAndCheck).
	partial sync.Mutex
	mu      sync.Mutex // guards ledgers, which the committers share
	ledgers map[ledgerKey]ledger.LedgerAccountID
	// months makes the monthly partition of usage_events an event's row goes to, before the
	// batch is written (docs/usage-storage.md, "Partitions ahead").
	months *usagestore.Store
}

type ledgerKey struct {
	kind  ledger.AccountKind
	owner string
}

// NewMeter returns a meter; Run starts it.
func NewMeter(cfg MeterConfig) *Meter {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 20 * time.Millisecond
	}
	if cfg.SettleTime <= 0 {
		cfg.SettleTime = DefaultSettleTime
	}
	if cfg.RecordWait <= 0 {
		cfg.RecordWait = DefaultRecordWait
	}
	if cfg.RecordLag == 0 {
		cfg.RecordLag = DefaultRecordLag
	}
	if cfg.RejectionSamples <= 0 {
		cfg.RejectionSamples = DefaultRejectionSamples
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Meter{cfg: cfg, ledgers: map[ledgerKey]ledger.LedgerAccountID{},
		months: usagestore.New(usagestore.Config{Pool: cfg.Pool, AttachMonth: AttachMonth, Log: cfg.Log})}
}

// Run meters until ctx ends. A batch that fails to commit for a fault of the database or the
// network is retried, with backoff, until it commits or ctx ends; its messages stay
// unacknowledged meanwhile. One that fails for what its events hold is split (commitWithRetry).
// Run returns once the batches in hand are committed (or left unacknowledged) and its own
// goroutines have ended.
func (m *Meter) Run(ctx context.Context) error {
	it, err := m.cfg.Consumer.Messages(jetstream.PullMaxMessages(2 * m.cfg.BatchSize))
	if err != nil {
		return fmt.Errorf("metering: consume: %w", err)
	}
	defer it.Stop()
	// The watchers end with Run, whether ctx ended or the stream of messages did.
	ctx, cancel := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer cancel()
	watchers.Go(func() { <-ctx.Done(); it.Stop() })
	watchers.Go(func() { m.watchConsumer(ctx) })

	// The collector stays one checked batch ahead of the committers: the channel is unbuffered.
	checked := make(chan checkedBatch)
	collected := make(chan error, 1)
	go func() {
		defer close(checked)
		collected <- m.collectAndCheck(ctx, it, checked)
	}()
	var wg sync.WaitGroup
	for range committers {
		wg.Go(func() {
			for b := range checked {
				if !m.hold(ctx, b) {
					continue
				}
				m.committing.Add(1)
				if len(b.acks) < m.cfg.BatchSize {
					m.partial.Lock()
					m.commitWithRetry(ctx, b)
					m.partial.Unlock()
				} else {
					m.commitWithRetry(ctx, b)
				}
				m.committing.Add(-1)
			}
		})
	}
	wg.Wait()
	return <-collected
}

// hold waits until the gateway's records of a batch's attempts have had time to land
// (RecordLag after its newest event came), unless the batch is full: a full batch is what a
// backlog or a burst gives, whose events are mostly older, and holding it would only slow the
// meter down when it has the most to do. Meanwhile the batch counts as held, so the collector
// goes on filling the next one, and hands it over as this one's hold ends: the next batch's
// hold then runs while this one commits. It is false when ctx ended first: the batch is left
// unacknowledged, for the stream to deliver again.
func (m *Meter) hold(ctx context.Context, b checkedBatch) bool {
	if m.cfg.RecordLag <= 0 || len(b.acks) >= m.cfg.BatchSize || b.received.IsZero() {
		return true
	}
	wait := time.Until(b.received.Add(m.cfg.RecordLag))
	if wait <= 0 {
		return true
	}
	m.holding.Add(1)
	defer m.holding.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// collectAndCheck feeds the committers checked batches until the stream ends or ctx does. A
// batch goes to a committer once it is full, or once Linger has passed since its first event,
// no other batch is held (hold) and a committer is free (mayHandOver); until then it keeps filling, checked
// as it grows, since a fuller batch costs the database hardly more than a small one. So
// batches grow with the load, the per-batch costs (the ledger's transactions, the round
// trips) shrink per event when the meter has the most to do, and two batches commit at once
// only when both are full (Meter.partial). A batch is handed over while the one before it
// commits, so that its hold and that commit overlap: an event waits for at most the hold of
// the batch before its own, its own hold and its commit.
func (m *Meter) collectAndCheck(ctx context.Context, it jetstream.MessagesContext, out chan<- checkedBatch) error {
	for {
		first, err := it.Next()
		if err != nil {
			if m.consumeError(ctx, err) {
				return stopError(ctx, err)
			}
			continue
		}
		deadline := time.Now().Add(m.cfg.Linger)
		msgs, err := m.gather(ctx, it, []jetstream.Msg{first}, m.cfg.BatchSize, deadline)
		b := m.newBatch()
		b.add(msgs)
		handed := false
		for !handed && err == nil && ctx.Err() == nil && len(b.acks) < m.cfg.BatchSize {
			if m.mayHandOver() {
				select {
				case out <- b.checkedBatch:
					handed = true
					continue
				default:
				}
			}
			msgs, err = m.gather(ctx, it, nil, m.cfg.BatchSize-len(b.acks), time.Now().Add(fillPoll))
			b.add(msgs)
		}
		if !handed {
			select {
			case out <- b.checkedBatch:
			case <-ctx.Done():
				return ctx.Err() // unacknowledged: the stream delivers them again
			}
		}
		if err != nil && m.consumeError(ctx, err) {
			return stopError(ctx, err)
		}
	}
}

// mayHandOver says whether a batch that is not full may go to a free committer: when no other
// batch is held, and, where batches are not held at all, when none is committing either.
func (m *Meter) mayHandOver() bool {
	return m.holding.Load() == 0 && (m.cfg.RecordLag > 0 || m.committing.Load() == 0)
}

// fillPoll is how long a batch waiting for a free committer waits for more events before it
// looks again.
const fillPoll = 2 * time.Millisecond

// stopError is what Run returns when it stops: the context's error, or, while the process is
// meant to run, an error saying the consumer's stream of messages closed, so that the
// process ends and its supervisor restarts it rather than serving without metering.
func stopError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("metering: the consumer's message stream closed; the meter must restart: %w", err)
}

// consumeError handles an error of the consumer: it stops Run when ctx has ended or the
// consumer's iterator is closed; any other is logged and, after a pause, passed.
func (m *Meter) consumeError(ctx context.Context, err error) (stop bool) {
	if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
		return true
	}
	m.cfg.Log.Warn("meter: consume", "err", err)
	time.Sleep(200 * time.Millisecond)
	return false
}

// gather adds deliveries to batch until it holds max or the deadline passes.
func (m *Meter) gather(ctx context.Context, it jetstream.MessagesContext, batch []jetstream.Msg, max int, deadline time.Time) ([]jetstream.Msg, error) {
	for len(batch) < max {
		wait := time.Until(deadline)
		if wait <= 0 || ctx.Err() != nil {
			break
		}
		msg, err := it.Next(jetstream.NextMaxWait(wait))
		if err != nil {
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			return batch, err
		}
		batch = append(batch, msg)
	}
	return batch, nil
}

// commitWithRetry commits a batch and acknowledges its messages, whatever it takes:
//   - committed, its messages are acknowledged, but for those deferred to wait for their
//     gateway record, which are handed back to the stream to be delivered again later;
//   - refused for what one of its events holds (eventError), it is split in halves, each
//     committed on its own, until the event is alone, and that event is refused with the
//     database's reason while the others are metered;
//   - failed for anything else (the database or the network away, a timeout, a deadlock), it
//     is tried again whole, with backoff, judged afresh each time, and nothing is refused.
func (m *Meter) commitWithRetry(ctx context.Context, b checkedBatch) {
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		res, err := m.commit(ctx, b)
		if err == nil {
			m.finish(b, res, b.checkTook+time.Since(start))
			return
		}
		if eventError(err) && b.err == nil {
			if len(b.acks) > 1 {
				m.cfg.Log.Warn("meter: batch refused for one of its events; splitting it", "events", len(b.acks), "err", err)
				half := len(b.acks) / 2
				m.commitWithRetry(ctx, m.checkBatch(b.acks[:half]))
				m.commitWithRetry(ctx, m.checkBatch(b.acks[half:]))
				return
			}
			if len(b.acks) == 1 {
				if err = m.rejectAlone(ctx, b.acks[0], err); err == nil {
					_ = b.acks[0].Ack()
					return
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		m.cfg.Log.Error("meter: batch not committed; retrying", "events", len(b.acks), "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
		// The next attempt judges the batch afresh, at its own time, as if it had just arrived.
		b = m.checkBatch(b.acks)
	}
}

// finish reports a committed batch and settles its messages with the stream: each is
// acknowledged, but for the deferred, which are handed back to be delivered again after
// their delay.
func (m *Meter) finish(b checkedBatch, res BatchResult, took time.Duration) {
	if m.cfg.OnCommit != nil {
		m.cfg.OnCommit(res, time.Now())
	}
	m.cfg.Metrics.observe(res, took)
	m.publishRejections(res.Samples)
	var later map[uint64]time.Duration
	if len(res.Deferred) > 0 {
		later = make(map[uint64]time.Duration, len(res.Deferred))
		for _, d := range res.Deferred {
			later[d.Seq] = d.Delay
		}
	}
	for i, msg := range b.acks {
		if delay, ok := later[b.seqs[i]]; ok {
			_ = msg.NakWithDelay(delay)
			continue
		}
		_ = msg.Ack()
	}
}

const (
	codeUniqueViolation   = "23505"
	codeNumericOutOfRange = "22003"
)
