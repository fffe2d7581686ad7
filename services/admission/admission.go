package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// Admission decides whether a gateway request may start spending: it refuses when the
// account's prepaid credit is spent, or when the API key has reached its limit for its day,
// week or month, the person who created it their member limit, or the account its monthly
// budget (docs/failure-cases.md, case 19; docs/budgets.md), and it bounds the overdraft that requests can cause,
// whatever their rigs claim (docs/gateway-integrity.md, "Holds until metered").
//
// What an account has to spend is its credit balance (the ledger's cached balance), less what
// it has committed that the balance does not show yet, each request at the most the meter may
// bill it (ticket.BillableOf), never at the usage its rig's answer claims:
//   - in flight: each admitted request reserves its route ticket's bound, (input bound x the
//     tier's input price) + (output bound x its output price), the input bound being the body's
//     bytes plus routing.InputAllowance and the output bound max_tokens (or the model's limit)
//     times the choices, as the ticket carries them.
//   - ended, not yet metered: when a request ends, its reservation turns into a hold of the
//     same bound, its output lowered to the bound on the output the gateway relayed; nothing
//     when the gateway saw the attempt fail, as the meter then bills nothing. The gateway
//     writes the hold with its record of the attempt (RequestLog, table admission_holds), and
//     the meter deletes it in the transaction that posts the request's charge. Until the
//     record is written the hold is kept here, in this process.
//
// The balance, the keys' metered spend this month, the account's holds and which of the holds
// kept here are recorded or metered are read in one batch, in one read-only repeatable-read
// transaction, so from one snapshot: every ended request is counted once, either in the balance
// or as a hold, however stale the cached figures are. A hold lasts until the meter bills its request, or until the meter would no
// longer bill it (its ticket is older than usage.MaxTicketAge), so an event a rig releases
// days late finds its charge already held. Since the holds live in PostgreSQL, every gateway
// replica counts the holds of every other, and a restart loses none of them. Figures are reread
// in the background once BalanceTTL old, and on the request path when older than maxStale or
// when a new month began.
//
// A request is refused when the account's balance less its commitments is <= 0, or when the
// key's metered spend in its limit's period (UTC) plus its commitments is >= its limit, and the
// same of the creator's member limit and the account's monthly budget. The
// check comes before the request's own reservation, so a customer with a few cents left can
// still make a small request. The overdraft bound that follows, per account: the balance can
// fall below zero by at most the bound of the request admitted last on each gateway replica,
// plus what other replicas admitted within the age of this one's figures (BalanceTTL), plus the
// bounds of requests whose gateway stopped before writing its record (the meter bills those
// within their tickets' bounds). A key's limit is overshot by the same amounts. Credit taken
// back by hand (an adjustment or a refund) is seen within BalanceTTL.
type Admission struct {
	cfg AdmissionConfig

	pricesMu sync.Mutex
	prices   map[catalog.Tier]catalog.Price
	pricesAt time.Time

	mu       sync.Mutex
	spenders map[string]*spender // by account id

	// background ends the rereads in the background (Close); refreshing counts those under way,
	// and closed (under closeMu) stops new ones.
	closeMu    sync.Mutex
	background context.Context
	stop       context.CancelFunc
	refreshing sync.WaitGroup
	closed     bool
}

// PriceBook is where admission reads the tier prices its estimates use. *catalog.Service
// implements it.
type PriceBook interface {
	CurrentPrices(ctx context.Context) (map[catalog.Tier]catalog.Price, error)
}

var _ PriceBook = (*catalog.Service)(nil)

// Defaults of AdmissionConfig.
const (
	DefaultBalanceTTL = time.Second
	// DefaultHoldFor is as long as the meter bills a request, and a little longer for the clock
	// skew it allows.
	DefaultHoldFor = usage.MaxTicketAge + usage.MaxClockSkew
	// maxStale is how old the cached figures may be before a request waits for fresh ones.
	maxStale = 30 * time.Second
	// pricesTTL is how long the price book is reused: a price change needs no faster effect on
	// a reservation, which is an estimate; the meter prices at the price in force.
	pricesTTL = 30 * time.Second
	// maxEstimateTokens caps the token counts an estimate multiplies, so that a silly max_tokens
	// cannot overflow it.
	maxEstimateTokens = 1 << 26
)

