package metering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The meter turns usage events into priced usage rows and ledger postings, exactly once.
//
// How exactly once holds (FIELD-CASES 1-8):
//   - Nothing is claimed before it is written: there is no "seen" set outside the database.
//     A batch's usage rows, rollups, rejections and ledger postings are written in one
//     PostgreSQL transaction; only after it commits are the batch's messages acknowledged.
//     A crash before the commit leaves nothing and the messages are delivered again; a crash
//     after the commit and before the acks delivers them again too, and then the database's
//     unique keys (event id, request id) find every one already stored (FIELD-CASES 1, 2).
//   - The first event for an event id or a request id wins, whatever a later one says
//     (FIELD-CASES 3): a later one is kept in usage_rejections as a duplicate, for review.
//   - A batch holding stored events, duplicates of each other and new events stores every new
//     event and reports each duplicate (FIELD-CASES 4); the stream's dedupe window is only an
//     optimisation, the unique keys hold forever (FIELD-CASES 5).
//   - An event that breaks the contract is rejected with its reason and raw body, and
//     acknowledged: it never blocks the stream (FIELD-CASES 7).
//   - Charges are integers of picodollars: tokens times micro-dollars per million tokens,
//     summed in int64 per request and NUMERIC in the database (FIELD-CASES 8). A request
//     that produced no completion token is stored and charged nothing (FIELD-CASES 20).
//
// Pricing: the customer pays the tier's price in force at the event's time (the route
// ticket says which tier); the provider earns its ask; the platform's revenue is the
// difference. The ledger gets one transaction per customer account per batch, crediting each
// provider's payable and the platform's revenue, so the ledger grows with batches, not with
// traffic.
//
// Throughput: Run is a pipeline. One goroutine collects the next batch and checks it
// (decodes, validates, verifies its tickets, on every core) while up to two batches commit,
// each in its own transaction and acknowledged only after its own commit, so nothing above
// changes. Two batches may commit in either order, as two meters' batches always could:
// which of two racing copies of an event is stored is the unique keys' decision, and every
// transaction takes its locks in one order (event ids, rollup keys, ledger accounts), so
// that two of them queue instead of deadlocking. A batch's rows and rollups are written by
// one statement, the rows as one array per column: no staging table, since a temporary one
// costs catalog writes on every batch and a permanent one would be shared by concurrent
// meters. That statement takes every event for new, as nearly every one is; when one is
// stored already, the database refuses it and the batch is written again by a statement that
// skips and reports each duplicate (commit).

// RejectUnknownOffering is an event for an offering the catalog does not hold, or one whose
// NATS subject names another provider than the offering's (a foreign event).
const (
	RejectUnknownOffering RejectReason = "unknown_offering"
	RejectForeign         RejectReason = "foreign_offering"
	RejectNoPrice         RejectReason = "no_price"
)

// MeterConfig wires the meter.
type MeterConfig struct {
	Pool     *pgxpool.Pool
	Ledger   *billing.Ledger
	Tickets  *ticket.Signer
	JS       jetstream.JetStream // for the dead-letter subject
	Consumer jetstream.Consumer
	// BatchSize is the most events written in one database transaction (DefaultBatchSize
	// when 0).
	BatchSize int
	// Linger is how long a batch waits to fill after its first event.
	Linger  time.Duration
	Now     func() time.Time
	Log     *slog.Logger
	Metrics *Metrics
	// OnCommit, when set, is called after each batch's transaction commits and before its
	// messages are acknowledged, with what the batch did and the time it committed. It is
	// called from the committing goroutines, two of which may call it at once, and holds
	// them up until it returns. The benchmark measures publish-to-commit latency with it
	// (BatchResult.Occurred).
	OnCommit func(res BatchResult, committed time.Time)
}

// DefaultBatchSize is the meter's batch size unless MeterConfig says otherwise. Batches grow
// to it while the committers are busy: a batch costs a few round trips and one ledger
// transaction per customer whatever its size, and 5,000 events commit in well under the
// stream's AckWait.
const DefaultBatchSize = 5000

// committers is how many batch transactions may be in flight at once. With two full batches,
// the database inserts one batch's rows while the other waits on its rollup and ledger locks,
// posts and commits; more would only queue on those locks.
const committers = 2

// Meter consumes the usage stream.
type Meter struct {
	cfg        MeterConfig
	committing atomic.Int32 // batches being committed
	mu         sync.Mutex   // guards ledgers, which the committers share
	ledgers    map[ledgerKey]billing.LedgerAccountID
}

type ledgerKey struct {
	kind  billing.AccountKind
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Meter{cfg: cfg, ledgers: map[ledgerKey]billing.LedgerAccountID{}}
}

