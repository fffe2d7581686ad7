package budgets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// Mailer queues an e-mail in the transaction that tells of it. The platform's mail queue
// implements it.
type Mailer interface {
	Enqueue(ctx context.Context, tx pgx.Tx, m mail.Message) error
}

// Emitter records a webhook event in the transaction that tells of it. The platform's webhook
// outbox implements it.
type Emitter interface {
	Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error
}

// The webhook event types an alert emits.
const (
	EventBudgetThreshold = "budget.threshold"
	EventCreditLow       = "credit.low"
)

// Subscription kinds: what a person may choose to be e-mailed about.
const (
	KindBudget    = "budget"
	KindCreditLow = "credit_low"
)

// AlertsConfig wires Alerts.
type AlertsConfig struct {
	Pool     *pgxpool.Pool
	Accounts *accounts.Service
	// Balance is an account's credit balance (credits.Credits.Balance's figure).
	Balance func(ctx context.Context, accountID string) (money.BigPico, error)
	// Mail and Events deliver an alert; nil delivers nothing that way (the firing is still
	// recorded, and logged).
	Mail   Mailer
	Events Emitter
	Now    func() time.Time // nil means time.Now
	Log    *slog.Logger     // nil means slog.Default()
}

// Alerts fires the budget and balance alerts: Evaluate compares each limit's spend in its
// period with its thresholds, and each "balance below" rule with the balance, and fires what
// was crossed and has not fired in the period.
type Alerts struct {
	cfg   AlertsConfig
	spend *metering.SpendReader
	// done are the firings this process saw recorded, so that it does not ask again each tick;
	// the database's unique firing row decides, so a new process asks once more and fires none
	// twice.
	done map[firingKey]bool
}

// maxRemembered is how many firings Alerts remembers before it forgets them all.
const maxRemembered = 100_000

type firingKey struct {
	account, rule string
	start         time.Time
	threshold     string
}

type nopDelivery struct{ log *slog.Logger }

func (n nopDelivery) Enqueue(_ context.Context, _ pgx.Tx, m mail.Message) error {
	n.log.Info("budgets: alert e-mail not sent: no mail queue is wired", "key", m.Key, "subject", m.Subject)
	return nil
}

func (n nopDelivery) Emit(_ context.Context, _ pgx.Tx, accountID, eventType, eventID string, _ any) error {
	n.log.Info("budgets: alert event not emitted: no webhook outbox is wired", "account", accountID, "type", eventType, "id", eventID)
	return nil
}

// NewAlerts returns the alert evaluator.
func NewAlerts(cfg AlertsConfig) *Alerts {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Mail == nil {
		cfg.Mail = nopDelivery{cfg.Log}
	}
	if cfg.Events == nil {
		cfg.Events = nopDelivery{cfg.Log}
	}
	return &Alerts{cfg: cfg, spend: metering.NewSpendReader(cfg.Pool), done: map[firingKey]bool{}}
}

// DefaultAlertEvery is how often Run evaluates the alerts.
const DefaultAlertEvery = 5 * time.Second

