package metering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	// BatchSize is the most events written in one database transaction.
	BatchSize int
	// Linger is how long a batch waits to fill after its first event.
	Linger  time.Duration
	Now     func() time.Time
	Log     *slog.Logger
	Metrics *Metrics
}

// Meter consumes the usage stream.
type Meter struct {
	cfg     MeterConfig
	ledgers map[ledgerKey]billing.LedgerAccountID
}

type ledgerKey struct {
	kind  billing.AccountKind
	owner string
}

// NewMeter returns a meter; Run starts it.
func NewMeter(cfg MeterConfig) *Meter {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 2000
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
	for {
		batch, err := m.collect(ctx, it)
		if len(batch) > 0 {
			m.commitWithRetry(ctx, batch)
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			m.cfg.Log.Warn("meter: consume", "err", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// collect waits for a first event, then gathers more for up to Linger or BatchSize.
func (m *Meter) collect(ctx context.Context, it jetstream.MessagesContext) ([]jetstream.Msg, error) {
	var batch []jetstream.Msg
	first, err := it.Next()
	if err != nil {
		return nil, err
	}
	batch = append(batch, first)
	deadline := time.Now().Add(m.cfg.Linger)
	for len(batch) < m.cfg.BatchSize {
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

func (m *Meter) commitWithRetry(ctx context.Context, batch []jetstream.Msg) {
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		res, err := m.Process(ctx, batch)
		if isDataError(err) && len(batch) > 1 {
			// Some event breaks a database rule the checks did not foresee. Meter the
			// events one by one so that the others are not held back by it.
			m.cfg.Log.Error("meter: batch refused by the database; metering its events one by one", "err", err)
			for _, msg := range batch {
				m.commitWithRetry(ctx, []jetstream.Msg{msg})
			}
			return
		}
		if isDataError(err) {
			err = m.rejectAlone(ctx, batch[0], err)
			if err == nil {
				_ = batch[0].Ack()
				return
			}
		}
		if err == nil {
			m.cfg.Metrics.observe(res, time.Since(start))
			m.publishRejections(res.Rejections)
			for _, msg := range batch {
				_ = msg.Ack()
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		m.cfg.Log.Error("meter: batch not committed; retrying", "events", len(batch), "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

// isDataError is true for a database refusal that retrying cannot cure: a data exception or
// an integrity violation (SQLSTATE classes 22 and 23).
func isDataError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
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
	msgs := make([]Message, 0, len(batch))
	for _, b := range batch {
		meta, err := b.Metadata()
		if err != nil {
			return BatchResult{}, fmt.Errorf("metering: message metadata: %w", err)
		}
		msgs = append(msgs, Message{Seq: meta.Sequence.Stream, Subject: b.Subject(), Data: b.Data()})
	}
	return m.ProcessMessages(ctx, msgs)
}

// candidate is an event that passed the checks that need no database.
type candidate struct {
	msg        Message
	ev         UsageEvent
	claims     ticket.Claims
	providerID string
}

// ProcessMessages is Process on messages already read off the stream.
func (m *Meter) ProcessMessages(ctx context.Context, msgs []Message) (BatchResult, error) {
	now := m.cfg.Now()
	var res BatchResult
	rejectMsg := func(msg Message, eventID string, err error) {
		reason := ReasonOf(err)
		if reason == "" {
			reason = RejectMalformed
		}
		res.Rejections = append(res.Rejections, StoredRejection{Message: msg, EventID: eventID, Reason: reason, Detail: err.Error()})
	}

	// Checks that need no database; duplicates inside the batch, first wins.
	seenEvent, seenRequest := map[string]bool{}, map[string]bool{}
	var cands []candidate
	for _, msg := range msgs {
		ev, err := Decode(msg.Data)
		if err != nil {
			rejectMsg(msg, "", err)
			continue
		}
		if err := Validate(ev, msg.Subject, now); err != nil {
			rejectMsg(msg, ev.ID, err)
			continue
		}
		claims, err := VerifyTicket(ev, m.cfg.Tickets, now, MaxEventAge+24*time.Hour)
		if err != nil {
			rejectMsg(msg, ev.ID, err)
			continue
		}
		if seenEvent[ev.ID] || seenRequest[ev.Data.RequestID] {
			rejectMsg(msg, ev.ID, reject(RejectDuplicate, "event %s or request %s earlier in the same batch", ev.ID, ev.Data.RequestID))
			continue
		}
		seenEvent[ev.ID], seenRequest[ev.Data.RequestID] = true, true
		providerID, _, _ := ParseSubject(msg.Subject)
		cands = append(cands, candidate{msg: msg, ev: ev, claims: claims, providerID: providerID})
	}

	err := pgx.BeginFunc(ctx, m.cfg.Pool, func(tx pgx.Tx) error {
		stored, charged, dbRejections, err := m.store(ctx, tx, cands, now)
		if err != nil {
			return err
		}
		all := append(res.Rejections, dbRejections...)
		if err := insertRejections(ctx, tx, all, now); err != nil {
			return err
		}
		res.Stored, res.Charged, res.Rejections = stored, charged, all
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

// store writes the candidates' usage rows and the ledger postings of those that were new.
func (m *Meter) store(ctx context.Context, tx pgx.Tx, cands []candidate, now time.Time) (int, money.Pico, []StoredRejection, error) {
	var rejections []StoredRejection
	if len(cands) == 0 {
		return 0, 0, nil, nil
	}
	offerings, err := loadOfferings(ctx, tx, cands)
	if err != nil {
		return 0, 0, nil, err
	}
	prices, err := loadPrices(ctx, tx)
	if err != nil {
		return 0, 0, nil, err
	}
	known, err := loadAccounts(ctx, tx, cands)
	if err != nil {
		return 0, 0, nil, err
	}

	rows := make([][]any, 0, len(cands))
	priced := make(map[string]pricedEvent, len(cands))
	for _, c := range cands {
		off, ok := offerings[c.ev.Data.OfferingID]
		if !ok {
			rejections = append(rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: RejectUnknownOffering,
				Detail: "no offering " + c.ev.Data.OfferingID})
			continue
		}
		if !known[c.claims.AccountID] {
			rejections = append(rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: RejectTicketInvalid,
				Detail: "the ticket names no account the platform holds: " + c.claims.AccountID})
			continue
		}
		if off.provider != c.providerID {
			rejections = append(rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: RejectForeign,
				Detail: fmt.Sprintf("provider %s reported for offering %s of provider %s", c.providerID, c.ev.Data.OfferingID, off.provider)})
			continue
		}
		p, ok := priceAt(prices[c.claims.Tier], c.ev.Time)
		if !ok {
			rejections = append(rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: RejectNoPrice,
				Detail: fmt.Sprintf("no %s price in force at %s", c.claims.Tier, c.ev.Time.Format(time.RFC3339))})
			continue
		}
		pe, err := price(c.ev.Data, p, off.ask)
		if err != nil {
			rejections = append(rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: RejectSchema, Detail: err.Error()})
			continue
		}
		pe.account, pe.provider = c.claims.AccountID, off.provider
		priced[c.ev.ID] = pe
		u := c.ev.Data
		rows = append(rows, []any{c.ev.ID, u.RequestID, c.claims.AccountID, c.claims.APIKeyID, u.OfferingID, off.provider,
			c.claims.Tier, u.Model, u.InputTokens, u.OutputTokens, u.TTFTMillis, u.DurationMillis, u.EnergyJoules,
			string(u.EnergySource), string(u.Status), p.input, p.outp, off.ask, int64(pe.charge), int64(pe.payable),
			c.ev.Time, now, int64(c.msg.Seq)})
	}
	if len(rows) == 0 {
		return 0, 0, rejections, nil
	}

	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE usage_incoming (LIKE usage_events INCLUDING DEFAULTS) ON COMMIT DROP`); err != nil {
		return 0, 0, nil, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"usage_incoming"}, usageColumns, pgx.CopyFromRows(rows)); err != nil {
		return 0, 0, nil, err
	}
	inserted, err := tx.Query(ctx, `
		INSERT INTO usage_events SELECT * FROM usage_incoming ORDER BY event_id
		ON CONFLICT DO NOTHING RETURNING event_id`)
	if err != nil {
		return 0, 0, nil, err
	}
	newIDs, err := pgx.CollectRows(inserted, pgx.RowTo[string])
	if err != nil {
		return 0, 0, nil, err
	}
	isNew := make(map[string]bool, len(newIDs))
	for _, id := range newIDs {
		isNew[id] = true
	}
	for _, c := range cands {
		if _, ok := priced[c.ev.ID]; ok && !isNew[c.ev.ID] {
			rejections = append(rejections, StoredRejection{Message: c.msg, EventID: c.ev.ID, Reason: RejectDuplicate,
				Detail: "event " + c.ev.ID + " or request " + c.ev.Data.RequestID + " is already metered"})
		}
	}
	if len(newIDs) == 0 {
		return 0, 0, rejections, nil
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, provider_account_id,
			requests, input_tokens, output_tokens, charge_pico, payable_pico, energy_j)
		SELECT date_trunc('hour', occurred_at), account_id, offering_id, tier, model, provider_account_id,
			count(*), sum(input_tokens), sum(output_tokens), sum(charge_pico), sum(payable_pico), sum(energy_j)
		FROM usage_incoming WHERE event_id = ANY ($1)
		GROUP BY 1, 2, 3, 4, 5, 6
		ORDER BY 1, 2, 3, 4, 5
		ON CONFLICT (hour, account_id, offering_id, tier, model) DO UPDATE SET
			requests = usage_hourly.requests + EXCLUDED.requests,
			input_tokens = usage_hourly.input_tokens + EXCLUDED.input_tokens,
			output_tokens = usage_hourly.output_tokens + EXCLUDED.output_tokens,
			charge_pico = usage_hourly.charge_pico + EXCLUDED.charge_pico,
			payable_pico = usage_hourly.payable_pico + EXCLUDED.payable_pico,
			energy_j = usage_hourly.energy_j + EXCLUDED.energy_j`, newIDs); err != nil {
		return 0, 0, nil, err
	}
	charged, err := m.post(ctx, tx, newIDs, priced, now)
	if err != nil {
		return 0, 0, nil, err
	}
	return len(newIDs), charged, rejections, nil
}

var usageColumns = []string{"event_id", "request_id", "account_id", "api_key_id", "offering_id", "provider_account_id",
	"tier", "model", "input_tokens", "output_tokens", "ttft_ms", "duration_ms", "energy_j", "energy_source", "status",
	"input_price", "output_price", "ask_price", "charge_pico", "payable_pico", "occurred_at", "metered_at", "stream_seq"}

type pricedEvent struct {
	charge, payable   money.Pico
	account, provider string
}

// price computes what a request costs its customer and earns its provider. No completion
// token, no charge (FIELD-CASES 20).
func price(u Usage, p priceRow, ask int64) (pricedEvent, error) {
	if u.OutputTokens == 0 {
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
func (m *Meter) post(ctx context.Context, tx pgx.Tx, newIDs []string, priced map[string]pricedEvent, now time.Time) (money.Pico, error) {
	type sums struct {
		charge    money.Pico
		providers map[string]money.Pico
		requests  int
	}
	byAccount := map[string]*sums{}
	var total money.Pico
	for _, id := range newIDs {
		pe := priced[id]
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

// ledgerAccount resolves a ledger account once and remembers it: ledger accounts never change
// owner or kind. It runs outside the batch's transaction (AccountFor takes its own
// connection), which is safe because creating an account is idempotent.
func (m *Meter) ledgerAccount(ctx context.Context, kind billing.AccountKind, owner string) (billing.LedgerAccountID, error) {
	k := ledgerKey{kind, owner}
	if id, ok := m.ledgers[k]; ok {
		return id, nil
	}
	id, err := m.cfg.Ledger.AccountFor(ctx, kind, owner)
	if err != nil {
		return "", err
	}
	m.ledgers[k] = id
	return id, nil
}

func loadOfferings(ctx context.Context, tx pgx.Tx, cands []candidate) (map[string]offeringInfo, error) {
	ids := make([]string, 0, len(cands))
	seen := map[string]bool{}
	for _, c := range cands {
		if id := c.ev.Data.OfferingID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	rows, err := tx.Query(ctx, `SELECT id::text, provider_account_id::text, ask_micro_usd_per_mtok
		FROM offerings WHERE id::text = ANY ($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]offeringInfo{}
	for rows.Next() {
		var id string
		var o offeringInfo
		if err := rows.Scan(&id, &o.provider, &o.ask); err != nil {
			return nil, err
		}
		out[id] = o
	}
	return out, rows.Err()
}

func loadAccounts(ctx context.Context, tx pgx.Tx, cands []candidate) (map[string]bool, error) {
	var ids []string
	for _, c := range cands {
		ids = append(ids, c.claims.AccountID)
	}
	rows, err := tx.Query(ctx, `SELECT id::text FROM accounts WHERE id::text = ANY ($1)`, ids)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// loadPrices reads the whole price book (a few rows per tier) inside the batch's transaction,
// so that a batch prices with one consistent book.
func loadPrices(ctx context.Context, tx pgx.Tx) (map[string][]priceRow, error) {
	rows, err := tx.Query(ctx, `SELECT tier, effective_from, input_micro_usd_per_mtok, output_micro_usd_per_mtok
		FROM prices ORDER BY tier, effective_from`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]priceRow{}
	for rows.Next() {
		var tier string
		var p priceRow
		if err := rows.Scan(&tier, &p.from, &p.input, &p.outp); err != nil {
			return nil, err
		}
		out[tier] = append(out[tier], p)
	}
	return out, rows.Err()
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
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (stream_seq) DO NOTHING`,
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