// Run meters until ctx ends. A batch that fails to commit is retried, with backoff, until it
// commits or ctx ends; its messages stay unacknowledged meanwhile.
func (m *Meter) Run(ctx context.Context) error {
	it, err := m.cfg.Consumer.Messages(jetstream.PullMaxMessages(2 * m.cfg.BatchSize))
	if err != nil {
		return fmt.Errorf("metering: consume: %w", err)
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	go m.watchLag(ctx)

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
				m.committing.Add(1)
				m.commitWithRetry(ctx, b)
				m.committing.Add(-1)
			}
		})
	}
	wg.Wait()
	return <-collected
}

// collectAndCheck feeds the committers checked batches until the stream ends or ctx does. A
// batch goes to a committer once it is full, or once Linger has passed since its first event
// and no other batch is committing; until then it keeps filling, checked as it grows, since a
// fuller batch costs the database hardly more than a small one. So batches grow with the
// load, the per-batch costs (the ledger's transactions, the round trips) shrink per event
// when the meter has the most to do, and two batches commit at once only when both are full.
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
			if m.committing.Load() == 0 {
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

// fillPoll is how long a batch waiting for a free committer waits for more events before it
// looks again.
const fillPoll = 2 * time.Millisecond

// redeliveries finds which of the events not inserted are stored from the very same stream
// message: deliveries again of what a batch already committed, not duplicates.
func redeliveries(ctx context.Context, tx pgx.Tx, priced []pricedEvent, isNew map[string]bool) (map[string]bool, error) {
	var ids []string
	seqs := map[string]int64{}
	for i := range priced {
		id := priced[i].c.ev.ID
		if !isNew[id] {
			ids = append(ids, id)
			seqs[id] = int64(priced[i].c.msg.Seq)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT event_id, stream_seq FROM usage_events WHERE event_id = ANY ($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, err
		}
		if seqs[id] == seq {
			out[id] = true
		}
	}
	return out, rows.Err()
}

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

func (m *Meter) commitWithRetry(ctx context.Context, b checkedBatch) {
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		res, err := m.commit(ctx, b)
		if isDataError(err) && len(b.acks) > 1 {
			// Some event breaks a database rule the checks did not foresee. Meter the
			// events one by one so that the others are not held back by it.
			m.cfg.Log.Error("meter: batch refused by the database; metering its events one by one", "err", err)
			for _, msg := range b.acks {
				m.commitWithRetry(ctx, m.checkBatch([]jetstream.Msg{msg}))
			}
			return
		}
		if isDataError(err) {
			err = m.rejectAlone(ctx, b.acks[0], err)
			if err == nil {
				_ = b.acks[0].Ack()
				return
			}
		}
		if err == nil {
			if m.cfg.OnCommit != nil {
				m.cfg.OnCommit(res, time.Now())
			}
			m.cfg.Metrics.observe(res, b.checkTook+time.Since(start))
			m.publishRejections(res.Rejections)
			for _, msg := range b.acks {
				_ = msg.Ack()
			}
			return
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

// isDataError is true for a database refusal that retrying cannot cure: a data exception or
// an integrity violation (SQLSTATE classes 22 and 23).
func isDataError(err error) bool {
	code := pgErrorCode(err)
	return strings.HasPrefix(code, "22") || strings.HasPrefix(code, "23")
}

// rejectAlone keeps an event the database refused in the rejections table, so the stream
// moves on and the event waits for review.
func (m *Meter) rejectAlone(ctx context.Context, msg jetstream.Msg, cause error) error {
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	r := StoredRejection{Message: Message{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Data: msg.Data()},
		Reason: RejectSchema, Detail: "refused by the database: " + cause.Error()}
	return pgx.BeginFunc(ctx, m.cfg.Pool, func(tx pgx.Tx) error {
		return insertRejections(ctx, tx, []StoredRejection{r}, m.cfg.Now())
	})
}

// Message is one delivery from the stream: its sequence, subject and body.
type Message struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// BatchResult says what a committed batch did.
type BatchResult struct {
	Stored     int
	Charged    money.Pico
	Rejections []StoredRejection
	// Occurred holds the event times of the Stored events, in no particular order.
	Occurred []time.Time
	// Usages holds the Stored events' data, each at the index of its time in Occurred.
	Usages []Usage
}

// StoredRejection is a refused event as the rejections table keeps it.
type StoredRejection struct {
	Message
	EventID string
	Reason  RejectReason
	Detail  string
}

// Process meters a batch of messages in one database transaction and returns what it did. It
// is safe to run again on the same messages: what is stored stays stored once.
func (m *Meter) Process(ctx context.Context, batch []jetstream.Msg) (BatchResult, error) {
	return m.commit(ctx, m.checkBatch(batch))
}

// ProcessMessages is Process on messages already read off the stream.
func (m *Meter) ProcessMessages(ctx context.Context, msgs []Message) (BatchResult, error) {
	return m.commit(ctx, m.check(msgs))
}

// checkedBatch is a batch after the checks that need no database, ready to commit.
type checkedBatch struct {
	acks       []jetstream.Msg // the deliveries to acknowledge once it commits
	now        time.Time       // the meter's clock when it was last checked: its metering time
	cands      []candidate
	rejections []StoredRejection
	checkTook  time.Duration
	err        error // the deliveries could not be read
}

// candidate is an event that passed the checks that need no database.
type candidate struct {
	msg        Message
	ev         UsageEvent
	claims     ticket.Claims
	providerID string
}

// batchBuilder checks a batch's deliveries as they are gathered.
type batchBuilder struct {
	checkedBatch
	m                      *Meter
	seenEvent, seenRequest map[string]bool
}

func (m *Meter) newBatch() *batchBuilder {
	// Sized for a full batch: grown from empty, the maps would rehash a dozen times a batch.
	return &batchBuilder{m: m, seenEvent: make(map[string]bool, m.cfg.BatchSize),
		seenRequest: make(map[string]bool, m.cfg.BatchSize)}
}

// checkBatch reads the deliveries' sequences and checks them.
func (m *Meter) checkBatch(batch []jetstream.Msg) checkedBatch {
	b := m.newBatch()
	b.add(batch)
	return b.checkedBatch
}

// check checks messages already read off the stream.
func (m *Meter) check(msgs []Message) checkedBatch {
	b := m.newBatch()
	b.addMessages(msgs)
	return b.checkedBatch
}

// add reads the deliveries' sequences, checks them and adds them to the batch.
func (b *batchBuilder) add(deliveries []jetstream.Msg) {
	b.acks = append(b.acks, deliveries...)
	msgs := make([]Message, 0, len(deliveries))
	for _, d := range deliveries {
		meta, err := d.Metadata()
		if err != nil {
			b.err = fmt.Errorf("metering: message metadata: %w", err)
			return
		}
		msgs = append(msgs, Message{Seq: meta.Sequence.Stream, Subject: d.Subject(), Data: d.Data()})
	}
	b.addMessages(msgs)
}

// checkChunk is the fewest events worth a goroutine of their own when checking a batch.
const checkChunk = 256

// addMessages runs the checks that need no database on every message, spread over the cores
// and at the time they run, then refuses duplicates of events earlier in the batch: the first
// wins.
func (b *batchBuilder) addMessages(msgs []Message) {
	if len(msgs) == 0 || b.err != nil {
		return
	}
	start := time.Now()
	b.now = b.m.cfg.Now()
	verdicts := make([]verdict, len(msgs))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(msgs)/checkChunk))
	per := (len(msgs) + workers - 1) / workers
	var wg sync.WaitGroup
	for from := 0; from < len(msgs); from += per {
		wg.Go(func() {
			for i := from; i < min(from+per, len(msgs)); i++ {
				verdicts[i] = b.m.checkOne(msgs[i], b.now)
			}
		})
	}
	wg.Wait()

	for i := range verdicts {
		v := &verdicts[i]
		if v.rejected {
			b.rejections = append(b.rejections, v.rejection)
			continue
		}
		ev := &v.cand.ev
		if b.seenEvent[ev.ID] || b.seenRequest[ev.Data.RequestID] {
			b.rejections = append(b.rejections, rejection(v.cand.msg, ev.ID,
				reject(RejectDuplicate, "event %s or request %s earlier in the same batch", ev.ID, ev.Data.RequestID)))
			continue
		}
		b.seenEvent[ev.ID], b.seenRequest[ev.Data.RequestID] = true, true
		b.cands = append(b.cands, v.cand)
	}
	b.checkTook += time.Since(start)
}

// verdict is what the checks made of one message: a candidate, or a rejection.
type verdict struct {
	cand      candidate
	rejected  bool
	rejection StoredRejection
}

func (m *Meter) checkOne(msg Message, now time.Time) verdict {
	ev, err := Decode(msg.Data)
	if err != nil {
		return verdict{rejected: true, rejection: rejection(msg, "", err)}
	}
	if err := Validate(ev, msg.Subject, now); err != nil {
		return verdict{rejected: true, rejection: rejection(msg, ev.ID, err)}
	}
	claims, err := VerifyTicket(ev, m.cfg.Tickets, now, MaxEventAge+24*time.Hour)
	if err != nil {
		return verdict{rejected: true, rejection: rejection(msg, ev.ID, err)}
	}
	providerID, _, _ := ParseSubject(msg.Subject)
	return verdict{cand: candidate{msg: msg, ev: ev, claims: claims, providerID: providerID}}
}

// rejection is the stored form of a check's refusal.
func rejection(msg Message, eventID string, err error) StoredRejection {
	reason := ReasonOf(err)
	if reason == "" {
		reason = RejectMalformed
	}
	return StoredRejection{Message: msg, EventID: eventID, Reason: reason, Detail: err.Error()}
}

// commit writes a checked batch in one database transaction. It first takes every event for
// new, as nearly every one is, and inserts the batch without looking for stored duplicates;
// if one is stored after all (a redelivery), the database refuses the insert with a unique
// violation and the batch is written again in a second transaction that skips and reports
// each duplicate.
func (m *Meter) commit(ctx context.Context, b checkedBatch) (BatchResult, error) {
	if b.err != nil {
		return BatchResult{}, b.err
	}
	if err := m.resolveLedgers(ctx, b.cands); err != nil {
		return BatchResult{}, err
	}
	res, err := m.commitTx(ctx, b, true)
	if pgErrorCode(err) == codeUniqueViolation {
		res, err = m.commitTx(ctx, b, false)
	}
	return res, err
}

const codeUniqueViolation = "23505"

func pgErrorCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// commitTx is one attempt at commit; assumeNew says whether to take every event for new.
func (m *Meter) commitTx(ctx context.Context, b checkedBatch, assumeNew bool) (BatchResult, error) {
	var res BatchResult
	err := pgx.BeginFunc(ctx, m.cfg.Pool, func(tx pgx.Tx) error {
		s, err := m.store(ctx, tx, b.cands, b.now, assumeNew)
		if err != nil {
			return err
		}
		all := append(slices.Clip(b.rejections), s.rejections...)
		if err := insertRejections(ctx, tx, all, b.now); err != nil {
			return err
		}
		res = BatchResult{Stored: len(s.occurred), Charged: s.charged, Rejections: all, Occurred: s.occurred, Usages: s.usages}
		return nil
	})
	if err != nil {
		return BatchResult{}, err
	}
	return res, nil
}

type offeringInfo struct {
	provider string
	ask      int64
}

type priceRow struct {
	from        time.Time
	input, outp int64
}

// pricedEvent is a candidate the database's catalog and price book accept, with its price.
type pricedEvent struct {
	c                 *candidate
	price             priceRow
	ask               int64
	charge, payable   money.Pico
	account, provider string
}

// storeResult is what store wrote.
type storeResult struct {
	occurred   []time.Time // of the events stored
	usages     []Usage     // of the events stored, in the order of occurred
	charged    money.Pico
	rejections []StoredRejection
}

// store writes the candidates' usage rows and rollups and the ledger postings of those that
// were new. With assumeNew, a candidate already stored fails the whole statement.
func (m *Meter) store(ctx context.Context, tx pgx.Tx, cands []candidate, now time.Time, assumeNew bool) (storeResult, error) {
	var out storeResult
	if len(cands) == 0 {
		return out, nil
	}
	refs, err := loadReferences(ctx, tx, cands)
	if err != nil {
		return out, err
	}
	priced := make([]pricedEvent, 0, len(cands))
	for i := range cands {
		c := &cands[i]
		reject := func(reason RejectReason, detail string) {
			out.rejections = append(out.rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: reason, Detail: detail})
		}
		off, ok := refs.offerings[c.ev.Data.OfferingID]
		if !ok {
			reject(RejectUnknownOffering, "no offering "+c.ev.Data.OfferingID)
			continue
		}
		if !refs.accounts[c.claims.AccountID] {
			reject(RejectTicketInvalid, "the ticket names no account the platform holds: "+c.claims.AccountID)
			continue
		}
		if off.provider != c.providerID {
			reject(RejectForeign, fmt.Sprintf("provider %s reported for offering %s of provider %s", c.providerID, c.ev.Data.OfferingID, off.provider))
			continue
		}
		p, ok := priceAt(refs.prices[c.claims.Tier], c.ev.Time)
		if !ok {
			reject(RejectNoPrice, fmt.Sprintf("no %s price in force at %s", c.claims.Tier, c.ev.Time.Format(time.RFC3339)))
			continue
		}
		pe, err := price(c.ev.Data, c.claims.Kind, p, off.ask)
		if err != nil {
			reject(RejectSchema, err.Error())
			continue
		}
		pe.c, pe.price, pe.ask, pe.account, pe.provider = c, p, off.ask, c.claims.AccountID, off.provider
		priced = append(priced, pe)
	}
	if len(priced) == 0 {
		return out, nil
	}

	var isNew map[string]bool // nil: every one is new
	var redelivered map[string]bool
	if assumeNew {
		copied, err := copyNewUsage(ctx, tx, priced, now)
		if err != nil {
			return out, err
		}
		if !copied {
			if _, err := tx.Exec(ctx, insertNewUsage, usageArrays(priced, now)...); err != nil {
				return out, err
			}
		}
	} else {
		rows, err := tx.Query(ctx, insertUsageOnce, usageArrays(priced, now)...)
		if err != nil {
			return out, err
		}
		newIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return out, err
		}
		isNew = make(map[string]bool, len(newIDs))
		for _, id := range newIDs {
			isNew[id] = true
		}
		if redelivered, err = redeliveries(ctx, tx, priced, isNew); err != nil {
			return out, err
		}
	}
	stored := make([]*pricedEvent, 0, len(priced))
	out.occurred = make([]time.Time, 0, len(priced))
	out.usages = make([]Usage, 0, len(priced))
	for i := range priced {
		pe := &priced[i]
		if isNew != nil && !isNew[pe.c.ev.ID] {
			if redelivered[pe.c.ev.ID] {
				// The same message again (a crash or a lost ack after its commit): it is
				// stored, so it is acknowledged and is no duplicate to review.
				continue
			}
			out.rejections = append(out.rejections, StoredRejection{Message: pe.c.msg, EventID: pe.c.ev.ID, Reason: RejectDuplicate,
				Detail: "event " + pe.c.ev.ID + " or request " + pe.c.ev.Data.RequestID + " is already metered"})
			continue
		}
		stored = append(stored, pe)
		out.occurred = append(out.occurred, pe.c.ev.Time)
		out.usages = append(out.usages, pe.c.ev.Data)
	}
	if len(stored) == 0 {
		return out, nil
	}
	if out.charged, err = m.post(ctx, tx, stored, now); err != nil {
		return out, err
	}
	return out, nil
}