// What Admit refuses with, as the Cause of a *services.Error; the gateway answers each with
// 402 insufficient_quota.
var (
	ErrCreditSpent          = errors.New("admission: the account's credit is spent")
	ErrKeyLimitReached      = errors.New("admission: the API key's spending limit is reached")
	ErrMemberLimitReached   = errors.New("admission: the member's spending limit is reached")
	ErrAccountBudgetReached = errors.New("admission: the account's monthly budget is reached")
)

// AdmissionConfig wires an Admission.
type AdmissionConfig struct {
	Pool   *pgxpool.Pool
	Prices PriceBook
	// Usage and Limits are what admission reads of the meter's usage and of the budgets, in the
	// batch that reads an account's figures: metering.GatewayReads and budgets.AdmissionLimits.
	// Both packages import this one, so the platform hands them in; without them Admit refuses.
	Usage  Usage
	Limits Limits
	Now    func() time.Time // nil means time.Now
	// BalanceTTL is how old cached figures get before they are reread in the background.
	BalanceTTL time.Duration
	// HoldFor is how long an ended request's hold lasts unless the meter bills the request
	// first: the expiry of the hold the gateway records, and how long the process keeps it while
	// neither that record nor the metered row shows. Zero means DefaultHoldFor, as long as the
	// meter bills a request.
	HoldFor time.Duration
	Log     *slog.Logger // nil means slog.Default()
}

// NewAdmission returns the admission control of one gateway process.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BalanceTTL <= 0 {
		cfg.BalanceTTL = DefaultBalanceTTL
	}
	if cfg.HoldFor <= 0 {
		cfg.HoldFor = DefaultHoldFor
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Admission{cfg: cfg, spenders: map[string]*spender{}}
	a.background, a.stop = context.WithCancel(context.Background())
	return a
}

// Close ends the rereads under way in the background and waits for them; Admit then rereads
// only on the request path. Calling it again does nothing.
func (a *Admission) Close() {
	a.closeMu.Lock()
	a.closed = true
	a.closeMu.Unlock()
	a.stop()
	a.refreshing.Wait()
}

// refreshLater rereads the account's figures in the background, unless Close was called.
func (a *Admission) refreshLater(sp *spender, accountID string) bool {
	a.closeMu.Lock()
	defer a.closeMu.Unlock()
	if a.closed {
		return false
	}
	a.refreshing.Go(func() { a.refresh(sp, accountID) })
	return true
}

// AdmitInput is a request asking to be admitted.
type AdmitInput struct {
	AccountID string
	APIKeyID  string
	KeyLimit  *money.Pico    // the key's limit; nil for none
	KeyPeriod periods.Period // the period of the key's limit; "" is a month
	// CreatedBy is the person who created the key: the member whose limit in the account holds
	// the key's requests, when the account set one.
	CreatedBy string
	Tier      catalog.Tier
	// MaxInputTokens and MaxOutputTokens are the bounds of the request's route ticket
	// (routing.BoundsFor, ticket.Claims): the most input and output tokens the meter may bill
	// it. The input bound is the body's bytes plus routing.InputAllowance; the output bound is
	// 0 for an endpoint that produces no output tokens.
	MaxInputTokens  int64
	MaxOutputTokens int64
	// Price is the price routing fixed for the request, its model's in the tier (a model may
	// have a price of its own above the tier's default); nil estimates at the tier's default in
	// force.
	Price *catalog.Price
}

// TokenCount is a response's usage. Cached are the input tokens the usage said the engine
// served from its prompt cache (prompt_tokens_details.cached_tokens), a part of Input; the
// meter bills no fewer of them at the cached price than the client was shown.
type TokenCount struct {
	Input, Output int64
	Cached        int64
}

// spender is one account's figures and commitments, guarded by its own lock.
type spender struct {
	mu         sync.Mutex
	loadedAt   time.Time // when the snapshot the figures come from began; zero before the first
	day        time.Time // the day (UTC) the spend of every period is as of
	refreshing bool

	balance money.Pico
	// spent is the metered spend of the keys with a limit in the period of keyPeriod.
	spent     map[string]money.Pico
	keyPeriod map[string]periods.Period

	// members are the account's member limits with their metered spend and recorded holds;
	// budget is its monthly budget (nil for none) and accountSpent its keys' spend this month.
	members      map[string]memberFigures
	budget       *money.Pico
	accountSpent money.Pico
	// limited says whether the last figures found a member limit or a budget: the next read then
	// reads the account's keys with the rest (load).
	limited bool
	// inFlightByMember and heldByMember are the commitments of the keys each person created.
	inFlightByMember map[string]money.Pico
	heldByMember     map[string]money.Pico

	// recorded and recordedByKey are the account's holds in PostgreSQL (admission_holds), of
	// every gateway replica, as of the snapshot.
	recorded      money.Pico
	recordedByKey map[string]money.Pico

	inFlight      money.Pico
	inFlightByKey map[string]money.Pico
	// held are the holds of requests that ended here and whose hold the snapshot did not show
	// recorded or metered yet, by request id.
	held      map[string]heldCharge
	heldTotal money.Pico
	heldByKey map[string]money.Pico
}

