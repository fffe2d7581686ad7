package credits

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
)

// The Stripe events auto top-up applies.
const (
	eventIntentSucceeded = "payment_intent.succeeded"
	eventIntentFailed    = "payment_intent.payment_failed"
	eventSetupSucceeded  = "setup_intent.succeeded"
	// A Checkout Session in setup mode completed: it saved a card too.
	eventCheckoutCompleted = "checkout.session.completed"
)

// WithAutoTopup makes the webhook apply auto top-up's events: the card a SetupIntent saved,
// and the credit or failure of a top-up's PaymentIntent. Events about other PaymentIntents
// (a purchase's) stay ignored: only the Checkout Session grants a purchase.
func (w *StripeWebhook) WithAutoTopup(t *AutoTopup) *StripeWebhook {
	w.topups = t
	return w
}

type intentObject struct {
	ID               string            `json:"id"`
	Amount           int64             `json:"amount"`
	AmountReceived   int64             `json:"amount_received"`
	Currency         string            `json:"currency"`
	Customer         json.RawMessage   `json:"customer"`
	Status           string            `json:"status"`
	Metadata         map[string]string `json:"metadata"`
	LastPaymentError *struct {
		Code        string `json:"code"`
		DeclineCode string `json:"decline_code"`
		Message     string `json:"message"`
	} `json:"last_payment_error"`
}

type setupObject struct {
	ID            string            `json:"id"`
	Customer      json.RawMessage   `json:"customer"`
	PaymentMethod json.RawMessage   `json:"payment_method"`
	Metadata      map[string]string `json:"metadata"`
}

// topupSubject is what an auto top-up event is about; found is false for an event about
// something else.
type topupSubject struct {
	found     bool
	intent    intentObject
	setup     setupObject
	attemptID string
	// The saved card's brand and last digits, read from Stripe before the event's transaction.
	brand, last4 string
}

// topupSubjectOf decodes an auto top-up event and finds its attempt (or, for a saved card, its
// account), opening the ledger accounts a credit moves, before the event's transaction, as
// subjectOf does for purchases.
func (w *StripeWebhook) topupSubjectOf(ctx context.Context, ev stripe.Event, s *subject) error {
	t := w.topups
	if t == nil {
		return nil
	}
	if ev.Type == eventSetupSucceeded {
		if json.Unmarshal(ev.Data.Raw, &s.topup.setup) != nil || s.topup.setup.Metadata["purpose"] != "auto_topup" ||
			!services.CanonicalUUID(s.topup.setup.Metadata["account_id"]) {
			return nil
		}
		s.topup.found, s.accountID = true, s.topup.setup.Metadata["account_id"]
		if pm := idOf(s.topup.setup.PaymentMethod); pm != "" {
			// The brand and last digits are shown when Stripe says them; the card is saved either way.
			s.topup.brand, s.topup.last4, _ = t.cards.Card(ctx, pm)
		}
		return nil
	}
	if json.Unmarshal(ev.Data.Raw, &s.topup.intent) != nil {
		return nil
	}
	in := s.topup.intent
	err := t.pool.QueryRow(ctx, `SELECT id, account_id FROM topup_attempts WHERE stripe_payment_intent = $1`, in.ID).
		Scan(&s.topup.attemptID, &s.accountID)
	if errors.Is(err, pgx.ErrNoRows) && services.CanonicalUUID(in.Metadata["topup_attempt_id"]) {
		// The webhook may come before the charge's answer was recorded.
		err = t.pool.QueryRow(ctx, `SELECT id, account_id FROM topup_attempts WHERE id = $1`, in.Metadata["topup_attempt_id"]).
			Scan(&s.topup.attemptID, &s.accountID)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	s.topup.found = true
	if s.customer, err = t.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, s.accountID); err != nil {
		return err
	}
	s.clearing, err = t.ledger.AccountFor(ctx, ledger.AccountStripeClearing, "")
	return err
}

// setupSessionSubjectOf reads a completed Checkout Session in setup mode that saves a card for
// auto top-up (its metadata says so, for the account it names). Stripe's event names the
// session's SetupIntent by its id only, so the SetupIntent is read from Stripe, before the
// event's transaction, for its status, its customer and the card it saved. A Stripe that does
// not answer fails the delivery, and Stripe sends the event again.
func (w *StripeWebhook) setupSessionSubjectOf(ctx context.Context, s *subject) error {
	t := w.topups
	sess := s.session
	account := sess.Metadata["account_id"]
	if t == nil || sess.Metadata["purpose"] != "auto_topup" || !services.CanonicalUUID(account) ||
		sess.ClientReferenceID != account {
		return nil
	}
	s.topup.found, s.accountID = true, account
	s.topup.setup = setupObject{ID: idOf(sess.SetupIntent)}
	if s.topup.setup.ID == "" {
		return nil // cardSavedTx says the session saved no card
	}
	si, err := t.cards.SetupIntent(ctx, s.topup.setup.ID)
	if err != nil {
		return err
	}
	// The SetupIntent's own customer decides; the session's stands in when it names none.
	customer := si.CustomerID
	if customer == "" {
		customer = idOf(sess.Customer)
	}
	s.topup.setup.Customer, _ = json.Marshal(customer) // never fails
	if si.Status != "succeeded" {
		return nil // no payment method: nothing is saved
	}
	s.topup.setup.PaymentMethod, _ = json.Marshal(si.PaymentMethodID)
	if si.PaymentMethodID != "" {
		s.topup.brand, s.topup.last4, _ = t.cards.Card(ctx, si.PaymentMethodID)
	}
	return nil
}