// The statements that write a batch's usage rows, given as one array per column ($23 is the
// metering time), and add them to the hourly rollups, in one round trip. The rows go in in
// the order of the arrays, which usageArrays sorts by event id, so that meters racing on the
// same events take the unique indexes' locks in one order; rollup rows are upserted in key
// order for the same reason.
var (
	// insertNewUsage takes every row for new: one already stored fails it.
	insertNewUsage = `WITH ` + usageIncoming + `, inserted AS (` + usageInsert + `), ` + usageRollup("incoming") + `, ` +
		keySpend("incoming") + `
		SELECT 1`
	// insertUsageOnce skips every event whose event id or request id is already stored, rolls
	// up the rows it inserted, and returns their event ids.
	insertUsageOnce = `WITH ` + usageIncoming + `, inserted AS (` + usageInsert + `
			ON CONFLICT DO NOTHING
			RETURNING event_id, occurred_at, account_id, api_key_id, offering_id, tier, model, provider_account_id,
				input_tokens, output_tokens, charge_pico, payable_pico, energy_j), ` + usageRollup("inserted") + `, ` +
		keySpend("inserted") + `
		SELECT event_id FROM inserted`
)

const (
	usageIncoming = `incoming AS (
		SELECT event_id, request_id, account_id::uuid, api_key_id, offering_id::uuid, provider_account_id::uuid,
			tier, model, input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_price, charge_pico, payable_pico, occurred_at, stream_seq, n
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::bigint[], $10::bigint[], $11::float8[], $12::float8[], $13::float8[], $14::text[],
			$15::text[], $16::bigint[], $17::bigint[], $18::bigint[], $19::bigint[], $20::bigint[],
			$21::timestamptz[], $22::bigint[])
			WITH ORDINALITY AS u (event_id, request_id, account_id, api_key_id, offering_id, provider_account_id,
				tier, model, input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
				input_price, output_price, ask_price, charge_pico, payable_pico, occurred_at, stream_seq, n))`
	usageInsert = `
		INSERT INTO usage_events (event_id, request_id, account_id, api_key_id, offering_id, provider_account_id,
			tier, model, input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
		SELECT event_id, request_id, account_id, api_key_id, offering_id, provider_account_id,
			tier, model, input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_price, charge_pico, payable_pico, occurred_at, $23, stream_seq
		FROM incoming ORDER BY n`
)

