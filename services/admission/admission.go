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
	"github.com/gpumarket/gpumarket/services/catalog"
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
// kept here are recorded or metered are read in one statement, so from one snapshot: every
// ended request is counted once, either in the balance or as a hold, however stale the cached
// figures are. A hold lasts until the meter bills its request, or until the meter would no
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
		snap, err := a.load(ctx, in.AccountID, keys, sp.heldIDs(), now)
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
	keys, held := sp.limitedKeys(), sp.heldIDs()
	sp.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.background, 5*time.Second)
	defer cancel()
	snap, err := a.load(ctx, accountID, keys, held, a.cfg.Now())
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
	members  map[string]memberFigures
	// budget is the account's monthly budget, nil for none, and accountSpent what its keys
	// spent this month.
	budget       *money.Pico
	accountSpent money.Pico
}

// load reads the account's balance, its limited keys' spend in their periods, its recorded holds
// and which of the held request ids are recorded or metered, in one statement and so from one
// snapshot; then, only for an account with a member limit or a budget, those (loadBudgets). A
// key's spend is one row of api_key_spend for a month, one row of api_key_spend_days for a day
// and at most seven for a week. A recorded hold counts until it expires, unless its request is
// metered: the meter deletes the hold as it bills, and a hold recorded after its request was
// metered (a record written late) counts for nothing. The statement is planned for each call
// (QueryExecModeExec): a plan cached while usage_events was nearly empty scans the whole table
// for the held ids, and keeps doing so as it grows until the next ANALYZE.
func (a *Admission) load(ctx context.Context, accountID string, keys map[string]periods.Period, held []string, now time.Time) (f figures, err error) {
	defer services.Wrap(&err, "admission.Admission.load(%s)", accountID)
	f = figures{at: now, day: periods.Day.Start(now), spent: make(map[string]money.Pico, len(keys)),
		byKey: make(map[string]money.Pico, len(keys)), members: map[string]memberFigures{}, keyPeriod: keys}
	ids, kinds := make([]string, 0, len(keys)), make([]string, 0, len(keys))
	for id, p := range keys {
		ids, kinds = append(ids, id), append(kinds, string(p))
	}
	var limited bool
	rows, err := a.cfg.Pool.Query(ctx, `
		WITH holds AS (
			SELECT h.api_key_id, h.amount_pico FROM admission_holds h
			WHERE h.account_id = $1::uuid AND h.expires_at > $5
				AND NOT EXISTS (SELECT 1 FROM usage_event_keys u WHERE u.request_id = h.request_id))
		SELECT b.balance, m.known, (SELECT coalesce(sum(amount_pico), 0) FROM holds),
			EXISTS (SELECT 1 FROM member_limits WHERE account_id = $1::uuid)
				OR EXISTS (SELECT 1 FROM account_budgets WHERE account_id = $1::uuid),
			k.id, k.spent, (SELECT coalesce(sum(amount_pico), 0) FROM holds WHERE holds.api_key_id = k.id)
		FROM (SELECT (SELECT balance FROM ledger_accounts WHERE kind = 'customer_credit' AND owner_account_id = $1::uuid) AS balance) b
		CROSS JOIN (SELECT ARRAY(SELECT request_id FROM usage_event_keys WHERE request_id = ANY($4::text[])
			UNION SELECT request_id FROM admission_holds WHERE request_id = ANY($4::text[])) AS known) m
		LEFT JOIN LATERAL (
			SELECT id, CASE period
					WHEN 'day' THEN coalesce((SELECT charge_pico FROM api_key_spend_days d WHERE d.api_key_id = id AND d.day = $7::date), 0)
					WHEN 'week' THEN coalesce((SELECT sum(charge_pico) FROM api_key_spend_days d WHERE d.api_key_id = id
						AND d.day >= $8::date AND d.day < $8::date + 7), 0)
					ELSE coalesce((SELECT charge_pico FROM api_key_spend s WHERE s.api_key_id = id AND s.month = $3), 0) END AS spent
			FROM unnest($2::text[], $6::text[]) AS k(id, period)) k ON true`,
		pgx.QueryExecModeExec, accountID, ids, periods.Month.Start(now), held, now, kinds, f.day, periods.Week.Start(now))
	if err != nil {
		return figures{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var balance, recorded, spent, keyHeld pgtype.Numeric
		var key pgtype.Text
		if err := rows.Scan(&balance, &f.known, &recorded, &limited, &key, &spent, &keyHeld); err != nil {
			return figures{}, err
		}
		if balance.Valid {
			if f.balance, err = admissionFigure(balance); err != nil {
				return figures{}, err
			}
		}
		if f.recorded, err = admissionFigure(recorded); err != nil {
			return figures{}, err
		}
		if key.Valid {
			if f.spent[key.String], err = admissionFigure(spent); err != nil {
				return figures{}, err
			}
			if f.byKey[key.String], err = admissionFigure(keyHeld); err != nil {
				return figures{}, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return figures{}, err
	}
	if !limited {
		return f, nil
	}
	return f, a.loadBudgets(ctx, accountID, now, &f)
}

// loadBudgets reads the account's member limits and monthly budget with their spend and the
// holds of each member's keys. It runs after load's statement, only for an account that has
// either: a request the meter billed in between is then counted twice (as a hold there and as
// spend here) until the next read, never missed.
func (a *Admission) loadBudgets(ctx context.Context, accountID string, now time.Time, f *figures) (err error) {
	defer services.Wrap(&err, "admission.Admission.loadBudgets(%s)", accountID)
	rows, err := a.cfg.Pool.Query(ctx, `
		WITH holds AS (
			SELECT h.api_key_id, h.amount_pico FROM admission_holds h
			WHERE h.account_id = $1::uuid AND h.expires_at > $2
				AND NOT EXISTS (SELECT 1 FROM usage_event_keys u WHERE u.request_id = h.request_id)),
		owned AS (SELECT id::text AS id, created_by::text AS created_by FROM api_keys WHERE account_id = $1::uuid),
		month AS (SELECT o.created_by, s.charge_pico FROM api_key_spend s JOIN owned o ON s.api_key_id = o.id WHERE s.month = $3),
		days AS (SELECT o.created_by, d.day, d.charge_pico FROM api_key_spend_days d JOIN owned o ON d.api_key_id = o.id
			WHERE d.day >= least($4::date, $5::date) AND d.day < $5::date + 7)
		SELECT NULL::text, b.limit_pico, 'month', (SELECT coalesce(sum(charge_pico), 0) FROM month), 0
		FROM account_budgets b WHERE b.account_id = $1::uuid
		UNION ALL
		SELECT l.user_id::text, l.limit_pico, l.period, CASE l.period
				WHEN 'month' THEN (SELECT coalesce(sum(charge_pico), 0) FROM month WHERE created_by = l.user_id::text)
				WHEN 'week' THEN (SELECT coalesce(sum(charge_pico), 0) FROM days WHERE created_by = l.user_id::text AND day >= $4::date)
				ELSE (SELECT coalesce(sum(charge_pico), 0) FROM days WHERE created_by = l.user_id::text AND day = $5::date) END,
			(SELECT coalesce(sum(h.amount_pico), 0) FROM holds h JOIN owned o ON h.api_key_id = o.id WHERE o.created_by = l.user_id::text)
		FROM member_limits l WHERE l.account_id = $1::uuid`,
		accountID, now, periods.Month.Start(now), periods.Week.Start(now), periods.Day.Start(now))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var user pgtype.Text
		var limit, spent, held pgtype.Numeric
		var period string
		if err := rows.Scan(&user, &limit, &period, &spent, &held); err != nil {
			return err
		}
		l, err := admissionFigure(limit)
		if err != nil {
			return err
		}
		s, err := admissionFigure(spent)
		if err != nil {
			return err
		}
		if !user.Valid {
			f.budget, f.accountSpent = &l, s
			continue
		}
		h, err := admissionFigure(held)
		if err != nil {
			return err
		}
		f.members[user.String] = memberFigures{limit: l, period: periods.Period(period), spent: s, recorded: h}
	}
	return rows.Err()
}

// apply takes in a snapshot newer than the one the figures come from: the balance, spend and
// recorded holds it read; the holds kept here that it shows recorded or metered go (it counts
// them), and so do those older than holdFor.
func (sp *spender) apply(f figures, holdFor time.Duration) {
	if !f.at.After(sp.loadedAt) {
		return
	}
	sp.loadedAt, sp.day, sp.balance, sp.recorded = f.at, f.day, f.balance, f.recorded
	sp.budget, sp.accountSpent, sp.members = f.budget, f.accountSpent, f.members
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

// admissionFigure reads a NUMERIC amount for admission, brought within ±admissionBound.
func admissionFigure(n pgtype.Numeric) (money.Pico, error) {
	v, err := n.Value()
	if err != nil {
		return 0, err
	}
	var b money.BigPico
	if err := b.Scan(v); err != nil {
		return 0, err
	}
	switch {
	case b.Cmp(money.BigPicoOf(admissionBound)) > 0:
		return admissionBound, nil
	case b.Cmp(money.BigPicoOf(-admissionBound)) < 0:
		return -admissionBound, nil
	}
	return b.Pico()
}