// applyTopup applies an auto top-up event inside the event's transaction.
func (w *StripeWebhook) applyTopup(ctx context.Context, tx pgx.Tx, ev stripe.Event, s subject) (string, error) {
	t := w.topups
	switch ev.Type {
	case eventSetupSucceeded, eventCheckoutCompleted:
		return t.cardSavedTx(ctx, tx, s)
	case eventIntentFailed:
		reason := refusalText("card_declined", "", "")
		if e := s.topup.intent.LastPaymentError; e != nil {
			reason = refusalText(e.Code, e.DeclineCode, e.Message)
		}
		return t.failTx(ctx, tx, s.topup.attemptID, s.topup.intent.ID, reason)
	default:
		return t.creditTx(ctx, tx, s)
	}
}

// cardSavedTx records the SetupIntent's card as the account's saved card, when the SetupIntent
// is on the account's own Stripe customer.
func (t *AutoTopup) cardSavedTx(ctx context.Context, tx pgx.Tx, s subject) (string, error) {
	si := s.topup.setup
	pm := idOf(si.PaymentMethod)
	var customer string
	err := tx.QueryRow(ctx, `SELECT stripe_customer_id FROM topup_settings WHERE account_id = $1 FOR UPDATE`, s.accountID).Scan(&customer)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (customer == "" || customer != idOf(si.Customer))) {
		return fmt.Sprintf("not saved: setup intent %s is not on the account's customer", si.ID), nil
	}
	if err != nil {
		return "", err
	}
	if pm == "" {
		return "not saved: setup intent " + si.ID + " has no payment method", nil
	}
	_, err = tx.Exec(ctx, `UPDATE topup_settings SET payment_method_id = $2, card_brand = $3, card_last4 = $4, updated_at = $5
		WHERE account_id = $1`, s.accountID, pm, s.topup.brand, s.topup.last4, t.now().UTC())
	return "card saved", err
}

// creditTx credits a top-up's PaymentIntent once: the ledger transaction is keyed by the
// attempt, as a purchase's is by the purchase, and posts as a purchase does. Once the credit
// lands, the next crossing below the threshold may charge again.
func (t *AutoTopup) creditTx(ctx context.Context, tx pgx.Tx, s subject) (string, error) {
	in := s.topup.intent
	if _, err := tx.Exec(ctx, `SELECT 1 FROM topup_settings WHERE account_id = $1 FOR UPDATE`, s.accountID); err != nil {
		return "", err
	}
	var status AttemptStatus
	var amount int64
	var customer string
	if err := tx.QueryRow(ctx, `SELECT status, amount_cents, stripe_customer_id FROM topup_attempts WHERE id = $1 FOR UPDATE`,
		s.topup.attemptID).Scan(&status, &amount, &customer); err != nil {
		return "", err
	}
	if status == AttemptSucceeded {
		return "already credited", nil
	}
	if in.Amount != amount || (in.Currency != "" && in.Currency != "usd") || (idOf(in.Customer) != "" && idOf(in.Customer) != customer) {
		problem := fmt.Sprintf("payment intent %s says %d %s for %s; the top-up is %d usd for %s",
			in.ID, in.Amount, in.Currency, idOf(in.Customer), amount, customer)
		_, err := tx.Exec(ctx, `UPDATE topup_attempts SET failure = $2, updated_at = $3 WHERE id = $1`, s.topup.attemptID, problem, t.now().UTC())
		return "not credited: " + problem, err
	}
	now := t.now().UTC()
	credit := centsToPico(amount)
	txn, _, err := t.ledger.PostTx(ctx, tx, ledger.TransactionInput{
		Kind: ledger.TransactionPurchase, IdempotencyKey: "stripe-topup:" + s.topup.attemptID,
		Memo:       fmt.Sprintf("Credits bought by auto top-up: %s (payment %s)", formatCents(amount), in.ID),
		OccurredAt: now,
		Postings:   []ledger.Posting{{Account: s.customer, Amount: credit}, {Account: s.clearing, Amount: -credit}},
	})
	if err != nil {
		return "", err
	}
	// A charge Stripe took is credited even if its attempt was marked failed before.
	if _, err := tx.Exec(ctx, `UPDATE topup_attempts SET status = 'succeeded', stripe_payment_intent = $2,
			credit_transaction_id = $3, updated_at = $4 WHERE id = $1`, s.topup.attemptID, in.ID, txn.ID, now); err != nil {
		return "", err
	}
	_, err = tx.Exec(ctx, `UPDATE topup_settings SET armed = true WHERE account_id = $1`, s.accountID)
	return "credited " + formatCents(amount) + " (auto top-up)", err
}
