package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
)

// The scheduler runs admitted batches: it checks each new batch's lines and admits it, sends its
// lines through the gateway a few at a time, retries a line whose rigs failed, and writes the
// output and error files when the batch completes, is cancelled or expires. Its state is in
// PostgreSQL only, so any number of schedulers may run on one database and one that stops loses
// nothing (docs/batches.md, "Lines").

// Call is one line sent to the gateway with its batch owner's API key, at the batch tier.
type Call struct {
	AccountID, APIKeyID string
	URL                 string // the endpoint's path
	Body                []byte
	// RequestIDPrefix names this attempt of this line: the gateway's request ids for it are this
	// prefix and the candidate's index, so a stopped worker's attempt can be found in the usage rows.
	RequestIDPrefix string
}

// Answer is what the gateway answered.
type Answer struct {
	StatusCode int
	Body       []byte
	RequestID  string // "" when no rig was reached
}

// Gateway sends a line the way the /v1 endpoints send an interactive request.
type Gateway interface {
	Send(ctx context.Context, c Call) (Answer, error)
}

// Defaults of SchedulerConfig.
const (
	DefaultConcurrency = 4
	DefaultMaxAttempts = 3
	DefaultRetryAfter  = 2 * time.Second
	DefaultPollEvery   = time.Second
	// DefaultLease is how long a line's claim holds without being renewed: its holder renews the
	// claims of the lines it holds every Lease/3 while it works on them, however long a rig takes,
	// so a claim not renewed for a whole lease is a holder gone (killed, cut off from PostgreSQL),
	// and another scheduler takes its lines back within a minute (docs/batches.md, "Lines").
	DefaultLease = 45 * time.Second
	// MeterWait is how long a line taken back waits, since its holder's last renewal, for the
	// usage row of an attempt the gateway recorded as answered: the meter stores it within seconds
	// unless it is behind, and re-running the line before would charge it twice.
	MeterWait = 15 * time.Minute
)

// SchedulerConfig builds a Scheduler.
type SchedulerConfig struct {
	Service *Service
	Gateway Gateway
	// Offered says whether the catalog offers a model; Prices is the price book, in which a line's
	// model has its batch price (its own, else the batch tier's default); Balance is an account's
	// prepaid balance.
	Offered func(model string) bool
	// Ready says whether Offered knows the catalog yet: no batch is checked before, so that none
	// fails for models not loaded. Nil means always.
	Ready   func(ctx context.Context) error
	Prices  func(ctx context.Context) (catalog.PriceBook, error)
	Balance func(ctx context.Context, accountID string) (money.BigPico, error)
	// Concurrency is how many lines are in flight at once, across all batches: the share of
	// capacity batch lines may take. Zero means DefaultConcurrency.
	Concurrency int
	MaxAttempts int           // tries of a line whose rigs failed; zero means DefaultMaxAttempts
	RetryAfter  time.Duration // wait before a retry, times the attempts so far
	PollEvery   time.Duration
	Lease       time.Duration // zero means DefaultLease
	Log         *slog.Logger
}

// heldKey is a line's attempt that this scheduler holds.
type heldKey struct {
	batchID        string
	line, attempts int
}

// Scheduler is the background worker; Start it, Close it.
type Scheduler struct {
	cfg    SchedulerConfig
	svc    *Service
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup // the housekeeper, the claimer and the workers
	done   chan struct{}  // closed when the recorder has written every outcome
	kick   chan struct{}  // a batch was admitted: claim at once
	freed  chan struct{}  // a worker took a claimed line: there is room to claim another
	// The claimer hands claimed lines to the workers through lines, and the workers hand their
	// outcomes to the recorder through outcomes (docs/batches.md, "Lines").
	lines    chan claimed
	outcomes chan outcome
	// held is every line claimed and not yet recorded; their claims are renewed every Lease/3.
	mu        sync.Mutex
	held      map[heldKey]struct{}
	renewedAt time.Time
	// inHand counts the lines handed to the workers and not yet answered, in all and by account:
	// the claimer claims only for idle workers, and for the account with the fewest lines in hand
	// (docs/batches.md, "Fair shares").
	inHand     int
	inHandBy   map[string]int
	servedAt   map[string]uint64 // account → the claim round it was last given a line in
	claimRound uint64
}

// NewScheduler builds a scheduler.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Scheduler{cfg: cfg, svc: cfg.Service, log: cfg.Log, kick: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		held: map[heldKey]struct{}{}, inHandBy: map[string]int{}, servedAt: map[string]uint64{}}
}

// Start runs the scheduler until ctx ends or Close is called.
func (s *Scheduler) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.lines = make(chan claimed, s.cfg.Concurrency)
	s.outcomes = make(chan outcome, 2*s.cfg.Concurrency)
	s.done = make(chan struct{})
	s.wg.Add(2 + s.cfg.Concurrency)
	go func() {
		defer s.wg.Done()
		s.housekeep(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.claimLoop(ctx)
	}()
	for range s.cfg.Concurrency {
		go func() {
			defer s.wg.Done()
			s.work(ctx)
		}()
	}
	go func() {
		defer close(s.done)
		s.recordLoop(context.WithoutCancel(ctx))
	}()
	go func() {
		s.wg.Wait()
		close(s.outcomes)
	}()
}