// usageRollup adds the usage rows of the CTE named rows to the hourly rollups.
func usageRollup(rows string) string {
	return `rollup AS (
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, provider_account_id,
			requests, input_tokens, output_tokens, charge_pico, payable_pico, energy_j)
		SELECT date_trunc('hour', occurred_at), account_id, offering_id, tier, model, provider_account_id,
			count(*), sum(input_tokens), sum(output_tokens), sum(charge_pico), sum(payable_pico), sum(energy_j)
		FROM ` + rows + `
		GROUP BY 1, 2, 3, 4, 5, 6
		ORDER BY 1, 2, 3, 4, 5
		` + addToRollup + `)`
}

// addToRollup adds the incoming sums to a usage_hourly row that is there already.
const addToRollup = `ON CONFLICT (hour, account_id, offering_id, tier, model) DO UPDATE SET
	requests = usage_hourly.requests + EXCLUDED.requests,
	input_tokens = usage_hourly.input_tokens + EXCLUDED.input_tokens,
	output_tokens = usage_hourly.output_tokens + EXCLUDED.output_tokens,
	charge_pico = usage_hourly.charge_pico + EXCLUDED.charge_pico,
	payable_pico = usage_hourly.payable_pico + EXCLUDED.payable_pico,
	energy_j = usage_hourly.energy_j + EXCLUDED.energy_j`