// Run evaluates the alerts every period until ctx ends.
func (a *Alerts) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultAlertEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := a.Evaluate(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn("budgets: evaluating alerts failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watched is one limit and its spend in the current period.
type watched struct {
	account    string
	rule       string // key:<id>, member:<user id>, account
	kind       string // key, member, account: what the event calls the limit
	id, name   string
	period     periods.Period
	limit      money.Pico
	spent      money.BigPico
	thresholds []int
	recipients []string // user ids the alert goes to by default
}

// ThresholdEvent is the data of a budget.threshold event.
type ThresholdEvent struct {
	Limit            string        `json:"limit"` // key, member or account
	ID               string        `json:"id"`    // the key's id, the member's user id, or the account's id
	Name             string        `json:"name"`  // the key's name, the member's e-mail, or "account budget"
	ThresholdPercent int           `json:"threshold_percent"`
	Period           string        `json:"period"`
	PeriodStart      time.Time     `json:"period_start"`
	ResetsAt         time.Time     `json:"resets_at"`
	SpendPico        money.BigPico `json:"spend_pico"`
	SpendUSD         string        `json:"spend_usd"`
	LimitPico        money.BigPico `json:"limit_pico"`
	LimitUSD         string        `json:"limit_usd"`
}

// CreditLowEvent is the data of a credit.low event.
type CreditLowEvent struct {
	BalancePico   money.BigPico `json:"balance_pico"`
	BalanceUSD    string        `json:"balance_usd"`
	ThresholdPico money.BigPico `json:"threshold_pico"`
	ThresholdUSD  string        `json:"threshold_usd"`
}

func usd(b money.BigPico) string { return strings.TrimPrefix(b.String(), "$") }

// picos is the amount as a whole number of picodollars in decimal.
func picos(b money.BigPico) string {
	raw, _ := b.MarshalJSON() // never fails
	return string(raw)
}

// Evaluate fires every alert crossed and not yet fired in its period, and returns how many fired.
// One Alerts evaluates one round at a time (Run); several processes may each run one.
func (a *Alerts) Evaluate(ctx context.Context) (fired int, err error) {
	defer services.Wrap(&err, "budgets.Alerts.Evaluate")
	if len(a.done) > maxRemembered {
		clear(a.done) // the firing rows decide; this only saves asking again
	}
	now := a.cfg.Now()
	ws, err := a.watchedLimits(ctx, now)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		for _, t := range w.thresholds {
			if !reached(w.spent, w.limit, t) {
				continue
			}
			start := w.period.Start(now)
			ev := ThresholdEvent{Limit: w.kind, ID: w.id, Name: w.name, ThresholdPercent: t, Period: string(w.period),
				PeriodStart: start, ResetsAt: w.period.End(now), SpendPico: w.spent, SpendUSD: usd(w.spent),
				LimitPico: money.BigPicoOf(w.limit), LimitUSD: usd(money.BigPicoOf(w.limit))}
			subject := fmt.Sprintf("%s has used %d%% of its %s limit", w.name, t, w.period.Adjective())
			if w.kind == "account" {
				subject = fmt.Sprintf("Your account has used %d%% of its monthly budget", t)
			}
			text := fmt.Sprintf("%s\n\nSpent this %s: $%s of $%s. The limit resets at %s.\n", subject, w.period,
				ev.SpendUSD, ev.LimitUSD, ev.ResetsAt.Format("15:04 UTC on Monday 2 January 2006"))
			ok, err := a.fire(ctx, w.account, w.rule, start, fmt.Sprint(t), w.spent, KindBudget, w.recipients,
				subject, text, EventBudgetThreshold, ev)
			if err != nil {
				return fired, err
			}
			if ok {
				fired++
			}
		}
	}
	n, err := a.creditLow(ctx, now)
	return fired + n, err
}

// reached reports whether spent is at least pct % of limit.
func reached(spent money.BigPico, limit money.Pico, pct int) bool {
	s, ok := new(big.Int).SetString(picos(spent), 10)
	if !ok {
		return false
	}
	s.Mul(s, big.NewInt(100))
	l := new(big.Int).Mul(big.NewInt(int64(limit)), big.NewInt(int64(pct)))
	return s.Cmp(l) >= 0
}

// watchedLimits are every key limit, member limit and account budget with its spend now.
func (a *Alerts) watchedLimits(ctx context.Context, now time.Time) ([]watched, error) {
	limited, err := a.cfg.Accounts.LimitedKeys(ctx)
	if err != nil {
		return nil, err
	}
	// A key's own thresholds (subject: the key's id), else its account's for every key (subject
	// ''), else the default.
	keyRules, accountKeyRules := map[string][]int{}, map[string][]int{}
	rows, err := a.cfg.Pool.Query(ctx, `SELECT account_id::text, subject, thresholds FROM alert_rules WHERE kind = 'key'`)
	if err != nil {
		return nil, err
	}
	if err := forEach(rows, func(r pgx.Rows) error {
		var account, id string
		var t []int16
		err := r.Scan(&account, &id, &t)
		if id == "" {
			accountKeyRules[account] = ints(t)
		} else {
			keyRules[id] = ints(t)
		}
		return err
	}); err != nil {
		return nil, err
	}
	type limitRow struct {
		account, user string
		limit         money.Pico
		period        periods.Period
		thresholds    []int
	}
	var members, budgets []limitRow
	rows, err = a.cfg.Pool.Query(ctx, `SELECT account_id::text, user_id::text, limit_pico::bigint, period, alert_thresholds FROM member_limits
		UNION ALL SELECT account_id::text, '', limit_pico::bigint, 'month', alert_thresholds FROM account_budgets`)
	if err != nil {
		return nil, err
	}
	if err := forEach(rows, func(r pgx.Rows) error {
		var l limitRow
		var t []int16
		err := r.Scan(&l.account, &l.user, &l.limit, &l.period, &t)
		l.thresholds = ints(t)
		if l.user == "" {
			budgets = append(budgets, l)
		} else {
			members = append(members, l)
		}
		return err
	}); err != nil {
		return nil, err
	}
	// The keys of the accounts with a member limit or a budget, revoked ones too: what they
	// spent in the period counts.
	byAccount := map[string][]accounts.APIKey{}
	ids := keyIDs(limited)
	for _, l := range slices.Concat(members, budgets) {
		if _, ok := byAccount[l.account]; ok {
			continue
		}
		keys, err := a.cfg.Accounts.Keys(ctx, l.account)
		if err != nil {
			return nil, err
		}
		byAccount[l.account] = keys
		ids = append(ids, keyIDs(keys)...)
	}
	spend, err := a.spend.KeySpend(ctx, ids, now)
	if err != nil {
		return nil, err
	}
	var out []watched
	for _, k := range limited {
		t := keyRules[k.ID]
		if t == nil {
			t = accountKeyRules[k.AccountID]
		}
		if t == nil {
			t = DefaultThresholds
		}
		out = append(out, watched{account: k.AccountID, rule: "key:" + k.ID, kind: "key", id: k.ID, name: "The API key " + k.Name,
			period: k.LimitPeriod, limit: *k.Limit, spent: spend[k.ID].In(k.LimitPeriod), thresholds: t,
			recipients: []string{k.CreatedBy}})
	}
	emails := map[string]string{}
	for _, l := range members {
		users, err := a.cfg.Accounts.UsersOfAccount(ctx, l.account)
		if err != nil {
			return nil, err
		}
		for _, u := range users {
			emails[u.ID] = u.Email
		}
		out = append(out, watched{account: l.account, rule: "member:" + l.user, kind: "member", id: l.user, name: emails[l.user],
			period: l.period, limit: l.limit, thresholds: l.thresholds, recipients: []string{l.user},
			spent: spentBy(byAccount[l.account], spend, l.period, func(k accounts.APIKey) bool { return k.CreatedBy == l.user })})
	}
	for _, l := range budgets {
		out = append(out, watched{account: l.account, rule: "account", kind: "account", id: l.account, name: "account budget",
			period: periods.Month, limit: l.limit, thresholds: l.thresholds,
			spent: spentBy(byAccount[l.account], spend, periods.Month, func(accounts.APIKey) bool { return true })})
	}
	return out, nil
}

// creditLow fires each "balance below" rule whose account's balance is under it, once a month.
func (a *Alerts) creditLow(ctx context.Context, now time.Time) (fired int, err error) {
	if a.cfg.Balance == nil {
		return 0, nil
	}
	rows, err := a.cfg.Pool.Query(ctx, `SELECT account_id::text, below_pico::bigint FROM alert_rules WHERE kind = 'credit_low'`)
	if err != nil {
		return 0, err
	}
	type rule struct {
		account string
		below   money.Pico
	}
	var rules []rule
	if err := forEach(rows, func(r pgx.Rows) error {
		var x rule
		err := r.Scan(&x.account, &x.below)
		rules = append(rules, x)
		return err
	}); err != nil {
		return 0, err
	}
	for _, r := range rules {
		start := periods.Month.Start(now)
		if a.done[firingKey{r.account, "credit_low", start, fmt.Sprint(int64(r.below))}] {
			continue
		}
		bal, err := a.cfg.Balance(ctx, r.account)
		if err != nil {
			return fired, err
		}
		below := money.BigPicoOf(r.below)
		if bal.Cmp(below) >= 0 {
			continue
		}
		ev := CreditLowEvent{BalancePico: bal, BalanceUSD: usd(bal), ThresholdPico: below, ThresholdUSD: usd(below)}
		subject := fmt.Sprintf("Your gpumarket balance is below $%s", ev.ThresholdUSD)
		text := fmt.Sprintf("%s: it is $%s. Buy credits on the Credits page so that your API keys keep working.\n", subject, ev.BalanceUSD)
		ok, err := a.fire(ctx, r.account, "credit_low", start, fmt.Sprint(int64(r.below)), bal, KindCreditLow, nil,
			subject, text, EventCreditLow, ev)
		if err != nil {
			return fired, err
		}
		if ok {
			fired++
		}
	}
	return fired, nil
}

// fire records a firing and, in the same transaction, queues its e-mail and its webhook event;
// ok is false when the firing was recorded before (by this process or another, before a
// restart or not), and then nothing is queued.
func (a *Alerts) fire(ctx context.Context, accountID, rule string, start time.Time, threshold string, spend money.BigPico,
	kind string, defaults []string, subject, text, eventType string, data any) (ok bool, err error) {
	defer services.Wrap(&err, "budgets.Alerts.fire(%s, %s, %s)", accountID, rule, threshold)
	key := firingKey{accountID, rule, start, threshold}
	if a.done[key] {
		return false, nil
	}
	to, err := a.recipients(ctx, accountID, kind, defaults)
	if err != nil {
		return false, err
	}
	err = pgx.BeginFunc(ctx, a.cfg.Pool, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `
			INSERT INTO alert_firings (account_id, rule, period_start, threshold, spend_pico, fired_at)
			VALUES ($1, $2, $3, $4::numeric, $5::numeric, $6)
			ON CONFLICT (account_id, rule, period_start, threshold) DO NOTHING RETURNING id::text`,
			accountID, rule, start, threshold, picos(spend), a.cfg.Now().UTC()).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(to) > 0 {
			if err := a.cfg.Mail.Enqueue(ctx, tx, mail.Message{Key: "alert:" + id, To: to, Subject: subject, Text: text}); err != nil {
				return err
			}
		}
		if err := a.cfg.Events.Emit(ctx, tx, accountID, eventType, id, data); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, err
	}
	a.done[key] = true
	return ok, nil
}

// recipients are the e-mail addresses of the account's people who get an alert of the kind:
// the defaults (for an account-wide alert, every person of the account) unless they chose not
// to, and whoever chose to.
func (a *Alerts) recipients(ctx context.Context, accountID, kind string, defaults []string) ([]string, error) {
	users, err := a.cfg.Accounts.UsersOfAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	subs, err := subscriptionsOf(ctx, a.cfg.Pool, accountID)
	if err != nil {
		return nil, err
	}
	var to []string
	for _, u := range users {
		want := defaults == nil || slices.Contains(defaults, u.ID)
		if chose, ok := subs[kind][u.ID]; ok {
			want = chose
		}
		if want {
			to = append(to, u.Email)
		}
	}
	return to, nil
}

func forEach(rows pgx.Rows, f func(pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