type heldCharge struct {
	key, member string
	amount      money.Pico
	since       time.Time
}

// memberFigures is a member limit as a snapshot read it.
type memberFigures struct {
	limit    money.Pico
	period   periods.Period
	spent    money.Pico
	recorded money.Pico
}

// Reservation is an admitted request's hold on its account's credit. Settle it once the
// request ended.
type Reservation struct {
	a       *Admission
	sp      *spender
	key     string
	member  string
	amount  money.Pico
	bounds  AdmitInput
	price   catalog.Price
	settled bool
}

// Amount is what the reservation holds.
func (r *Reservation) Amount() money.Pico { return r.amount }

// Admit admits a request and reserves its estimated cost, or refuses it with ErrCreditSpent,
// ErrKeyLimitReached, ErrMemberLimitReached or ErrAccountBudgetReached (see Admission).
func (a *Admission) Admit(ctx context.Context, in AdmitInput) (_ *Reservation, err error) {
	defer services.Wrap(&err, "admission.Admit")
	var price catalog.Price
	if in.Price != nil {
		price = *in.Price
	} else if price, err = a.price(ctx, in.Tier); err != nil {
		return nil, err
	}
	amount := estimate(in, price)
	sp := a.spender(in.AccountID)
	limited := in.KeyLimit != nil && in.APIKeyID != ""
	if in.KeyPeriod == "" {
		in.KeyPeriod = periods.Month
	}

	sp.mu.Lock()
	defer sp.mu.Unlock()
	// Read under the lock, so that a snapshot this request loads is newer than any applied.
	now := a.cfg.Now()
	period, knownKey := sp.keyPeriod[in.APIKeyID]
	knownKey = knownKey && period == in.KeyPeriod
	reload := func() error {
		keys := sp.limitedKeys()
		if limited {
			keys[in.APIKeyID] = in.KeyPeriod
		}
		snap, err := a.load(ctx, in.AccountID, keys, sp.heldIDs(), sp.mayBeLimited(), now)
		if err != nil {
			return err
		}
		sp.apply(snap, a.cfg.HoldFor)
		return nil
	}
	loaded := false
	switch age := now.Sub(sp.loadedAt); {
	case sp.loadedAt.IsZero() || age > maxStale || !periods.Day.Start(now).Equal(sp.day) || (limited && !knownKey):
		if err := reload(); err != nil {
			return nil, err
		}
		loaded = true
	case age >= a.cfg.BalanceTTL && !sp.refreshing:
		sp.refreshing = a.refreshLater(sp, in.AccountID)
	}

	refusal := sp.refusal(in, limited, now)
	if refusal != nil && !loaded && now.Sub(sp.loadedAt) >= recheckAfter {
		// Figures that would refuse are read again before they do: credits bought or a limit
		// raised a moment ago let the very next request through, not the one after the
		// background refresh.
		if err := reload(); err != nil {
			return nil, err
		}
		refusal = sp.refusal(in, limited, now)
	}
	if refusal != nil {
		return nil, refusal
	}
	sp.inFlight += amount
	sp.inFlightByKey[in.APIKeyID] += amount
	if in.CreatedBy != "" {
		sp.inFlightByMember[in.CreatedBy] += amount
	}
	return &Reservation{a: a, sp: sp, key: in.APIKeyID, member: in.CreatedBy, amount: amount, bounds: in, price: price}, nil
}

// recheckAfter is how old figures that would refuse a request must be for admission to read
// them again first: so that a client looping on a spent balance costs each gateway at most a
// few reads a second.
const recheckAfter = 200 * time.Millisecond