// keySpend adds the usage rows of the CTE named rows to their API keys' monthly spend.
func keySpend(rows string) string {
	return `spend AS (
		INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico)
		SELECT api_key_id, date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', count(*), sum(charge_pico)
		FROM ` + rows + `
		WHERE api_key_id <> ''
		GROUP BY 1, 2
		ORDER BY 1, 2
		` + addToKeySpend + `)`
}

// addToKeySpend adds the incoming sums to an api_key_spend row that is there already.
const addToKeySpend = `ON CONFLICT (api_key_id, month) DO UPDATE SET
	requests = api_key_spend.requests + EXCLUDED.requests,
	charge_pico = api_key_spend.charge_pico + EXCLUDED.charge_pico`

// usageArrays are the arguments of the usage statements: the priced events' columns in event id order, and
// the metering time.
func usageArrays(priced []pricedEvent, now time.Time) []any {
	order := byEventID(priced)
	n := len(priced)
	var (
		eventID, requestID, accountID, apiKeyID = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		offeringID, providerID, tier, model     = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		energySource, status                    = make([]string, n), make([]string, n)
		inputTokens, outputTokens               = make([]int64, n), make([]int64, n)
		ttft, duration, energy                  = make([]float64, n), make([]float64, n), make([]float64, n)
		inputPrice, outputPrice, askPrice       = make([]int64, n), make([]int64, n), make([]int64, n)
		charge, payable, seq                    = make([]int64, n), make([]int64, n), make([]int64, n)
		occurred                                = make([]time.Time, n)
	)
	for i, j := range order {
		pe := &priced[j]
		c, u := pe.c, &pe.c.ev.Data
		eventID[i], requestID[i], accountID[i], apiKeyID[i] = c.ev.ID, u.RequestID, c.claims.AccountID, c.claims.APIKeyID
		offeringID[i], providerID[i], tier[i], model[i] = u.OfferingID, pe.provider, c.claims.Tier, u.Model
		inputTokens[i], outputTokens[i] = u.InputTokens, u.OutputTokens
		ttft[i], duration[i], energy[i] = u.TTFTMillis, u.DurationMillis, u.EnergyJoules
		energySource[i], status[i] = string(u.EnergySource), string(u.Status)
		inputPrice[i], outputPrice[i], askPrice[i] = pe.price.input, pe.price.outp, pe.ask
		charge[i], payable[i] = int64(pe.charge), int64(pe.payable)
		occurred[i], seq[i] = c.ev.Time, int64(c.msg.Seq)
	}
	return []any{eventID, requestID, accountID, apiKeyID, offeringID, providerID, tier, model, inputTokens,
		outputTokens, ttft, duration, energy, energySource, status, inputPrice, outputPrice, askPrice, charge,
		payable, occurred, seq, now}
}

