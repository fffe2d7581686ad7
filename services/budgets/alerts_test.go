package budgets

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// recorder keeps what the alerts queued, as the mail queue and the webhook outbox would.
type recorder struct {
	mu     sync.Mutex
	mails  []mail.Message
	events []string // type:id
}

func (r *recorder) Enqueue(_ context.Context, tx pgx.Tx, m mail.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mails = append(r.mails, m)
	return nil
}

func (r *recorder) Emit(_ context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventType+":"+eventID)
	return nil
}

var _ Mailer = (*recorder)(nil)
var _ Emitter = (*recorder)(nil)

// Each threshold of a key's daily limit fires once in its day, also after the evaluator
// restarts (new process state, same database), and again the next day.
func TestAlertsFireOncePerPeriodAndThreshold(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	org := fixtures.Account(t, pool, "Acme")
	dev := fixtures.User(t, pool, org, "dev@acme.test", "developer")
	fixtures.User(t, pool, org, "ops@acme.test", "developer")
	key := fixtures.APIKey(t, pool, org, dev, "ci")
	if _, err := pool.Exec(ctx, `UPDATE api_keys SET limit_pico = $2, limit_period = 'day' WHERE id = $1`, key, int64(money.PicoPerUSD)); err != nil {
		t.Fatal(err)
	}
	spend := func(amount money.Pico) {
		if _, err := pool.Exec(ctx, `INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico) VALUES ($1, $2::date, 1, $3)
			ON CONFLICT (api_key_id, day) DO UPDATE SET charge_pico = api_key_spend_days.charge_pico + EXCLUDED.charge_pico`,
			key, now.Format("2006-01-02"), int64(amount)); err != nil {
			t.Fatal(err)
		}
	}
	balance := money.BigPicoOf(10 * money.PicoPerUSD)
	rec := &recorder{}
	newAlerts := func() *Alerts {
		return NewAlerts(AlertsConfig{Pool: pool, Accounts: acc, Mail: rec, Events: rec, Now: clock,
			Balance: func(context.Context, string) (money.BigPico, error) { return balance, nil }})
	}
	svc := NewService(pool, acc, clock)
	below := 5 * money.PicoPerUSD
	if err := svc.SetCreditLowAlert(ctx, org, &below); err != nil {
		t.Fatal(err)
	}
	evaluate := func(a *Alerts, want int) {
		t.Helper()
		n, err := a.Evaluate(ctx)
		if err != nil || n != want {
			t.Fatalf("Evaluate at %s fired %d, %v; want %d", now, n, err, want)
		}
	}
	a := newAlerts()
	spend(money.PicoPerUSD * 49 / 100)
	evaluate(a, 0)
	spend(money.PicoPerUSD / 100) // 50 %
	evaluate(a, 1)
	evaluate(a, 0)
	spend(money.PicoPerUSD * 45 / 100) // 95 %: 80 % fires, 50 % not again
	evaluate(a, 1)
	evaluate(newAlerts(), 0) // a restarted evaluator fires nothing twice
	spend(money.PicoPerUSD * 10 / 100)
	evaluate(newAlerts(), 1) // 100 %
	if len(rec.mails) != 3 || len(rec.events) != 3 {
		t.Fatalf("queued %d e-mails and %d events; want 3 of each", len(rec.mails), len(rec.events))
	}
	for i, m := range rec.mails {
		if len(m.To) != 1 || m.To[0] != "dev@acme.test" || m.Key != "alert:"+rec.events[i][len(EventBudgetThreshold)+1:] {
			t.Errorf("e-mail %d: to %v, key %q; want the key's creator only, keyed by the firing (%s)", i, m.To, m.Key, rec.events[i])
		}
	}
	var firings int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM alert_firings WHERE rule = $1`, "key:"+key).Scan(&firings); err != nil || firings != 3 {
		t.Fatalf("%d firing rows, %v; want 3", firings, err)
	}

	// The next day the spend starts again from nothing, and its thresholds fire anew.
	now = periods.Day.End(now).Add(time.Hour)
	spend(money.PicoPerUSD * 60 / 100)
	evaluate(newAlerts(), 1)

	// The balance alert goes to the account's people, once a month.
	balance = money.BigPicoOf(4 * money.PicoPerUSD)
	rec.mails = nil
	evaluate(a, 1)
	evaluate(newAlerts(), 0)
	if len(rec.mails) != 1 || len(rec.mails[0].To) != 2 {
		t.Fatalf("balance alert e-mails %+v; want one to both people of the account", rec.mails)
	}
	if got := rec.events[len(rec.events)-1]; got[:len(EventCreditLow)] != EventCreditLow {
		t.Fatalf("last event %s; want %s", got, EventCreditLow)
	}
	// Someone who chose not to be told is not.
	if err := svc.SetSubscription(ctx, org, dev, KindBudget, false); err != nil {
		t.Fatal(err)
	}
	rec.mails = nil
	spend(money.PicoPerUSD * 30 / 100) // 90 % on the new day: 80 % fires
	evaluate(newAlerts(), 1)
	if len(rec.mails) != 0 {
		t.Fatalf("an alert e-mailed %v after its only recipient unsubscribed", rec.mails[0].To)
	}

	// What fired in its period still running: the key's thresholds of the new day (not the
	// day before's) and the balance's of the month.
	fired, err := svc.FiredThisPeriod(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range fired {
		switch f.Limit {
		case "key":
			if f.Name != "ci" || f.Period != periods.Day || !f.FiredAt.Equal(now) {
				t.Errorf("a key's firing %+v", f)
			}
			got[fmt.Sprintf("key %d%%", f.Percent)] = true
		case "credit_low":
			if f.Below != money.BigPicoOf(below) || f.Spent != balance {
				t.Errorf("the balance's firing %+v", f)
			}
			got["credit_low"] = true
		default:
			t.Errorf("firing %+v", f)
		}
	}
	if len(fired) != 3 || !got["key 50%"] || !got["key 80%"] || !got["credit_low"] {
		t.Fatalf("fired this period: %+v; want the key's 50%% and 80%% of the day and the balance's", fired)
	}
}

// Without wiring, the evaluator runs: it records firings and delivers nothing.
func TestAlertsRunWithoutDelivery(t *testing.T) {
	pool := dbtest.New(t)
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewAlerts(AlertsConfig{Pool: pool, Accounts: acc}).Evaluate(context.Background()); err != nil {
		t.Fatal(err)
	}
}