// refusal is why the figures refuse a request, nil when they admit it (Refusal).
func (sp *spender) refusal(in AdmitInput, limited bool, now time.Time) error {
	held := sp.recorded + sp.heldTotal
	st := Standing{Balance: sp.balance, Held: held, InFlight: sp.inFlight, Now: now}
	if limited {
		st.Key = Allowance{Spent: sp.spent[in.APIKeyID], InFlight: sp.inFlightByKey[in.APIKeyID],
			Held: sp.recordedByKey[in.APIKeyID] + sp.heldByKey[in.APIKeyID], Limit: in.KeyLimit, Period: in.KeyPeriod}
	}
	if m, ok := sp.members[in.CreatedBy]; ok && in.CreatedBy != "" {
		st.Member = Allowance{Spent: m.spent, Held: m.recorded + sp.heldByMember[in.CreatedBy],
			InFlight: sp.inFlightByMember[in.CreatedBy], Limit: &m.limit, Period: m.period}
	}
	if sp.budget != nil {
		st.Account = Allowance{Spent: sp.accountSpent, Held: held, InFlight: sp.inFlight, Limit: sp.budget, Period: periods.Month}
	}
	return Refusal(st)
}

// Hold is what an ended request leaves held until the meter bills it: Amount, the most the
// meter may charge for it, until Until, when the meter no longer bills it. The gateway writes it
// with its record of the attempt (GatewayRequest).
type Hold struct {
	Amount money.Pico
	Until  time.Time
}

// Settle ends the reservation of a request as SettlementOf says, and returns what it leaves
// held: nothing when nothing can be billed, else the request's bound (see Admission), kept here
// until the snapshot shows it recorded or metered. Calling Settle again does nothing and
// returns no hold.
func (r *Reservation) Settle(s Settlement) Hold {
	sp := r.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if r.settled {
		return Hold{}
	}
	r.settled = true
	sp.inFlight -= r.amount
	if sp.inFlightByKey[r.key] -= r.amount; sp.inFlightByKey[r.key] == 0 {
		delete(sp.inFlightByKey, r.key)
	}
	if r.member != "" {
		if sp.inFlightByMember[r.member] -= r.amount; sp.inFlightByMember[r.member] == 0 {
			delete(sp.inFlightByMember, r.member)
		}
	}
	if s.RequestID == "" || !s.Billable {
		return Hold{}
	}
	bound := ticket.BillableOf(r.bounds.MaxInputTokens, r.bounds.MaxOutputTokens, s.Relayed, s.RelayedBytes, s.RelayedChunks)
	cost := costOf(bound, r.price)
	if cost <= 0 {
		return Hold{}
	}
	if _, dup := sp.held[s.RequestID]; dup {
		return Hold{}
	}
	now := r.a.cfg.Now()
	sp.held[s.RequestID] = heldCharge{key: r.key, member: r.member, amount: cost, since: now}
	sp.heldTotal += cost
	sp.heldByKey[r.key] += cost
	if r.member != "" {
		sp.heldByMember[r.member] += cost
	}
	return Hold{Amount: cost, Until: now.Add(r.a.cfg.HoldFor)}
}

// costOf is the charge for the tokens at the price; a count it cannot price is held at the
// most it can be.
func costOf(b ticket.Billable, p catalog.Price) money.Pico {
	in, err1 := money.ChargeFor(min(b.Input, maxEstimateTokens), p.Input)
	out, err2 := money.ChargeFor(min(b.Output, maxEstimateTokens), p.Output)
	if err1 != nil || err2 != nil {
		return admissionBound
	}
	return min(in+out, admissionBound)
}

// estimate is a request's reservation: its route ticket's bound at the price (see Admission).
func estimate(in AdmitInput, p catalog.Price) money.Pico {
	return costOf(ticket.BillableOf(in.MaxInputTokens, in.MaxOutputTokens, false, 0, 0), p)
}

func (a *Admission) spender(accountID string) *spender {
	a.mu.Lock()
	defer a.mu.Unlock()
	sp := a.spenders[accountID]
	if sp == nil {
		sp = &spender{spent: map[string]money.Pico{}, keyPeriod: map[string]periods.Period{}, recordedByKey: map[string]money.Pico{},
			inFlightByKey: map[string]money.Pico{}, held: map[string]heldCharge{}, heldByKey: map[string]money.Pico{},
			members: map[string]memberFigures{}, inFlightByMember: map[string]money.Pico{}, heldByMember: map[string]money.Pico{}}
		a.spenders[accountID] = sp
	}
	return sp
}