// price computes what a request costs its customer and earns its provider. A generation
// that produced no completion token is charged nothing (FIELD-CASES 20); an embedding, which
// never produces one, is charged for its input, as the ticket the gateway signed says it is.
func price(u Usage, kind ticket.Kind, p priceRow, ask int64) (pricedEvent, error) {
	if kind == ticket.KindEmbedding {
		if u.Status != StatusOK {
			return pricedEvent{}, nil
		}
		u.OutputTokens = 0
	} else if u.OutputTokens == 0 {
		return pricedEvent{}, nil
	}
	in, err := money.ChargeFor(u.InputTokens, money.MicroUSD(p.input))
	if err != nil {
		return pricedEvent{}, err
	}
	out, err := money.ChargeFor(u.OutputTokens, money.MicroUSD(p.outp))
	if err != nil {
		return pricedEvent{}, err
	}
	charge, err := in.Add(out)
	if err != nil {
		return pricedEvent{}, err
	}
	payable, err := money.ChargeFor(u.InputTokens+u.OutputTokens, money.MicroUSD(ask))
	if err != nil {
		return pricedEvent{}, err
	}
	return pricedEvent{charge: charge, payable: payable}, nil
}

// post writes one ledger transaction per customer account: its credit down by its charges,
// each provider's payable up by its asks, platform revenue the difference.
func (m *Meter) post(ctx context.Context, tx pgx.Tx, stored []*pricedEvent, now time.Time) (money.Pico, error) {
	type sums struct {
		charge    money.Pico
		providers map[string]money.Pico
		requests  int
	}
	byAccount := map[string]*sums{}
	var total money.Pico
	for _, pe := range stored {
		if pe.charge == 0 && pe.payable == 0 {
			continue
		}
		s := byAccount[pe.account]
		if s == nil {
			s = &sums{providers: map[string]money.Pico{}}
			byAccount[pe.account] = s
		}
		var err error
		if s.charge, err = s.charge.Add(pe.charge); err != nil {
			return 0, err
		}
		if s.providers[pe.provider], err = s.providers[pe.provider].Add(pe.payable); err != nil {
			return 0, err
		}
		if total, err = total.Add(pe.charge); err != nil {
			return 0, err
		}
		s.requests++
	}
	if len(byAccount) == 0 {
		return 0, nil
	}
	revenue, err := m.ledgerAccount(ctx, billing.AccountPlatformRevenue, "")
	if err != nil {
		return 0, err
	}
	accounts := sortedKeys(byAccount)
	var txns []billing.TransactionInput
	lock := []billing.LedgerAccountID{revenue}
	for _, acc := range accounts {
		s := byAccount[acc]
		customer, err := m.ledgerAccount(ctx, billing.AccountCustomerCredit, acc)
		if err != nil {
			return 0, err
		}
		postings := []billing.Posting{{Account: customer, Amount: -s.charge}}
		lock = append(lock, customer)
		margin := s.charge
		for _, prov := range sortedKeys(s.providers) {
			payable, err := m.ledgerAccount(ctx, billing.AccountProviderPayable, prov)
			if err != nil {
				return 0, err
			}
			postings = append(postings, billing.Posting{Account: payable, Amount: s.providers[prov]})
			lock = append(lock, payable)
			margin -= s.providers[prov]
		}
		postings = append(postings, billing.Posting{Account: revenue, Amount: margin})
		txns = append(txns, billing.TransactionInput{
			Kind: billing.TransactionUsage, OccurredAt: now,
			Memo:     "Usage: " + strconv.Itoa(s.requests) + " requests",
			Postings: postings,
		})
	}
	if err := m.cfg.Ledger.LockTx(ctx, tx, lock); err != nil {
		return 0, err
	}
	for _, in := range txns {
		if _, _, err := m.cfg.Ledger.PostTx(ctx, tx, in); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// resolveLedgers looks up the ledger accounts a batch's events may post to before its
// transaction takes a connection, so that posting finds them remembered. Looked up from
// inside the transaction, on a connection of their own, they could leave the committers
// holding every connection of the pool, each waiting for one more. An id that names no
// organisation is left for the checks in the transaction to refuse.
func (m *Meter) resolveLedgers(ctx context.Context, cands []candidate) error {
	if len(cands) == 0 {
		return nil
	}
	need := map[ledgerKey]bool{{billing.AccountPlatformRevenue, ""}: true}
	for i := range cands {
		need[ledgerKey{billing.AccountCustomerCredit, cands[i].claims.AccountID}] = true
		need[ledgerKey{billing.AccountProviderPayable, cands[i].providerID}] = true
	}
	for k := range need {
		_, err := m.ledgerAccount(ctx, k.kind, k.owner)
		if code := services.ErrorCode(err); err != nil && code != services.CodeNotFound && code != services.CodeInvalid {
			return err
		}
	}
	return nil
}

// ledgerAccount resolves a ledger account once and remembers it: ledger accounts never change
// owner or kind. It runs outside the batch's transaction (AccountFor takes its own
// connection), which is safe because creating an account is idempotent.
func (m *Meter) ledgerAccount(ctx context.Context, kind billing.AccountKind, owner string) (billing.LedgerAccountID, error) {
	k := ledgerKey{kind, owner}
	m.mu.Lock()
	id, ok := m.ledgers[k]
	m.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := m.cfg.Ledger.AccountFor(ctx, kind, owner)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.ledgers[k] = id
	m.mu.Unlock()
	return id, nil
}

// references are the catalog rows and the price book a batch is judged against, read inside
// its transaction so that the batch prices with one consistent view.
type references struct {
	offerings map[string]offeringInfo
	accounts  map[string]bool
	prices    map[string][]priceRow // by tier, oldest first
}

// canonicalUUIDs is the uuid[] of the elements of the text[] parameter $1 written as the
// database writes a uuid, lower-case and canonical; no other id can match a row, and casting
// one could abort the batch's transaction.
const canonicalUUIDs = `ARRAY(SELECT id::uuid FROM unnest($1::text[]) AS id
	WHERE id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')`

// loadReferences reads, in one round trip, the batch's offerings and customer accounts and
// the whole price book (a few rows per tier).
func loadReferences(ctx context.Context, tx pgx.Tx, cands []candidate) (references, error) {
	refs := references{offerings: map[string]offeringInfo{}, accounts: map[string]bool{}, prices: map[string][]priceRow{}}
	var offeringIDs, accountIDs []string
	seenOffering, seenAccount := map[string]bool{}, map[string]bool{}
	for i := range cands {
		if id := cands[i].ev.Data.OfferingID; !seenOffering[id] {
			seenOffering[id] = true
			offeringIDs = append(offeringIDs, id)
		}
		if id := cands[i].claims.AccountID; !seenAccount[id] {
			seenAccount[id] = true
			accountIDs = append(accountIDs, id)
		}
	}
	b := &pgx.Batch{}
	// The offering's blended ask (catalog.Offering.BlendedAsk), which an ask of both kinds of token at once was.
	b.Queue(`SELECT id::text, provider_account_id::text,
			(ask_input_micro_usd_per_mtok + ask_output_micro_usd_per_mtok + 1) / 2 FROM offerings
		WHERE id = ANY (`+canonicalUUIDs+`)`, offeringIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var o offeringInfo
			if err := rows.Scan(&id, &o.provider, &o.ask); err != nil {
				return err
			}
			refs.offerings[id] = o
		}
		return rows.Err()
	})
	b.Queue(`SELECT id::text FROM accounts WHERE id = ANY (`+canonicalUUIDs+`)`, accountIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			refs.accounts[id] = true
		}
		return rows.Err()
	})
	b.Queue(`SELECT tier, effective_from, input_micro_usd_per_mtok, output_micro_usd_per_mtok
		FROM prices ORDER BY tier, effective_from`).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var tier string
			var p priceRow
			if err := rows.Scan(&tier, &p.from, &p.input, &p.outp); err != nil {
				return err
			}
			refs.prices[tier] = append(refs.prices[tier], p)
		}
		return rows.Err()
	})
	return refs, tx.SendBatch(ctx, b).Close()
}

