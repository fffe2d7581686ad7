package credits

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/ledger"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/gpumarket/gpumarket/services"
)

// SignatureTolerance is how old a webhook's signed timestamp may be.
const SignatureTolerance = 300 * time.Second

// ErrBadSignature is returned for a webhook whose signature does not verify; nothing is
// stored or changed.
var ErrBadSignature = errors.New("credits: the Stripe-Signature does not verify")

// StripeWebhook turns Stripe's events into credits, exactly once.
//
// Decisions (docs/failure-cases.md, cases 9-12):
//   - Only a Checkout Session grants credit: checkout.session.completed with
//     payment_status=paid, or checkout.session.async_payment_succeeded. The grant is keyed by
//     the purchase, so however many events say "paid", in any order and however often, one
//     ledger transaction is posted. payment_intent.succeeded and charge.succeeded grant
//     nothing.
//   - The grant is what the platform recorded when the buyer started: the purchase's account
//     and amount. An event whose session disagrees (another account, another amount) grants
//     nothing and is kept with the problem for review.
//   - checkout.session.expired marks a pending purchase expired, once; it grants nothing, and
//     a purchase already paid or failed stays as it is (docs/failure-cases.md, case 35).
//   - charge.refunded carries the charge's cumulative amount_refunded; the ledger takes back
//     the part not yet taken back, keyed by that cumulative amount, so partial refunds add up
//     and a late or repeated event moves nothing. A balance may go negative.
//   - Every event that verifies is stored with its raw body, whatever its type; a redelivery
//     counts a delivery. Types handed to another service with On are applied by it; other
//     types are acknowledged and ignored.
type StripeWebhook struct {
	credits  *Credits
	secrets  []string
	handlers map[stripe.EventType]EventHandler
	topups   *AutoTopup // nil applies no auto top-up event (WithAutoTopup)
}

// NewStripeWebhook verifies with any of the secrets, so that a secret can be rotated.
func NewStripeWebhook(credits *Credits, secrets []string) *StripeWebhook {
	return &StripeWebhook{credits: credits, secrets: secrets, handlers: map[stripe.EventType]EventHandler{}}
}

// EventHandler applies a verified event of a type another service owns (payouts applies
// account.updated). It runs inside the database transaction that stores the event, so the
// event's record and its effect commit together; its outcome is kept beside the event.
type EventHandler func(ctx context.Context, tx pgx.Tx, ev stripe.Event) (outcome string, err error)

// On hands the events of one type, once verified and stored, to h. Call it while wiring, before
// the first event arrives; the types the webhook applies itself (checkout sessions, refunds)
// are not handed on.
func (w *StripeWebhook) On(eventType stripe.EventType, h EventHandler) {
	w.handlers[eventType] = h
}