// price returns the tier's price in force, from a copy of the price book at most pricesTTL old.
func (a *Admission) price(ctx context.Context, tier catalog.Tier) (catalog.Price, error) {
	a.pricesMu.Lock()
	defer a.pricesMu.Unlock()
	now := a.cfg.Now()
	if a.prices == nil || now.Sub(a.pricesAt) >= pricesTTL {
		prices, err := a.cfg.Prices.CurrentPrices(ctx)
		if err != nil {
			if a.prices == nil {
				return catalog.Price{}, err
			}
			a.cfg.Log.Warn("admission: price book reload failed; estimating with the last one", "error", err)
		} else {
			a.prices, a.pricesAt = prices, now
		}
	}
	p, ok := a.prices[tier]
	if !ok {
		return catalog.Price{}, &services.Error{Code: services.CodeUnavailable, Message: fmt.Sprintf("The %s tier has no price yet.", tier)}
	}
	return p, nil
}

// refresh rereads an account's figures in the background.
func (a *Admission) refresh(sp *spender, accountID string) {
	sp.mu.Lock()
	keys, held, limited := sp.limitedKeys(), sp.heldIDs(), sp.mayBeLimited()
	sp.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.background, 5*time.Second)
	defer cancel()
	snap, err := a.load(ctx, accountID, keys, held, limited, a.cfg.Now())
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.refreshing = false
	if err != nil {
		if a.background.Err() == nil { // not cut off by Close
			a.cfg.Log.Warn("admission: balance refresh failed; admitting on the last figures", "account", accountID, "error", err)
		}
		return
	}
	sp.apply(snap, a.cfg.HoldFor)
}

// figures is what one snapshot of the database says of an account.
type figures struct {
	at      time.Time
	day     time.Time
	balance money.Pico
	spent   map[string]money.Pico
	// keyPeriod are the periods the keys' spend is of.
	keyPeriod map[string]periods.Period
	// recorded is the account's holds in admission_holds, byKey those of the keys asked about.
	recorded money.Pico
	byKey    map[string]money.Pico
	known    []string // of the held request ids asked about, those recorded or metered
	// limited says whether the account has a member limit or a budget; members and budget are
	// then those, and accountSpent what its keys spent this month.
	limited      bool
	members      map[string]memberFigures
	budget       *money.Pico
	accountSpent money.Pico
}

// errNotWired refuses to admit on an admission not given the meter's and the budgets' reads.
var errNotWired = errors.New("admission reads the meter's usage and the budgets through AdmissionConfig.Usage and Limits, and was given none")