// Close stops claiming lines and waits for those claimed to be answered and recorded.
func (s *Scheduler) Close() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

func (s *Scheduler) now() time.Time { return s.svc.now().UTC() }

// housekeep checks new batches, takes back lost lines, expires and finalizes batches.
func (s *Scheduler) housekeep(ctx context.Context) {
	t := time.NewTicker(s.cfg.PollEvery)
	defer t.Stop()
	for {
		s.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.svc.wake:
		}
	}
}

func (s *Scheduler) tick(ctx context.Context) {
	for {
		ok, err := s.validateOne(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("batch: checking a batch failed", "err", err)
		}
		if !ok || err != nil {
			break
		}
	}
	if err := s.renewClaims(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("batch: renewing the claims of lines in flight failed", "err", err)
	}
	if err := s.recoverLines(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("batch: taking back lost lines failed", "err", err)
	}
	if err := s.advance(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("batch: finalizing batches failed", "err", err)
	}
}

func (s *Scheduler) kickWorkers() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// validateOne checks the oldest validating batch and fails or admits it; false when there was none.
func (s *Scheduler) validateOne(ctx context.Context) (_ bool, err error) {
	defer services.Wrap(&err, "batch.validate")
	if s.cfg.Ready != nil && s.cfg.Ready(ctx) != nil {
		return false, nil
	}
	tx, err := s.svc.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	var id, accountID, fileID, endpoint string
	err = tx.QueryRow(ctx, `SELECT id, account_id::text, input_file_id, endpoint FROM batches WHERE status = 'validating'
		ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED`).Scan(&id, &accountID, &fileID, &endpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	book, err := s.cfg.Prices(ctx)
	if err != nil {
		return false, err
	}
	pricedAt := s.now()
	priceOf := func(model string) (catalog.Price, bool) { return book.At(catalog.TierBatch, model, pricedAt) }
	f, err := s.svc.store.Open(fileID)
	if err != nil {
		return false, err
	}
	c, err := checkLines(f, endpoint, s.cfg.Offered, priceOf)
	f.Close()
	if err != nil {
		return false, err
	}
	now := s.now()
	if len(c.errors) == 0 {
		bal, err := s.cfg.Balance(ctx, accountID)
		if err != nil {
			return false, err
		}
		if bal.Cmp(money.BigPicoOf(c.estimate)) < 0 {
			c.fail(0, "insufficient_quota", "", "The batch may cost up to %s at the batch price (its lines' max_tokens bound it) and the balance is %s: add credit or set lower max_tokens.",
				c.estimate, bal)
		}
	}
	if len(c.errors) > 0 {
		raw, err := json.Marshal(c.errors)
		if err != nil {
			return false, err
		}
		if _, err := tx.Exec(ctx, `UPDATE batches SET status = 'failed', failed_at = $2, errors = $3, estimate_pico = $4 WHERE id = $1`,
			id, now, raw, int64(c.estimate)); err != nil {
			return false, err
		}
		return true, tx.Commit(ctx)
	}
	rows := make([][]any, len(c.lines))
	for i, l := range c.lines {
		rows[i] = []any{id, l.line, l.customID, l.offset, l.length, "pending"}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"batch_lines"},
		[]string{"batch_id", "line", "custom_id", "body_offset", "body_length", "status"}, pgx.CopyFromRows(rows)); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE batches SET status = 'in_progress', in_progress_at = $2, estimate_pico = $3 WHERE id = $1`,
		id, now, int64(c.estimate)); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	s.kickWorkers()
	return true, nil
}

// claimed is a line a worker holds.
type claimed struct {
	batchID, accountID, apiKeyID, fileID, customID string
	line, attempts, length                         int
	offset                                         int64
}

func (l claimed) requestIDPrefix() string {
	return services.BatchRequestPrefix(l.batchID, l.line, l.attempts)
}

// claimBatch is the most lines one claim takes: a claim costs PostgreSQL about as much for a
// few lines as for one.
const claimBatch = 32

// claimer is the claim loop's memory: the open batches, read at most every PollEvery, and where
// in each batch's lines the next pending one may be.
type claimer struct {
	open   []claimed // the batches in progress, oldest first, as lines without a line yet
	readAt time.Time
	from   map[string]int // batch id → the line after the last one claimed
	fromAt time.Time      // when from was last forgotten
}

// claimLines takes up to n pending lines of the batches in progress, oldest batch first,
// marking them running and counting their attempt in one statement per batch: SKIP LOCKED lets
// every scheduler claim at once. The batch's status is checked in the statement itself, so a
// batch cancelled or expired since the open batches were read gives no line.
//
// Each batch's claim starts after the last line claimed, on the batch's own index: the lines
// before it are done or running, and a scan from the first line would walk past every one of them
// on each claim. A line put back for a retry lies behind that point; every PollEvery the scan
// starts from the first line again and finds it.
func (s *Scheduler) claimLines(ctx context.Context, c *claimer, n int) ([]claimed, error) {
	now := s.now()
	if c.from == nil || now.Sub(c.fromAt) >= s.cfg.PollEvery {
		c.from, c.fromAt = map[string]int{}, now
	}
	if c.open == nil || now.Sub(c.readAt) >= s.cfg.PollEvery {
		rows, err := s.svc.pool.Query(ctx, `SELECT id, account_id::text, api_key_id, input_file_id FROM batches
			WHERE status = 'in_progress' AND expires_at > $1 ORDER BY created_at, id LIMIT 100`, now)
		if err != nil {
			return nil, err
		}
		open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
			var l claimed
			return l, r.Scan(&l.batchID, &l.accountID, &l.apiKeyID, &l.fileID)
		})
		if err != nil {
			return nil, err
		}
		c.open, c.readAt = open, now
	}
	// The open batches by account, each account's oldest first, accounts in the order their
	// oldest batch came.
	var order []string
	byAccount := map[string][]claimed{}
	for _, b := range c.open {
		if _, ok := byAccount[b.accountID]; !ok {
			order = append(order, b.accountID)
		}
		byAccount[b.accountID] = append(byAccount[b.accountID], b)
	}
	var got []claimed
	gotBy := map[string]int{}
	for len(got) < n && len(order) > 0 {
		// The account with the fewest lines in hand, then the one served longest ago, then the
		// one whose batch came first. With several accounts waiting, it gets one line, and the
		// choice is made again for the next; alone, it gets all there is room for.
		s.mu.Lock()
		best := 0
		key := func(a string) (int, uint64) { return s.inHandBy[a] + gotBy[a], s.servedAt[a] }
		for i, a := range order[1:] {
			ha, sa := key(a)
			hb, sb := key(order[best])
			if ha < hb || (ha == hb && sa < sb) {
				best = i + 1
			}
		}
		s.mu.Unlock()
		a := order[best]
		want := n - len(got)
		if len(order) > 1 {
			want = 1
		}
		lines, err := s.claimAccount(ctx, c, byAccount[a], want, now)
		if err != nil {
			return got, err
		}
		if len(lines) == 0 {
			order = append(order[:best], order[best+1:]...) // nothing of it is pending now
			continue
		}
		s.mu.Lock()
		s.claimRound++
		s.servedAt[a] = s.claimRound
		s.mu.Unlock()
		gotBy[a] += len(lines)
		got = append(got, lines...)
	}
	if len(got) == 0 {
		c.open = nil // read the open batches again before the next claim
	}
	return got, nil
}

// claimAccount claims up to n pending lines of an account's batches, oldest batch first.
func (s *Scheduler) claimAccount(ctx context.Context, c *claimer, batches []claimed, n int, now time.Time) ([]claimed, error) {
	var got []claimed
	for _, b := range batches {
		for _, from := range []int{c.from[b.batchID], 0} {
			lines, err := s.claimFrom(ctx, b, from, n-len(got), now)
			if err != nil {
				return got, err
			}
			for _, l := range lines {
				c.from[b.batchID] = max(c.from[b.batchID], l.line+1)
			}
			got = append(got, lines...)
			if len(got) == n || from == 0 {
				break
			}
		}
		if len(got) == n {
			break
		}
	}
	return got, nil
}

// claimFrom claims up to n pending lines of batch b from line from on.
func (s *Scheduler) claimFrom(ctx context.Context, b claimed, from, n int, now time.Time) ([]claimed, error) {
	rows, err := s.svc.pool.Query(ctx, `
		UPDATE batch_lines SET status = 'running', attempts = attempts + 1, claimed_at = $2
		WHERE batch_id = $1 AND line = ANY (ARRAY(SELECT line FROM batch_lines
				WHERE batch_id = $1 AND line >= $3 AND status = 'pending' AND (not_before IS NULL OR not_before <= $2)
				ORDER BY line LIMIT $4 FOR UPDATE SKIP LOCKED))
			AND EXISTS (SELECT FROM batches WHERE id = $1 AND status = 'in_progress' AND expires_at > $2)
		RETURNING custom_id, line, attempts, body_length, body_offset`, b.batchID, now, from, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		l := b
		return l, r.Scan(&l.customID, &l.line, &l.attempts, &l.length, &l.offset)
	})
}

// claim takes one line, as claimLines does.
func (s *Scheduler) claim(ctx context.Context) (claimed, bool, error) {
	lines, err := s.claimLines(ctx, &claimer{}, 1)
	if err != nil || len(lines) == 0 {
		return claimed{}, false, err
	}
	return lines[0], true, nil
}

// claimLoop claims lines as the workers have room for them and hands them over, until ctx ends;
// then it closes lines, and the workers run what was handed over. A claim is not cancelled
// halfway: a claim whose update committed while its caller stopped waiting would leave its lines
// running, unseen, until the lease ran out.
func (s *Scheduler) claimLoop(ctx context.Context) {
	defer close(s.lines)
	var c claimer
	for ctx.Err() == nil {
		// Lines are claimed only for idle workers, never ahead of them: a line claimed ahead
		// would wait behind the lines in flight, and an account whose batch came later would wait
		// behind it (docs/batches.md, "Fair shares").
		s.mu.Lock()
		room := s.cfg.Concurrency - s.inHand
		s.mu.Unlock()
		if room <= 0 {
			select {
			case <-ctx.Done():
			case <-s.freed:
			}
			continue
		}
		lines, err := s.claimLines(context.WithoutCancel(ctx), &c, min(room, claimBatch))
		if err != nil && ctx.Err() == nil {
			s.log.Error("batch: claiming lines failed", "err", err)
		}
		s.hold(lines)
		for _, l := range lines {
			s.mu.Lock()
			s.inHand++
			s.inHandBy[l.accountID]++
			s.mu.Unlock()
			s.lines <- l // only this loop sends: there is room
		}
		if len(lines) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-s.kick:
		case <-time.After(s.cfg.PollEvery):
		}
	}
}

// work runs the lines handed over until there are no more, and hands each outcome to the
// recorder. Once ctx ends, a line handed over but not started is not sent: it goes back to
// pending as it was (released), so that Close waits only for the lines in flight.
func (s *Scheduler) work(ctx context.Context) {
	for l := range s.lines {
		var o outcome
		if ctx.Err() != nil {
			o = outcome{l: l, status: statusReleased}
		} else {
			o = s.attempt(context.Background(), l)
		}
		s.mu.Lock()
		s.inHand--
		if s.inHandBy[l.accountID]--; s.inHandBy[l.accountID] <= 0 {
			delete(s.inHandBy, l.accountID)
		}
		s.mu.Unlock()
		select { // this worker is idle: the claimer may claim for it
		case s.freed <- struct{}{}:
		default:
		}
		s.outcomes <- o
	}
}

// statusReleased is the outcome of a line claimed and never sent: back to pending, its attempt
// not counted.
const statusReleased = "released"

// lineError is the error member of an output line.
type lineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// outcome is what became of a line's attempt, to be recorded.
type outcome struct {
	l         claimed
	status    string // done, failed, or pending for a retry
	ans       Answer
	err       *lineError
	notBefore *time.Time
	at        time.Time
}

// run sends one line and records its outcome at once.
func (s *Scheduler) run(ctx context.Context, l claimed) error {
	return s.record(ctx, []outcome{s.attempt(ctx, l)})
}

// attempt sends one line and says what became of it: done on a 2xx; back to pending, later, on a
// 5xx or 429 while attempts remain; failed otherwise.
func (s *Scheduler) attempt(ctx context.Context, l claimed) (o outcome) {
	o = outcome{l: l, status: "failed"}
	defer func() { o.at = s.now() }()
	in, err := s.readLine(l)
	if err != nil {
		s.log.Error("batch: reading a line failed", "batch", l.batchID, "line", l.line, "err", err)
		o.err = &lineError{Code: "input_unreadable", Message: "The line could not be read from the input file."}
		return o
	}
	ans, err := s.cfg.Gateway.Send(ctx, Call{AccountID: l.accountID, APIKeyID: l.apiKeyID, URL: in.URL, Body: in.Body,
		RequestIDPrefix: l.requestIDPrefix()})
	if err != nil {
		s.log.Warn("batch: sending a line failed", "batch", l.batchID, "line", l.line, "err", err)
		ans = Answer{StatusCode: 500}
	}
	retriable := ans.StatusCode >= 500 || ans.StatusCode == 429
	switch {
	case ans.StatusCode >= 200 && ans.StatusCode < 300:
		o.status, o.ans = "done", ans
	case retriable && l.attempts < s.cfg.MaxAttempts:
		at := s.now().Add(time.Duration(l.attempts) * s.cfg.RetryAfter)
		o.status, o.notBefore = "pending", &at
	case err != nil:
		o.err = &lineError{Code: "server_error", Message: "The request could not be sent."}
	default:
		o.ans = ans
	}
	return o
}

func (s *Scheduler) readLine(l claimed) (inputLine, error) {
	f, err := s.svc.store.Open(l.fileID)
	if err != nil {
		return inputLine{}, err
	}
	defer f.Close()
	buf := make([]byte, l.length)
	if _, err := f.ReadAt(buf, l.offset); err != nil {
		return inputLine{}, err
	}
	var in inputLine
	if err := json.Unmarshal(buf, &in); err != nil {
		return inputLine{}, err
	}
	return in, nil
}

// recordEvery bounds how long an outcome waits for others to be recorded with it.
const recordEvery = 20 * time.Millisecond

// recordLoop writes the workers' outcomes, those that arrive together in one statement, until
// outcomes is closed and drained. A write that fails is tried again; an outcome never written
// leaves its line running, and the lease takes it back (recoverLines).
func (s *Scheduler) recordLoop(ctx context.Context) {
	var pending []outcome
	var flush <-chan time.Time
	write := func() {
		for try := 1; ; try++ {
			err := s.record(ctx, pending)
			if err == nil {
				break
			}
			if try == 5 {
				s.log.Error("batch: recording line outcomes failed; the lease takes the lines back", "lines", len(pending), "err", err)
				break
			}
			s.log.Warn("batch: recording line outcomes failed; trying again", "lines", len(pending), "err", err)
			time.Sleep(time.Duration(try) * 100 * time.Millisecond)
		}
		s.unhold(pending) // recorded, or left to the lease, which no renewal holds any more
		pending, flush = pending[:0], nil
	}
	for {
		select {
		case o, ok := <-s.outcomes:
			if !ok {
				if len(pending) > 0 {
					write()
				}
				return
			}
			pending = append(pending, o)
			if len(pending) >= s.cfg.Concurrency {
				write()
			} else if flush == nil {
				flush = time.After(recordEvery)
			}
		case <-flush:
			write()
		}
	}
}

// record writes lines' outcomes in one statement, each only if its line is still this attempt's:
// a line taken back as lost meanwhile is another attempt's now.
func (s *Scheduler) record(ctx context.Context, outs []outcome) (err error) {
	defer services.Wrap(&err, "batch.record(%d lines)", len(outs))
	var released []outcome
	sent := outs[:0:0]
	for _, o := range outs {
		if o.status == statusReleased {
			released = append(released, o)
		} else {
			sent = append(sent, o)
		}
	}
	if err := s.release(ctx, released); err != nil {
		return err
	}
	outs = sent
	if len(outs) == 0 {
		return nil
	}
	n := len(outs)
	batchIDs, statuses := make([]string, n), make([]string, n)
	lines, attempts := make([]int32, n), make([]int32, n)
	reqIDs, bodies, errs := make([]*string, n), make([]*string, n), make([]*string, n)
	codes := make([]*int32, n)
	notBefore, finished := make([]*time.Time, n), make([]*time.Time, n)
	for i, o := range outs {
		batchIDs[i], lines[i], attempts[i], statuses[i] = o.l.batchID, int32(o.l.line), int32(o.l.attempts), o.status
		if o.err != nil {
			raw, err := json.Marshal(o.err)
			if err != nil {
				return err
			}
			e := string(raw)
			errs[i] = &e
		}
		if o.ans.StatusCode != 0 {
			code, body := int32(o.ans.StatusCode), string(o.ans.Body)
			codes[i], bodies[i] = &code, &body
		}
		if o.ans.RequestID != "" {
			id := o.ans.RequestID
			reqIDs[i] = &id
		}
		notBefore[i] = o.notBefore
		if o.status != "pending" { // a line that ends counts in the queue's lines per minute (Queue)
			at := o.at
			finished[i] = &at
		}
	}
	_, err = s.svc.pool.Exec(ctx, `UPDATE batch_lines l SET status = v.status, request_id = v.request_id,
		status_code = v.status_code, response = v.response, error = v.error::jsonb, not_before = v.not_before,
		claimed_at = NULL, finished_at = v.finished_at
		FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::text[], $6::int[], $7::text[], $8::text[],
			$9::timestamptz[], $10::timestamptz[])
			AS v (batch_id, line, attempts, status, request_id, status_code, response, error, not_before, finished_at)
		WHERE l.batch_id = v.batch_id AND l.line = v.line AND l.attempts = v.attempts AND l.status = 'running'`,
		batchIDs, lines, attempts, statuses, reqIDs, codes, bodies, errs, notBefore, finished)
	return err
}

// release puts lines claimed and never sent back to pending, their attempt uncounted.
func (s *Scheduler) release(ctx context.Context, outs []outcome) error {
	if len(outs) == 0 {
		return nil
	}
	batchIDs, lines, attempts := make([]string, len(outs)), make([]int32, len(outs)), make([]int32, len(outs))
	for i, o := range outs {
		batchIDs[i], lines[i], attempts[i] = o.l.batchID, int32(o.l.line), int32(o.l.attempts)
	}
	_, err := s.svc.pool.Exec(ctx, `UPDATE batch_lines l SET status = 'pending', attempts = l.attempts - 1, claimed_at = NULL
		FROM unnest($1::text[], $2::int[], $3::int[]) AS v (batch_id, line, attempts)
		WHERE l.batch_id = v.batch_id AND l.line = v.line AND l.attempts = v.attempts AND l.status = 'running'`,
		batchIDs, lines, attempts)
	return err
}

// hold records lines as claimed by this scheduler: their claims are renewed until unhold.
func (s *Scheduler) hold(lines []claimed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range lines {
		s.held[heldKey{l.batchID, l.line, l.attempts}] = struct{}{}
	}
}

// unhold stops renewing the claims of lines whose outcomes were recorded (or given up on).
func (s *Scheduler) unhold(outs []outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range outs {
		delete(s.held, heldKey{o.l.batchID, o.l.line, o.l.attempts})
	}
}

// renewClaims sets claimed_at to now on every line this scheduler holds, every Lease/3: a line
// whose claim was not renewed for a whole lease has lost its holder (recoverLines). One
// statement renews them all, each only while it is still this attempt's and running.
func (s *Scheduler) renewClaims(ctx context.Context) error {
	now := s.now()
	s.mu.Lock()
	if now.Sub(s.renewedAt) < s.cfg.Lease/3 {
		s.mu.Unlock()
		return nil
	}
	var batchIDs []string
	var lines, attempts []int32
	for k := range s.held {
		batchIDs, lines, attempts = append(batchIDs, k.batchID), append(lines, int32(k.line)), append(attempts, int32(k.attempts))
	}
	s.renewedAt = now
	s.mu.Unlock()
	if len(batchIDs) == 0 {
		return nil
	}
	_, err := s.svc.pool.Exec(ctx, `UPDATE batch_lines l SET claimed_at = $4
		FROM unnest($1::text[], $2::int[], $3::int[]) AS v (batch_id, line, attempts)
		WHERE l.batch_id = v.batch_id AND l.line = v.line AND l.attempts = v.attempts AND l.status = 'running'`,
		batchIDs, lines, attempts, now)
	return err
}

// lineInterrupted is the error of a line taken back whose attempt was charged.
const lineInterrupted = `{"code":"batch_line_interrupted","message":"The request was answered and charged, but its answer was lost when the batch worker stopped."}`

// recoverLines takes back the lines whose holder is gone: running, and their claim not renewed
// for a whole lease. A line whose attempt was charged (a usage row with a charge or a provider's
// earning) is not sent again: it fails as interrupted, the charge standing. A line whose attempt
// has no usage row, or only uncharged ones (a request cancelled when its holder died), goes back
// to pending at once and is sent again. Only a line the gateway recorded as answered whose usage
// row has not been stored yet waits, up to MeterWait since its last renewal, for the meter.
func (s *Scheduler) recoverLines(ctx context.Context) (err error) {
	defer services.Wrap(&err, "batch.recoverLines")
	tx, err := s.svc.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	now := s.now()
	rows, err := tx.Query(ctx, `SELECT batch_id, line, attempts, claimed_at FROM batch_lines WHERE status = 'running' AND claimed_at < $1
		LIMIT 1000 FOR UPDATE SKIP LOCKED`, now.Add(-s.cfg.Lease))
	if err != nil {
		return err
	}
	type lostLine struct {
		claimed
		claimedAt time.Time
	}
	lost, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lostLine, error) {
		var l lostLine
		return l, r.Scan(&l.batchID, &l.line, &l.attempts, &l.claimedAt)
	})
	if err != nil || len(lost) == 0 {
		return err
	}
	var requeued, failed, waiting int
	for _, l := range lost {
		ids := make([]string, routing.MaxCandidates)
		for i := range ids {
			ids[i] = AttemptRequestID(l.requestIDPrefix(), i)
		}
		charged, unmetered, err := attemptsMetered(ctx, tx, ids)
		if err != nil {
			return err
		}
		switch {
		case charged != nil:
			_, err = tx.Exec(ctx, `UPDATE batch_lines SET status = 'failed', claimed_at = NULL, request_id = $3, finished_at = $4,
				error = $5::jsonb WHERE batch_id = $1 AND line = $2`, l.batchID, l.line, *charged, now, lineInterrupted)
			failed++
		case unmetered && now.Sub(l.claimedAt) < MeterWait:
			waiting++
			continue
		default:
			_, err = tx.Exec(ctx, `UPDATE batch_lines SET status = 'pending', claimed_at = NULL WHERE batch_id = $1 AND line = $2`,
				l.batchID, l.line)
			requeued++
		}
		if err != nil {
			return err
		}
	}
	if requeued+failed > 0 {
		s.log.Warn("batch: took back lines whose holder is gone", "requeued", requeued, "failed_charged", failed,
			"waiting_for_the_meter", waiting)
	}
	return tx.Commit(ctx)
}

// attemptsMetered says of a line's attempts, the requests of ids, which was charged (the last
// by request id whose usage row carries a charge or a provider's earning, nil for none), and
// whether the gateway recorded one as answered that has no usage row yet. The gateway's record
// is read first (requestlog.Answered), the usage rows after (metering.RequestsMetered), each in
// its own snapshot of tx: a request the meter stores between the two is found stored, never
// missed.
func attemptsMetered(ctx context.Context, tx pgx.Tx, ids []string) (charged *string, unmetered bool, err error) {
	answered, err := requestlog.Answered(ctx, tx, ids)
	if err != nil {
		return nil, false, err
	}
	metered, err := metering.RequestsMetered(ctx, tx, ids)
	if err != nil {
		return nil, false, err
	}
	for id, c := range metered {
		if c && (charged == nil || id > *charged) {
			charged = &id
		}
	}
	for _, id := range answered {
		if _, ok := metered[id]; !ok {
			unmetered = true
		}
	}
	return charged, unmetered, nil
}

// AttemptRequestID is the gateway's request id for a line's attempt at its i-th candidate.
func AttemptRequestID(prefix string, i int) string { return prefix + "_" + strconv.Itoa(i) }

// openBatch is a batch that may need to move on.
type openBatch struct {
	id, status       string
	expires          time.Time
	pending, running bool // whether any line is
}

// advance expires, finalizes and cancels the batches whose lines allow it. It asks only whether
// a batch has a line pending or running, which stops at the first one found on the batch's index
// of such lines; counting them would read every one, once a second, all through a long batch.
func (s *Scheduler) advance(ctx context.Context) error {
	rows, err := s.svc.pool.Query(ctx, `SELECT b.id, b.status, b.expires_at,
		EXISTS (SELECT FROM batch_lines l WHERE l.batch_id = b.id AND l.status = 'pending'),
		EXISTS (SELECT FROM batch_lines l WHERE l.batch_id = b.id AND l.status = 'running')
		FROM batches b WHERE b.status IN ('in_progress', 'cancelling', 'finalizing')`, pgx.QueryExecModeExec)
	if err != nil {
		return err
	}
	open, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (openBatch, error) {
		var b openBatch
		return b, r.Scan(&b.id, &b.status, &b.expires, &b.pending, &b.running)
	})
	if err != nil {
		return err
	}
	now := s.now()
	for _, b := range open {
		switch {
		case b.status == StatusInProgress && !now.Before(b.expires) && b.pending:
			// The window closed: what was not sent is not sent; what is in flight finishes.
			if _, err := s.svc.pool.Exec(ctx, `UPDATE batch_lines SET status = 'failed',
				error = '{"code":"batch_expired","message":"This line was not executed because the batch expired before it was reached."}'
				WHERE batch_id = $1 AND status = 'pending'`, b.id); err != nil {
				return err
			}
			if !b.running {
				err = s.finalize(ctx, b.id, StatusInProgress)
			}
		case b.status == StatusInProgress && !b.pending && !b.running:
			err = s.finalize(ctx, b.id, StatusInProgress)
		case b.status == StatusFinalizing:
			err = s.finalize(ctx, b.id, StatusFinalizing)
		case b.status == StatusCancelling && !b.running:
			err = s.finalize(ctx, b.id, StatusCancelling)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finalize writes a batch's output and error files and ends it: completed, expired (a line was
// expired) or cancelled. A batch in progress shows finalizing while its files are written.
func (s *Scheduler) finalize(ctx context.Context, id, from string) (err error) {
	defer services.Wrap(&err, "batch.finalize(%s)", id)
	now := s.now()
	if from == StatusInProgress {
		tag, err := s.svc.pool.Exec(ctx, `UPDATE batches SET status = 'finalizing', finalizing_at = $2
			WHERE id = $1 AND status = 'in_progress'`, id, now)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		from = StatusFinalizing
	}
	tx, err := s.svc.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var accountID string
	err = tx.QueryRow(ctx, `SELECT account_id::text FROM batches WHERE id = $1 AND status = $2 FOR UPDATE SKIP LOCKED`, id, from).Scan(&accountID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	outID, errID, expired, err := s.writeResults(ctx, tx, id, accountID)
	if err != nil {
		return err
	}
	final, column := StatusCompleted, "completed_at"
	switch {
	case from == StatusCancelling:
		final, column = StatusCancelled, "cancelled_at"
	case expired:
		final, column = StatusExpired, "expired_at"
	}
	if _, err := tx.Exec(ctx, `UPDATE batches SET status = $2, `+column+` = $3, output_file_id = $4, error_file_id = $5 WHERE id = $1`,
		id, final, now, outID, errID); err != nil {
		return err
	}
	if final == StatusCompleted && s.svc.events != nil {
		if err := s.svc.emitCompleted(ctx, tx, accountID, id); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// EventBatchCompleted is the webhook event of a batch completed.
const EventBatchCompleted = "batch.completed"

// BatchCompleted is the data of a batch.completed event. The cost is what the meter had billed
// of the batch's lines when it completed, exact in picodollars and in dollars; usage metered
// later adds to the figure GET /v1/batches/{id} shows.
type BatchCompleted struct {
	BatchID       string            `json:"batch_id"`
	Status        string            `json:"status"`
	Endpoint      string            `json:"endpoint"`
	InputFileID   string            `json:"input_file_id"`
	OutputFileID  *string           `json:"output_file_id"`
	ErrorFileID   *string           `json:"error_file_id"`
	RequestCounts RequestCounts     `json:"request_counts"`
	CostUSD       string            `json:"cost_usd"`
	CostPico      money.BigPico     `json:"cost_pico"`
	CompletedAt   *int64            `json:"completed_at"`
	Metadata      map[string]string `json:"metadata"`
}

// emitCompleted tells the account's webhooks that its batch completed, inside tx.
func (s *Service) emitCompleted(ctx context.Context, tx pgx.Tx, accountID, id string) error {
	b, err := readBatch(ctx, tx, ` WHERE b.id = $1`, pgx.QueryExecModeExec, id)
	if err != nil {
		return err
	}
	var cost money.BigPico
	// The dollars with twelve decimals are the picodollars with a point in them.
	picos := strings.TrimLeft(strings.Replace(b.GPUMarket.CostUSD, ".", "", 1), "0")
	if picos == "" {
		picos = "0"
	}
	if err := cost.Scan(picos); err != nil {
		return err
	}
	return s.events.Emit(ctx, tx, accountID, EventBatchCompleted, EventBatchCompleted+":"+id, BatchCompleted{
		BatchID: b.ID, Status: b.Status, Endpoint: b.Endpoint, InputFileID: b.InputFileID, OutputFileID: b.OutputFileID,
		ErrorFileID: b.ErrorFileID, RequestCounts: b.RequestCounts, CostUSD: b.GPUMarket.CostUSD, CostPico: cost,
		CompletedAt: b.CompletedAt, Metadata: b.Metadata,
	})
}

// outputLine is a line of an output or error file, OpenAI's.
type outputLine struct {
	ID       string          `json:"id"`
	CustomID string          `json:"custom_id"`
	Response *outputResponse `json:"response"`
	Error    *lineError      `json:"error"`
}

type outputResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// resultFile is an output or error file being written, made on its first line.
type resultFile struct {
	svc       *Service
	accountID string
	name      string
	file      File
	up        Upload
}

func (r *resultFile) write(line []byte) error {
	if r.up == nil {
		id := services.NewTimeOrderedID("file-", r.svc.now())
		up, err := r.svc.store.Create(id)
		if err != nil {
			return err
		}
		r.up = up
		r.file = File{ID: id, Object: "file", CreatedAt: r.svc.now().Unix(), Filename: r.name, Purpose: PurposeBatchOutput,
			Status: "processed", accountID: r.accountID}
	}
	r.file.Bytes += int64(len(line)) + 1
	r.file.lines++
	if _, err := r.up.Write(line); err != nil {
		return err
	}
	_, err := r.up.Write([]byte{'\n'})
	return err
}

func (r *resultFile) commit(ctx context.Context, tx pgx.Tx) (*string, error) {
	if r.up == nil {
		return nil, nil
	}
	if err := r.up.Commit(); err != nil {
		return nil, err
	}
	if err := r.svc.insertFile(ctx, tx, r.file); err != nil {
		return nil, err
	}
	return &r.file.ID, nil
}

func (r *resultFile) abort() {
	if r.up != nil {
		r.up.Abort()
	}
}

// writeResults streams the batch's finished lines, in line order, into its output file (the
// 2xx answers) and its error file (the rest); it reports whether a line expired.
func (s *Scheduler) writeResults(ctx context.Context, tx pgx.Tx, id, accountID string) (outID, errID *string, expired bool, err error) {
	out := &resultFile{svc: s.svc, accountID: accountID, name: id + "_output.jsonl"}
	errs := &resultFile{svc: s.svc, accountID: accountID, name: id + "_error.jsonl"}
	defer func() {
		if err != nil {
			out.abort()
			errs.abort()
		}
	}()
	rows, err := tx.Query(ctx, `SELECT line, custom_id, status, coalesce(request_id, ''), coalesce(status_code, 0),
		coalesce(response, ''), error FROM batch_lines WHERE batch_id = $1 AND status IN ('done', 'failed') ORDER BY line`, id)
	if err != nil {
		return nil, nil, false, err
	}
	short := strings.TrimPrefix(id, "batch_")
	for rows.Next() {
		var line, code int
		var customID, status, reqID, body string
		var errJSON []byte
		if err := rows.Scan(&line, &customID, &status, &reqID, &code, &body, &errJSON); err != nil {
			rows.Close()
			return nil, nil, false, err
		}
		ol := outputLine{ID: fmt.Sprintf("batch_req_%s_%d", short, line), CustomID: customID}
		if code != 0 {
			raw := json.RawMessage(body)
			if !json.Valid(raw) {
				raw, _ = json.Marshal(body)
			}
			ol.Response = &outputResponse{StatusCode: code, RequestID: reqID, Body: raw}
		}
		if len(errJSON) > 0 {
			ol.Error = &lineError{}
			if err := json.Unmarshal(errJSON, ol.Error); err != nil {
				rows.Close()
				return nil, nil, false, err
			}
			expired = expired || ol.Error.Code == "batch_expired"
		}
		raw, err := json.Marshal(ol)
		if err != nil {
			rows.Close()
			return nil, nil, false, err
		}
		dest := errs
		if status == "done" {
			dest = out
		}
		if err := dest.write(raw); err != nil {
			rows.Close()
			return nil, nil, false, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, false, err
	}
	if outID, err = out.commit(ctx, tx); err != nil {
		return nil, nil, false, err
	}
	if errID, err = errs.commit(ctx, tx); err != nil {
		return nil, nil, false, err
	}
	return outID, errID, expired, nil
}