// priceAt is the latest price effective at or before t (FIELD-CASES 16).
func priceAt(book []priceRow, t time.Time) (priceRow, bool) {
	i := sort.Search(len(book), func(i int) bool { return book[i].from.After(t) })
	if i == 0 {
		return priceRow{}, false
	}
	return book[i-1], true
}

func insertRejections(ctx context.Context, tx pgx.Tx, rs []StoredRejection, now time.Time) error {
	if len(rs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range rs {
		b.Queue(`INSERT INTO usage_rejections (stream_seq, subject, event_id, reason, detail, raw, received_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (stream_seq, raw_sha256) DO NOTHING`,
			int64(r.Seq), r.Subject, r.EventID, string(r.Reason), truncate(r.Detail, 1000), r.Data, now)
	}
	return tx.SendBatch(ctx, b).Close()
}

// publishRejections copies refused events to the dead-letter subject, best effort: the
// rejections table, written in the batch's transaction, is the record.
func (m *Meter) publishRejections(rs []StoredRejection) {
	if m.cfg.JS == nil {
		return
	}
	for _, r := range rs {
		msg := natsMsg(RejectedSubject+"."+string(r.Reason), r.Data, r.Seq, r.Subject, r.Detail)
		if _, err := m.cfg.JS.PublishMsgAsync(msg); err != nil {
			m.cfg.Log.Warn("meter: dead-letter publish", "err", err)
			return
		}
	}
}

func natsMsg(subject string, data []byte, seq uint64, origSubject, detail string) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set("Gpumarket-Stream-Seq", strconv.FormatUint(seq, 10))
	msg.Header.Set("Gpumarket-Subject", origSubject)
	msg.Header.Set("Gpumarket-Reason", truncate(detail, 500))
	return msg
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