// load reads the account's balance (package ledger), its limited keys' spend in their periods
// (the meter's, Usage), its recorded holds, which of the held request ids are recorded or
// metered, and whether it has a member limit or a budget (Limits), in one batch: one round trip,
// one read-only repeatable-read transaction, so from one snapshot (readSnapshot). Then, only for
// an account with a member limit or a budget, those (loadBudgets); with mayBeLimited (the last
// figures had either, or there were none yet) the account's keys and their creators, which
// loadBudgets sums the spend by, are read in the same batch. A key's spend is one row of
// api_key_spend for a month, one row of api_key_spend_days for a day and at most seven for a
// week. A recorded hold counts until it expires, unless its request is metered, as the holds'
// statement asks of its snapshot (Usage.Metered): the meter deletes the hold as it bills, and a
// hold recorded after its request was metered (a record written late) counts for nothing. The
// statements are planned for each call: a plan cached while usage_events was nearly empty scans
// the whole table for the held ids, and keeps doing so as it grows until the next ANALYZE.
func (a *Admission) load(ctx context.Context, accountID string, keys map[string]periods.Period, held []string, mayBeLimited bool,
	now time.Time) (f figures, err error) {
	defer services.Wrap(&err, "admission.Admission.load(%s)", accountID)
	if a.cfg.Usage == nil || a.cfg.Limits == nil {
		return figures{}, errNotWired
	}
	f = figures{at: now, day: periods.Day.Start(now), spent: make(map[string]money.Pico, len(keys)),
		byKey: make(map[string]money.Pico, len(keys)), members: map[string]memberFigures{}, keyPeriod: keys}
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	var balance, recorded money.BigPico
	keyHeld := make(map[string]money.BigPico, len(keys))
	spent := make(map[string]money.BigPico, len(keys))
	var creators map[string]string
	if mayBeLimited {
		creators = map[string]string{}
	}
	err = a.readSnapshot(ctx, true, func(b *pgx.Batch) {
		ledger.QueueCustomerCredit(b, accountID, &balance)
		b.Queue(`
			WITH holds AS (
				SELECT h.api_key_id, h.amount_pico FROM admission_holds h
				WHERE h.account_id = $1::uuid AND h.expires_at > $2 AND NOT `+a.cfg.Usage.Metered("h.request_id")+`)
			SELECT (SELECT coalesce(sum(amount_pico), 0) FROM holds),
				k.id, (SELECT coalesce(sum(amount_pico), 0) FROM holds WHERE holds.api_key_id = k.id)
			FROM (SELECT) AS one LEFT JOIN unnest($3::text[]) AS k (id) ON true`,
			accountID, now, ids).Query(func(rows pgx.Rows) error {
			var key pgtype.Text
			var total, byKey money.BigPico
			_, err := pgx.ForEachRow(rows, []any{&total, &key, &byKey}, func() error {
				recorded = total
				if key.Valid {
					keyHeld[key.String] = byKey
				}
				return nil
			})
			return err
		})
		if len(held) > 0 {
			b.Queue(`SELECT request_id FROM admission_holds WHERE request_id = ANY($1::text[])`, held).Query(func(rows pgx.Rows) error {
				var id string
				_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
					f.known = append(f.known, id)
					return nil
				})
				return err
			})
			a.cfg.Usage.QueueMetered(b, held, func(id string) { f.known = append(f.known, id) })
		}
		if len(keys) > 0 {
			a.cfg.Usage.QueueSpendInPeriods(b, keys, now, spent)
		}
		a.cfg.Limits.QueueLimited(b, accountID, &f.limited)
		if creators != nil {
			accounts.QueueKeyCreators(b, accountID, creators)
		}
	})
	if err != nil {
		return figures{}, err
	}
	f.balance, f.recorded = admissionFigure(balance), admissionFigure(recorded)
	for _, id := range ids {
		f.spent[id], f.byKey[id] = admissionFigure(spent[id]), admissionFigure(keyHeld[id])
	}
	if !f.limited {
		return f, nil
	}
	return f, a.loadBudgets(ctx, accountID, creators, now, &f)
}

// loadBudgets reads the account's member limits and monthly budget (Limits) with the spend of
// its keys (Usage) and their holds, summed by the person who created each key (creators, the
// account's keys; nil when load did not read them, and they are read first). The spend and the
// holds come from one snapshot, so a request is counted once, as one or the other; that
// snapshot is after load's: a request the meter billed in between is then counted twice (as a
// hold there and as spend here) until the next read, never missed.
func (a *Admission) loadBudgets(ctx context.Context, accountID string, creators map[string]string, now time.Time, f *figures) (err error) {
	defer services.Wrap(&err, "admission.Admission.loadBudgets(%s)", accountID)
	if creators == nil {
		creators = map[string]string{}
		b := &pgx.Batch{}
		accounts.QueueKeyCreators(b, accountID, creators)
		if err := a.cfg.Pool.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(creators))
	for k := range creators {
		keys = append(keys, k)
	}
	day, week, month := periods.Day.Start(now), periods.Week.Start(now), periods.Month.Start(now)
	from := week
	if day.Before(from) {
		from = day
	}
	limits := AccountLimits{Members: map[string]MemberLimit{}}
	spend := KeySpend{Month: map[string]money.BigPico{}}
	held := map[string]money.BigPico{} // by key
	err = a.readSnapshot(ctx, false, func(b *pgx.Batch) {
		a.cfg.Limits.QueueLimits(b, accountID, &limits)
		a.cfg.Usage.QueueKeySpend(b, keys, month, from, day.AddDate(0, 0, 7), &spend)
		b.Queue(`
			SELECT h.api_key_id, sum(h.amount_pico) FROM admission_holds h
			WHERE h.account_id = $1::uuid AND h.expires_at > $2 AND NOT `+a.cfg.Usage.Metered("h.request_id")+`
			GROUP BY h.api_key_id`, accountID, now).Query(func(rows pgx.Rows) error {
			var key string
			var sum money.BigPico
			_, err := pgx.ForEachRow(rows, []any{&key, &sum}, func() error {
				held[key] = sum
				return nil
			})
			return err
		})
	})
	if err != nil {
		return err
	}
	// Sums by person: the month of each key, its days of the week, its day, and its holds.
	var accountMonth money.BigPico
	byMonth, byWeek, byDay, byHeld := map[string]money.BigPico{}, map[string]money.BigPico{}, map[string]money.BigPico{},
		map[string]money.BigPico{}
	for key, charge := range spend.Month {
		accountMonth = accountMonth.Add(charge)
		byMonth[creators[key]] = byMonth[creators[key]].Add(charge)
	}
	for _, d := range spend.Days {
		by := creators[d.Key]
		if !d.Day.Before(week) {
			byWeek[by] = byWeek[by].Add(d.Charge)
		}
		if d.Day.Equal(day) {
			byDay[by] = byDay[by].Add(d.Charge)
		}
	}
	for key, sum := range held {
		if by, ok := creators[key]; ok {
			byHeld[by] = byHeld[by].Add(sum)
		}
	}
	if limits.Budget != nil {
		b := admissionFigure(*limits.Budget)
		f.budget, f.accountSpent = &b, admissionFigure(accountMonth)
	}
	for user, l := range limits.Members {
		spent := byDay[user]
		switch l.Period {
		case periods.Month:
			spent = byMonth[user]
		case periods.Week:
			spent = byWeek[user]
		}
		f.members[user] = memberFigures{limit: admissionFigure(l.Limit), period: l.Period, spent: admissionFigure(spent),
			recorded: admissionFigure(byHeld[user])}
	}
	return nil
}

