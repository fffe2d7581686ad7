package history

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/money"
)

// A customer's side of the history: its user, its API keys, and the credit it buys and is
// refunded, through credits.Credits and signed Stripe webhooks at their past times.

// customer is a history customer as the database holds it.
type customer struct {
	Customer
	user      accounts.User
	keys      map[string]string           // by workload key name: the API key's id
	purchases map[string]credits.Purchase // by Checkout Session id
	lastUsed  map[string]time.Time        // by API key id: the end of its latest request
}

// keyName is the name of a workload's API key: marked as the history's, so that no key of
// the customer's own is taken for it.
func keyName(w Workload) string { return w.Key + " (demo history)" }

func (h *history) openCustomer(ctx context.Context, c Customer) (*customer, error) {
	u, err := h.accounts.UserByEmail(ctx, c.Email)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (seed the demo first)", c.Email, err)
	}
	cs := &customer{Customer: c, user: u, keys: map[string]string{}, purchases: map[string]credits.Purchase{},
		lastUsed: map[string]time.Time{}}
	keys, err := h.accounts.Keys(ctx, u.AccountID)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		cs.keys[k.Name] = k.ID
	}
	for _, w := range c.Workloads {
		if _, ok := cs.keys[keyName(w)]; ok {
			continue
		}
		// A key the history makes was made when its traffic began.
		h.clock.set(h.start)
		k, _, err := h.accounts.CreateKey(ctx, u, accounts.NewKeyInput{Name: keyName(w), DefaultTier: string(w.Tier)})
		if err != nil {
			return nil, err
		}
		cs.keys[k.Name] = k.ID
	}
	purchases, err := h.credits.Purchases(ctx, u.AccountID, 100)
	if err != nil {
		return nil, err
	}
	for _, p := range purchases {
		if p.StripeSessionID != "" {
			cs.purchases[p.StripeSessionID] = p
		}
	}
	return cs, nil
}

// creditMove is credit bought or refunded, at the moment the ledger took it.
type creditMove struct {
	at     time.Time
	amount money.Pico // negative for a refund
}

// creditMoves makes the day's purchase and refund of the customer, by its rules, and returns
// them; opening is the customer's balance as the day began.
func (h *history) creditMoves(ctx context.Context, c *customer, day time.Time, opening money.BigPico, res *Result) ([]creditMove, error) {
	var moves []creditMove
	if c.buysOn(day, opening) {
		m, bought, err := h.buy(ctx, c, day.Add(buyAt))
		if err != nil {
			return nil, err
		}
		if bought {
			moves = append(moves, m)
			res.Purchases++
		}
	}
	if m, refunded, err := h.refund(ctx, c, day); err != nil {
		return nil, err
	} else if refunded {
		moves = append(moves, m)
		res.Refunds++
	}
	return moves, nil
}

// buysOn reports whether the customer buys credit on the day, by its rules.
func (c *customer) buysOn(day time.Time, opening money.BigPico) bool {
	if c.Once {
		return len(c.purchases) == 0
	}
	return opening.Sign() <= 0 || (!weekend(day) && opening.Cmp(money.BigPicoOf(c.TopUpBelow)) < 0)
}

// sessionID names the Checkout Session of the customer's purchase on a day: one a day at most,
// the same on every run.
func sessionID(accountID string, day time.Time) string {
	sum := sha256.Sum256([]byte("demo history checkout\x00" + accountID + "\x00" + day.Format(time.DateOnly)))
	return "cs_demo_" + hex.EncodeToString(sum[:12])
}

// paymentIntent names the payment of a Checkout Session of the history.
func paymentIntent(session string) string {
	return "pi_demo_" + strings.TrimPrefix(session, "cs_demo_")
}

// pastCheckout is the Checkout the history's purchases were made through: their sessions were
// paid in the past, so no payment provider is asked now. It names each session as sessionID
// does, by the customer and the simulated day.
type pastCheckout struct{ now func() time.Time }

var _ credits.Checkout = pastCheckout{}