// Handle verifies the raw body against its Stripe-Signature header, stores the event, and
// applies it. It returns what it did, for the log and the audit table.
func (w *StripeWebhook) Handle(ctx context.Context, payload []byte, signature string) (outcome string, err error) {
	event, err := w.verify(payload, signature)
	if err != nil {
		return "", err
	}
	defer services.Wrap(&err, "credits.StripeWebhook.Handle(%s %s)", event.Type, event.ID)
	c := w.credits
	subj, err := w.subjectOf(ctx, event)
	if err != nil {
		return "", err
	}
	now := c.now().UTC()
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO stripe_events (id, type, payload, first_received_at, last_received_at)
			VALUES ($1, $2, $3, $4, $4)
			ON CONFLICT (id) DO UPDATE SET deliveries = stripe_events.deliveries + 1, last_received_at = $4`,
			event.ID, string(event.Type), payload, now); err != nil {
			return err
		}
		var err error
		outcome, err = w.apply(ctx, tx, event, subj)
		if err != nil {
			return err
		}
		// The audit keeps what the first delivery did; redeliveries only count.
		_, err = tx.Exec(ctx, `UPDATE stripe_events SET outcome = $2 WHERE id = $1 AND outcome = ''`, event.ID, outcome)
		return err
	})
	return outcome, err
}

func (w *StripeWebhook) verify(payload []byte, signature string) (stripe.Event, error) {
	for _, secret := range w.secrets {
		if secret == "" {
			continue
		}
		ev, err := webhook.ConstructEventWithOptions(payload, signature, secret, webhook.ConstructEventOptions{
			Tolerance: SignatureTolerance, IgnoreAPIVersionMismatch: true,
		})
		if err == nil {
			if ev.ID == "" || ev.Type == "" {
				return stripe.Event{}, fmt.Errorf("%w: the event has no id or type", ErrBadSignature)
			}
			return ev, nil
		}
	}
	return stripe.Event{}, ErrBadSignature
}

// The parts of Stripe objects the platform reads, decoded from the event as it came.
type sessionObject struct {
	ID                string            `json:"id"`
	ClientReferenceID string            `json:"client_reference_id"`
	AmountTotal       int64             `json:"amount_total"`
	Currency          string            `json:"currency"`
	PaymentStatus     string            `json:"payment_status"`
	PaymentIntent     json.RawMessage   `json:"payment_intent"`
	Metadata          map[string]string `json:"metadata"`
	// A session in setup mode saves a card for auto top-up: it names its customer and the
	// SetupIntent that saved the card (topup_webhook.go).
	Mode        string          `json:"mode"`
	Customer    json.RawMessage `json:"customer"`
	SetupIntent json.RawMessage `json:"setup_intent"`
}

type chargeObject struct {
	ID             string            `json:"id"`
	AmountRefunded int64             `json:"amount_refunded"`
	PaymentIntent  json.RawMessage   `json:"payment_intent"`
	Metadata       map[string]string `json:"metadata"`
}

// idOf reads an expandable Stripe field: a string id, or an object with an id.
func idOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.ID
}

// subject is what an event is about: the Stripe object it carries, how to find the purchase
// it names, and the ledger accounts that a credit or refund of that purchase moves.
type subject struct {
	session    sessionObject
	charge     chargeObject
	unreadable string // why the object could not be decoded; "" when it was
	find       purchaseRef
	// The purchase's organisation as first read, and its ledger accounts; empty when no
	// purchase was found.
	accountID          string
	customer, clearing ledger.LedgerAccountID
	// topup is an auto top-up event's subject (topup_webhook.go).
	topup topupSubject
}

// purchaseRef finds the purchase an event is about: by the Stripe id it carries in column,
// else by the purchase id the platform put in its metadata.
type purchaseRef struct {
	column, stripeID, purchaseID string
}

// subjectOf decodes the object of an event about a purchase and opens the ledger accounts a
// credit or refund of that purchase moves. It runs before the event's database transaction
// opens, because AccountFor takes a pool connection of its own: a delivery that waited for a
// second connection while its transaction held one would deadlock whenever as many
// deliveries as the pool has connections arrived at once.
func (w *StripeWebhook) subjectOf(ctx context.Context, ev stripe.Event) (subject, error) {
	var s subject
	switch ev.Type {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded", "checkout.session.async_payment_failed",
		eventSessionExpired:
		if err := json.Unmarshal(ev.Data.Raw, &s.session); err != nil {
			s.unreadable = "unreadable session: " + err.Error()
			return s, nil
		}
		if s.session.Mode == "setup" {
			return s, w.setupSessionSubjectOf(ctx, &s)
		}
		s.find = purchaseRef{"stripe_session_id", s.session.ID, s.session.Metadata["purchase_id"]}
	case "charge.refunded":
		if err := json.Unmarshal(ev.Data.Raw, &s.charge); err != nil {
			s.unreadable = "unreadable charge: " + err.Error()
			return s, nil
		}
		s.find = purchaseRef{"stripe_payment_intent", idOf(s.charge.PaymentIntent), s.charge.Metadata["purchase_id"]}
	case eventIntentSucceeded, eventIntentFailed, eventSetupSucceeded:
		return s, w.topupSubjectOf(ctx, ev, &s)
	default:
		return s, nil
	}
	p, ok, err := findPurchase(ctx, w.credits.pool, s.find, false)
	if err != nil || !ok {
		return s, err
	}
	s.accountID = p.AccountID
	if s.customer, err = w.credits.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, p.AccountID); err != nil {
		return s, err
	}
	s.clearing, err = w.credits.ledger.AccountFor(ctx, ledger.AccountStripeClearing, "")
	return s, err
}

func (w *StripeWebhook) apply(ctx context.Context, tx pgx.Tx, ev stripe.Event, s subject) (string, error) {
	switch ev.Type {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded", "checkout.session.async_payment_failed",
		eventSessionExpired:
		if s.unreadable != "" {
			return s.unreadable, nil
		}
		if s.session.Mode == "setup" {
			if s.topup.found {
				return w.applyTopup(ctx, tx, ev, s)
			}
			return "ignored: setup session " + s.session.ID + " saves no card for auto top-up", nil
		}
		p, ok, err := w.purchaseFor(ctx, tx, s)
		if err != nil || !ok {
			return "no purchase for session " + s.session.ID, err
		}
		if pi := idOf(s.session.PaymentIntent); pi != "" {
			if _, err := tx.Exec(ctx, `UPDATE credit_purchases SET stripe_payment_intent = $2 WHERE id = $1`, p.ID, pi); err != nil {
				return "", err
			}
		}
		switch {
		case ev.Type == eventSessionExpired:
			return w.markExpired(ctx, tx, p)
		case ev.Type == "checkout.session.async_payment_failed":
			return w.markFailed(ctx, tx, p)
		case ev.Type == "checkout.session.completed" && s.session.PaymentStatus != "paid":
			return w.markAwaiting(ctx, tx, p)
		default:
			return w.credit(ctx, tx, p, s)
		}
	case "charge.refunded":
		if s.unreadable != "" {
			return s.unreadable, nil
		}
		p, ok, err := w.purchaseFor(ctx, tx, s)
		if err != nil || !ok {
			return "no purchase for charge " + s.charge.ID, err
		}
		return w.refund(ctx, tx, p, s)
	}
	if s.topup.found {
		return w.applyTopup(ctx, tx, ev, s)
	}
	if h := w.handlers[ev.Type]; h != nil {
		return h(ctx, tx, ev)
	}
	return "ignored", nil
}

type lockedPurchase struct {
	ID, AccountID, Status      string
	AmountCents, RefundedCents int64
}

// errPurchaseAppeared: the event's purchase was found only once its transaction had begun,
// so its ledger accounts were not opened. The delivery fails and Stripe sends it again.
var errPurchaseAppeared = errors.New("credits: the purchase appeared while the event was being read; it will be applied on redelivery")

// purchaseFor finds and locks the purchase an event is about.
func (w *StripeWebhook) purchaseFor(ctx context.Context, tx pgx.Tx, s subject) (lockedPurchase, bool, error) {
	p, ok, err := findPurchase(ctx, tx, s.find, true)
	if ok && p.AccountID != s.accountID {
		return p, false, errPurchaseAppeared
	}
	return p, ok, err
}

// findPurchase reads the purchase ref names, locking it when lock is set.
func findPurchase(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, ref purchaseRef, lock bool) (lockedPurchase, bool, error) {
	var p lockedPurchase
	query := `SELECT id, account_id, status, amount_cents, refunded_cents FROM credit_purchases WHERE `
	suffix := ""
	if lock {
		suffix = ` FOR UPDATE`
	}
	err := pgx.ErrNoRows
	if ref.stripeID != "" {
		err = q.QueryRow(ctx, query+ref.column+` = $1`+suffix, ref.stripeID).
			Scan(&p.ID, &p.AccountID, &p.Status, &p.AmountCents, &p.RefundedCents)
	}
	if errors.Is(err, pgx.ErrNoRows) && services.CanonicalUUID(ref.purchaseID) {
		err = q.QueryRow(ctx, query+`id = $1`+suffix, ref.purchaseID).
			Scan(&p.ID, &p.AccountID, &p.Status, &p.AmountCents, &p.RefundedCents)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	return p, err == nil, err
}

func (w *StripeWebhook) credit(ctx context.Context, tx pgx.Tx, p lockedPurchase, subj subject) (string, error) {
	s := subj.session
	if p.Status == string(PurchasePaid) {
		return "already credited", nil
	}
	if s.ClientReferenceID != p.AccountID || s.AmountTotal != p.AmountCents || (s.Currency != "" && s.Currency != "usd") {
		problem := fmt.Sprintf("session says account %s, %d %s; the purchase is account %s, %d usd",
			s.ClientReferenceID, s.AmountTotal, s.Currency, p.AccountID, p.AmountCents)
		_, err := tx.Exec(ctx, `UPDATE credit_purchases SET problem = $2, updated_at = $3 WHERE id = $1`, p.ID, problem, w.credits.now().UTC())
		return "not credited: " + problem, err
	}
	c := w.credits
	amount := centsToPico(p.AmountCents)
	txn, _, err := c.ledger.PostTx(ctx, tx, ledger.TransactionInput{
		Kind: ledger.TransactionPurchase, IdempotencyKey: "stripe-purchase:" + p.ID,
		Memo:       fmt.Sprintf("Credits bought with Stripe: %s (checkout %s)", formatCents(p.AmountCents), s.ID),
		OccurredAt: c.now().UTC(),
		Postings:   []ledger.Posting{{Account: subj.customer, Amount: amount}, {Account: subj.clearing, Amount: -amount}},
	})
	if err != nil {
		return "", err
	}
	_, err = tx.Exec(ctx, `UPDATE credit_purchases SET status = 'paid', credit_transaction_id = $2, problem = '', updated_at = $3
		WHERE id = $1`, p.ID, txn.ID, c.now().UTC())
	return "credited " + formatCents(p.AmountCents), err
}

func (w *StripeWebhook) markAwaiting(ctx context.Context, tx pgx.Tx, p lockedPurchase) (string, error) {
	if p.Status != string(PurchasePending) {
		return "completed without payment; purchase already " + p.Status, nil
	}
	_, err := tx.Exec(ctx, `UPDATE credit_purchases SET status = 'awaiting_payment', updated_at = $2 WHERE id = $1`, p.ID, w.credits.now().UTC())
	return "awaiting payment", err
}

// eventSessionExpired is Stripe's word that a Checkout Session was not paid by its expiry.
const eventSessionExpired = "checkout.session.expired"

// markExpired ends a purchase whose session expired unpaid, once: only a pending purchase
// changes; a repeated event, or one about a purchase that was paid or failed meanwhile, moves
// nothing.
func (w *StripeWebhook) markExpired(ctx context.Context, tx pgx.Tx, p lockedPurchase) (string, error) {
	if p.Status != string(PurchasePending) {
		return "session expired; purchase already " + p.Status, nil
	}
	_, err := tx.Exec(ctx, `UPDATE credit_purchases SET status = 'expired', updated_at = $2 WHERE id = $1`, p.ID, w.credits.now().UTC())
	return "expired unpaid", err
}

func (w *StripeWebhook) markFailed(ctx context.Context, tx pgx.Tx, p lockedPurchase) (string, error) {
	if p.Status == string(PurchasePaid) {
		return "payment failed after credit; left as paid", nil
	}
	_, err := tx.Exec(ctx, `UPDATE credit_purchases SET status = 'failed', updated_at = $2 WHERE id = $1`, p.ID, w.credits.now().UTC())
	return "payment failed", err
}

func (w *StripeWebhook) refund(ctx context.Context, tx pgx.Tx, p lockedPurchase, subj subject) (string, error) {
	ch := subj.charge
	total := ch.AmountRefunded
	if total > p.AmountCents {
		total = p.AmountCents
	}
	delta := total - p.RefundedCents
	if delta <= 0 {
		return "refund already taken back", nil
	}
	c := w.credits
	amount := centsToPico(delta)
	if _, _, err := c.ledger.PostTx(ctx, tx, ledger.TransactionInput{
		Kind: ledger.TransactionRefund, IdempotencyKey: fmt.Sprintf("stripe-refund:%s:%d", p.ID, total),
		Memo:       fmt.Sprintf("Refund of %s (charge %s)", formatCents(delta), ch.ID),
		OccurredAt: c.now().UTC(),
		Postings:   []ledger.Posting{{Account: subj.customer, Amount: -amount}, {Account: subj.clearing, Amount: amount}},
	}); err != nil {
		return "", err
	}
	_, err := tx.Exec(ctx, `UPDATE credit_purchases SET refunded_cents = $2, updated_at = $3 WHERE id = $1`, p.ID, total, c.now().UTC())
	return "refunded " + formatCents(delta), err
}