// apply takes in a snapshot newer than the one the figures come from: the balance, spend and
// recorded holds it read; the holds kept here that it shows recorded or metered go (it counts
// them), and so do those older than holdFor.
func (sp *spender) apply(f figures, holdFor time.Duration) {
	if !f.at.After(sp.loadedAt) {
		return
	}
	sp.loadedAt, sp.day, sp.balance, sp.recorded = f.at, f.day, f.balance, f.recorded
	sp.budget, sp.accountSpent, sp.members, sp.limited = f.budget, f.accountSpent, f.members, f.limited
	for k, v := range f.spent {
		sp.spent[k] = v
	}
	for k, p := range f.keyPeriod {
		sp.keyPeriod[k] = p
	}
	clear(sp.recordedByKey)
	for k, v := range f.byKey {
		sp.recordedByKey[k] = v
	}
	for _, id := range f.known {
		sp.release(id)
	}
	for id, h := range sp.held {
		if f.at.Sub(h.since) > holdFor {
			sp.release(id)
		}
	}
}

func (sp *spender) release(requestID string) {
	h, ok := sp.held[requestID]
	if !ok {
		return
	}
	delete(sp.held, requestID)
	sp.heldTotal -= h.amount
	if sp.heldByKey[h.key] -= h.amount; sp.heldByKey[h.key] == 0 {
		delete(sp.heldByKey, h.key)
	}
	if h.member != "" {
		if sp.heldByMember[h.member] -= h.amount; sp.heldByMember[h.member] == 0 {
			delete(sp.heldByMember, h.member)
		}
	}
}

// limitedKeys are the keys with a limit that the figures follow, with their limits' periods.
func (sp *spender) limitedKeys() map[string]periods.Period {
	return maps.Clone(sp.keyPeriod)
}

// mayBeLimited says whether the account may have a member limit or a budget: the last figures
// found one, or there are none yet.
func (sp *spender) mayBeLimited() bool {
	return sp.limited || sp.loadedAt.IsZero()
}

func (sp *spender) heldIDs() []string {
	ids := make([]string, 0, len(sp.held))
	for id := range sp.held {
		ids = append(ids, id)
	}
	return ids
}

// admissionBound is the largest balance or spend admission reads as it is: one beyond it,
// either way, is read as the bound. Every decision admission takes is the same for any figure
// past $4.6 million (a balance that far below zero refuses, one that far above admits), and
// the bound leaves room to add the held charges to it without overflowing.
const admissionBound = money.Pico(math.MaxInt64 / 2)

// admissionFigure is an amount as admission reads it, brought within ±admissionBound.
func admissionFigure(b money.BigPico) money.Pico {
	switch {
	case b.Cmp(money.BigPicoOf(admissionBound)) > 0:
		return admissionBound
	case b.Cmp(money.BigPicoOf(-admissionBound)) < 0:
		return -admissionBound
	}
	p, _ := b.Pico() // within the bound, it fits
	return p
}