func (c pastCheckout) CreateSession(_ context.Context, req credits.CheckoutRequest) (credits.CheckoutSession, error) {
	return credits.CheckoutSession{ID: sessionID(req.AccountID, c.now())}, nil
}

// buy buys the customer's top-up at at: the purchase is started as the buy form starts it, and
// credited by a signed checkout.session.completed handled by the platform's webhook code. It
// reports false when the day's purchase was credited by an earlier run.
func (h *history) buy(ctx context.Context, c *customer, at time.Time) (creditMove, bool, error) {
	session := sessionID(c.user.AccountID, at)
	p, started := c.purchases[session]
	if started && p.Status == credits.PurchasePaid {
		return creditMove{}, false, nil
	}
	h.clock.set(at)
	if !started {
		var err error
		if p, _, err = h.credits.Start(ctx, credits.StartInput{AccountID: c.user.AccountID, UserID: c.user.ID,
			AmountCents: c.TopUpCents, ReturnURL: "/credits", CancelURL: "/credits"}); err != nil {
			return creditMove{}, false, err
		}
	}
	h.clock.set(at.Add(checkoutTakes))
	payload := credits.CheckoutEvent("evt_"+strings.TrimPrefix(session, "cs_")+"_completed", "checkout.session.completed",
		p, "paid", paymentIntent(session), h.clock.now())
	if err := h.deliver(ctx, payload, "credited"); err != nil {
		return creditMove{}, false, err
	}
	p, err := h.credits.Purchase(ctx, c.user.AccountID, p.ID)
	if err != nil {
		return creditMove{}, false, err
	}
	c.purchases[session] = p
	return creditMove{at: h.clock.now(), amount: money.Pico(p.AmountCents) * money.PicoPerCent}, true, nil
}

// refund refunds RefundCents of the customer's first purchase in the history on the day
// RefundAfterDays after it, by a signed charge.refunded, unless that is refunded already.
func (h *history) refund(ctx context.Context, c *customer, day time.Time) (creditMove, bool, error) {
	if c.RefundCents == 0 {
		return creditMove{}, false, nil
	}
	var first *credits.Purchase
	for _, p := range c.purchases {
		if strings.HasPrefix(p.StripeSessionID, "cs_demo_") && p.Status == credits.PurchasePaid &&
			(first == nil || p.CreatedAt.Before(first.CreatedAt)) {
			first = &p
		}
	}
	if first == nil || first.RefundedCents >= c.RefundCents {
		return creditMove{}, false, nil
	}
	b := first.CreatedAt.UTC()
	if !day.Equal(time.Date(b.Year(), b.Month(), b.Day()+c.RefundAfterDays, 0, 0, 0, 0, time.UTC)) {
		return creditMove{}, false, nil
	}
	at := day.Add(refundAt)
	h.clock.set(at)
	payload := credits.RefundEvent("evt_"+strings.TrimPrefix(first.StripeSessionID, "cs_")+"_refunded", *first,
		paymentIntent(first.StripeSessionID), c.RefundCents, at)
	if err := h.deliver(ctx, payload, "refunded"); err != nil {
		return creditMove{}, false, err
	}
	p, err := h.credits.Purchase(ctx, c.user.AccountID, first.ID)
	if err != nil {
		return creditMove{}, false, err
	}
	c.purchases[p.StripeSessionID] = p
	return creditMove{at: at, amount: -money.Pico(c.RefundCents-first.RefundedCents) * money.PicoPerCent}, true, nil
}

// deliver hands a Stripe event to the webhook as Stripe sends it: signed now, as a delivery
// is, while the event itself carries its past time. The outcome must be the one wanted.
func (h *history) deliver(ctx context.Context, payload []byte, want string) error {
	outcome, err := h.webhook.Handle(ctx, payload, credits.SignEvent(payload, h.webhookKey, time.Now()))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(outcome, want) {
		return fmt.Errorf("a Stripe event of the history was not applied: %s", outcome)
	}
	return nil
}
