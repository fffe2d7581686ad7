package credits

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/money"
)

// Bounds on auto top-up's setting "when the balance falls below the threshold, add the amount",
// in cents (docs/auto-topup.md).
const (
	MinTopupCents     = MinPurchaseCents // $5: a charge smaller than the card fees is no top-up
	MaxTopupCents     = MaxPurchaseCents // $10,000, as a purchase by hand
	MaxThresholdCents = MaxPurchaseCents
	// MaxTopupsPerDay bounds the charges of one account in 24 hours, however fast it spends: a
	// leak of API keys drains at most this many top-ups before a person looks.
	MaxTopupsPerDay = 10
)

// TopupEventFailed is the event type an auto top-up's failure emits.
const TopupEventFailed = "topup.failed"

// MailQueue queues an e-mail in the caller's transaction (services/mail).
type MailQueue interface {
	Enqueue(ctx context.Context, tx pgx.Tx, m mail.Message) error
}

// EventEmitter records an event about an account in the caller's transaction, for its
// webhooks and alerts.
type EventEmitter interface {
	Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error
}

// AttemptStatus is where an auto top-up charge stands.
type AttemptStatus string

const (
	AttemptCreated   AttemptStatus = "created"   // recorded; Stripe has not answered yet
	AttemptPending   AttemptStatus = "pending"   // Stripe took the charge; waiting for its webhook to credit it
	AttemptSucceeded AttemptStatus = "succeeded" // credited
	AttemptFailed    AttemptStatus = "failed"    // declined or needed the customer; nothing credited
	// AttemptUnanswered never had Stripe's word: sent MaxChargeTries times without an answer, or
	// no answer nor webhook within AnswerWait. Auto top-up stopped; a late success still credits.
	AttemptUnanswered AttemptStatus = "unanswered"
)

// Bounds on waiting for Stripe's word about a charge (docs/auto-topup.md, "A charge with no
// answer").
const (
	// MaxChargeTries is how many times a charge that gets no answer is sent, with the same
	// idempotency key, before it is given up.
	MaxChargeTries = 5
	// DefaultAnswerWait is how long a charge may wait for Stripe's answer and then for its
	// webhook before it is given up.
	DefaultAnswerWait = 24 * time.Hour
)

// TopupSettings is an account's auto top-up: its saved card and "when the balance falls below
// Threshold, add Amount".
type TopupSettings struct {
	Enabled        bool       `json:"enabled"`
	ThresholdCents int64      `json:"threshold_cents"`
	AmountCents    int64      `json:"amount_cents"`
	Card           *SavedCard `json:"card"`
	// StoppedReason says why auto top-up turned itself off; "" when it did not.
	StoppedReason string     `json:"stopped_reason,omitempty"`
	StoppedAt     *time.Time `json:"stopped_at,omitempty"`
	// Pending is the charge waiting for Stripe's word, if any.
	Pending *TopupAttempt `json:"pending,omitempty"`
}

// SavedCard is the card auto top-up charges.
type SavedCard struct {
	PaymentMethodID string `json:"payment_method_id"`
	Brand           string `json:"brand,omitempty"`
	Last4           string `json:"last4,omitempty"`
}

// TopupAttempt is one auto top-up charge.
type TopupAttempt struct {
	ID                  string        `json:"id"`
	AmountCents         int64         `json:"amount_cents"`
	Status              AttemptStatus `json:"status"`
	StripePaymentIntent string        `json:"stripe_payment_intent,omitempty"`
	Failure             string        `json:"failure,omitempty"`
	CreatedAt           time.Time     `json:"created_at"`
}

// AutoTopup charges an account's saved card when its prepaid balance falls below its
// threshold, once per crossing, and credits the charge when Stripe's webhook says it succeeded.
//
// Invariants (docs/auto-topup.md): an attempt row is created, in the transaction that locks
// the account's settings, before Stripe is called, and its id is the charge's idempotency key;
// an account has at most one attempt open; a crossing has one attempt (armed); only the signed
// payment_intent.succeeded webhook credits, once, keyed by the attempt.
type AutoTopup struct {
	pool    *pgxpool.Pool
	ledger  *ledger.Ledger
	cards   Cards
	now     func() time.Time
	mail    MailQueue                                // nil queues no e-mail
	events  EventEmitter                             // nil emits no event
	charged func(ctx context.Context, c TopupCharge) // nil tells no one
	// retryAfter is how long an attempt whose charge got no answer waits before a worker sends
	// it again; it is also the lease of the worker sending it.
	retryAfter time.Duration
	// answerWait is how long an attempt may wait for Stripe's word before it is given up.
	answerWait time.Duration
}

// TopupConfig is what AutoTopup needs.
type TopupConfig struct {
	Pool   *pgxpool.Pool
	Ledger *ledger.Ledger
	Cards  Cards
	Now    func() time.Time
	// Mail and Events raise the alert of a failed top-up, in the transaction that records it;
	// either may be nil.
	Mail   MailQueue
	Events EventEmitter
	// Charged, when set, is told of each charge Stripe took: where no Stripe sends webhooks
	// (stripe-mock), it sends the signed payment_intent.succeeded Stripe would.
	Charged func(ctx context.Context, c TopupCharge)
}

// DefaultRetryAfter is how long a charge with no answer waits before it is sent again.
const DefaultRetryAfter = time.Minute

// NewAutoTopup returns the auto top-up service.
func NewAutoTopup(cfg TopupConfig) *AutoTopup {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &AutoTopup{pool: cfg.Pool, ledger: cfg.Ledger, cards: cfg.Cards, now: cfg.Now, mail: cfg.Mail,
		events: cfg.Events, charged: cfg.Charged, retryAfter: DefaultRetryAfter, answerWait: DefaultAnswerWait}
}

// Settings returns the account's auto top-up; an account that never saved one has it off,
// with the default amounts and no card.
func (t *AutoTopup) Settings(ctx context.Context, accountID string) (_ TopupSettings, err error) {
	defer services.Wrap(&err, "credits.AutoTopup.Settings")
	s := TopupSettings{ThresholdCents: 500, AmountCents: 2000}
	var pm, brand, last4 string
	err = t.pool.QueryRow(ctx, `SELECT enabled, threshold_cents, amount_cents, payment_method_id, card_brand, card_last4,
			stopped_reason, stopped_at
		FROM topup_settings WHERE account_id = $1`, accountID).
		Scan(&s.Enabled, &s.ThresholdCents, &s.AmountCents, &pm, &brand, &last4, &s.StoppedReason, &s.StoppedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return TopupSettings{}, err
	}
	if pm != "" {
		s.Card = &SavedCard{PaymentMethodID: pm, Brand: brand, Last4: last4}
	}
	rows, err := t.pool.Query(ctx, `SELECT id, amount_cents, status, coalesce(stripe_payment_intent, ''), failure, created_at
		FROM topup_attempts WHERE account_id = $1 AND status IN ('created', 'pending')`, accountID)
	if err != nil {
		return TopupSettings{}, err
	}
	open, err := pgx.CollectRows(rows, scanAttempt)
	if err != nil {
		return TopupSettings{}, err
	}
	if len(open) > 0 {
		s.Pending = &open[0]
	}
	return s, nil
}

func scanAttempt(r pgx.CollectableRow) (TopupAttempt, error) {
	var a TopupAttempt
	err := r.Scan(&a.ID, &a.AmountCents, &a.Status, &a.StripePaymentIntent, &a.Failure, &a.CreatedAt)
	return a, err
}

// Attempts lists the account's auto top-up charges, newest first.
func (t *AutoTopup) Attempts(ctx context.Context, accountID string, limit int) (_ []TopupAttempt, err error) {
	defer services.Wrap(&err, "credits.AutoTopup.Attempts")
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	rows, err := t.pool.Query(ctx, `SELECT id, amount_cents, status, coalesce(stripe_payment_intent, ''), failure, created_at
		FROM topup_attempts WHERE account_id = $1 ORDER BY created_at DESC, id LIMIT $2`, accountID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanAttempt)
}

// SettingsInput changes an account's auto top-up.
type SettingsInput struct {
	AccountID string
	// Email is who hears of a failed top-up: the person who turns it on.
	Email          string
	Enabled        bool
	ThresholdCents int64
	AmountCents    int64
}

// ParseThresholdUSD reads the threshold in dollars ("0", "10", "10.50") into cents.
func ParseThresholdUSD(s string) (int64, error) {
	p, err := money.ParseUSD(strings.TrimSpace(s))
	if err != nil || p < 0 || p%money.PicoPerCent != 0 {
		return 0, fieldError("threshold_usd", "Enter an amount in dollars and cents, like 10 or 10.50.")
	}
	return int64(p / money.PicoPerCent), nil
}

// ParseTopupUSD reads the amount of a top-up in dollars into cents.
func ParseTopupUSD(s string) (int64, error) {
	p, err := money.ParseUSD(strings.TrimSpace(s))
	if err != nil || p < 0 || p%money.PicoPerCent != 0 {
		return 0, fieldError("amount_usd", "Enter an amount in dollars and cents, like 20 or 20.50.")
	}
	return int64(p / money.PicoPerCent), nil
}

func fieldError(field, msg string) error {
	return &services.Error{Code: services.CodeInvalid, Message: msg, Fields: map[string]string{field: msg}}
}

// Validate checks the bounds.
func (in SettingsInput) Validate() error {
	fe := services.FieldErrors{}
	if in.ThresholdCents < 0 || in.ThresholdCents > MaxThresholdCents {
		fe.Add("threshold_usd", "Choose a threshold between $0 and $10,000.")
	}
	if in.AmountCents < MinTopupCents || in.AmountCents > MaxTopupCents {
		fe.Add("amount_usd", "Add between $5 and $10,000 at a time.")
	}
	return fe.Err()
}

// Save changes the account's auto top-up. Turning it on needs a saved card, and clears the
// reason it stopped; the next crossing below the threshold charges.
func (t *AutoTopup) Save(ctx context.Context, in SettingsInput) (_ TopupSettings, err error) {
	defer services.Wrap(&err, "credits.AutoTopup.Save")
	if err := in.Validate(); err != nil {
		return TopupSettings{}, err
	}
	now := t.now().UTC()
	err = pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		var pm string
		err := tx.QueryRow(ctx, `SELECT payment_method_id FROM topup_settings WHERE account_id = $1 FOR UPDATE`, in.AccountID).Scan(&pm)
		if in.Enabled && (pm == "" || errors.Is(err, pgx.ErrNoRows)) {
			return services.Errorf(services.CodeInvalid, "Save a card first: auto top-up charges your saved card.")
		}
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = tx.Exec(ctx, `INSERT INTO topup_settings (account_id, threshold_cents, amount_cents, updated_at)
				VALUES ($1, $2, $3, $4)`, in.AccountID, in.ThresholdCents, in.AmountCents, now)
			return err
		}
		if err != nil {
			return err
		}
		// Turning it on arms the next crossing and clears why it stopped; the person who turns it on
		// hears of a failure.
		_, err = tx.Exec(ctx, `
			UPDATE topup_settings SET enabled = $2, threshold_cents = $3, amount_cents = $4,
				notify_email = CASE WHEN $2 THEN $5 ELSE notify_email END,
				armed = CASE WHEN $2 AND NOT enabled THEN true ELSE armed END,
				stopped_reason = CASE WHEN $2 THEN '' ELSE stopped_reason END,
				stopped_at = CASE WHEN $2 THEN NULL ELSE stopped_at END,
				updated_at = $6
			WHERE account_id = $1`,
			in.AccountID, in.Enabled, in.ThresholdCents, in.AmountCents, in.Email, now)
		if err != nil || in.Enabled {
			return err
		}
		return t.cancelUnsentTx(ctx, tx, in.AccountID, "Auto top-up was turned off before the charge was sent.")
	})
	if err != nil {
		return TopupSettings{}, err
	}
	return t.Settings(ctx, in.AccountID)
}

// SaveCardInput starts saving a card.
type SaveCardInput struct {
	AccountID  string
	ReturnURL  string // where the customer comes back to when the card is saved
	CancelURL  string
	RandomPart string // makes each page's idempotency key its own
}

// StartSaveCard creates the account's Stripe customer once, then a hosted page in setup mode
// where the customer saves a card. The card is recorded when Stripe's setup_intent.succeeded
// webhook says so (CardSaved), not when the customer comes back.
func (t *AutoTopup) StartSaveCard(ctx context.Context, in SaveCardInput) (_ CheckoutSession, err error) {
	defer services.Wrap(&err, "credits.AutoTopup.StartSaveCard")
	customer, err := t.EnsureCustomer(ctx, in.AccountID)
	if err != nil {
		return CheckoutSession{}, err
	}
	sess, err := t.cards.StartSaveCard(ctx, SaveCardRequest{AccountID: in.AccountID, CustomerID: customer,
		SuccessURL: in.ReturnURL, CancelURL: in.CancelURL, Key: "setup-" + in.AccountID + "-" + in.RandomPart})
	if err != nil {
		return CheckoutSession{}, unavailable(err)
	}
	return sess, nil
}

// Customer is the account's Stripe customer, "" when none was made yet.
func (t *AutoTopup) Customer(ctx context.Context, accountID string) (string, error) {
	var id string
	err := t.pool.QueryRow(ctx, `SELECT stripe_customer_id FROM topup_settings WHERE account_id = $1`, accountID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// EnsureCustomer returns the account's Stripe customer, creating it the first time.
func (t *AutoTopup) EnsureCustomer(ctx context.Context, accountID string) (string, error) {
	id, err := t.Customer(ctx, accountID)
	if err != nil || id != "" {
		return id, err
	}
	// The account is the creation's idempotency key: two pages started at once make one customer.
	id, err = t.cards.EnsureCustomer(ctx, accountID)
	if err != nil {
		return "", unavailable(err)
	}
	_, err = t.pool.Exec(ctx, `
		INSERT INTO topup_settings (account_id, stripe_customer_id, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (account_id) DO UPDATE SET stripe_customer_id = $2, updated_at = $3
			WHERE topup_settings.stripe_customer_id = ''`, accountID, id, t.now().UTC())
	if err != nil {
		return "", err
	}
	return t.Customer(ctx, accountID)
}

func unavailable(err error) error {
	return &services.Error{Code: services.CodeUnavailable,
		Message: "The payment provider did not answer. Nothing was charged; please try again.", Cause: err}
}

// RemoveCard forgets the account's saved card and turns auto top-up off; with no card saved it
// does nothing. The card is detached from the Stripe customer too; the platform never charges a
// card it has forgotten, even when detaching fails.
func (t *AutoTopup) RemoveCard(ctx context.Context, accountID string) (err error) {
	defer services.Wrap(&err, "credits.AutoTopup.RemoveCard")
	var pm string
	err = pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT payment_method_id FROM topup_settings WHERE account_id = $1 FOR UPDATE`, accountID).Scan(&pm)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && pm == "") {
			pm = ""
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE topup_settings SET enabled = false, payment_method_id = '', card_brand = '', card_last4 = '',
			updated_at = $2 WHERE account_id = $1`, accountID, t.now().UTC()); err != nil {
			return err
		}
		return t.cancelUnsentTx(ctx, tx, accountID, "The card was removed before the charge was sent.")
	})
	if err != nil || pm == "" {
		return err
	}
	_ = t.cards.Forget(ctx, pm) // already forgotten here; Stripe keeps a card nobody charges
	return nil
}

// cancelUnsentTx gives up the account's attempt that Stripe has not answered yet, in the
// transaction that turns auto top-up off or removes the card, so that no worker sends it later.
// If the charge did reach Stripe before, its payment_intent.succeeded still credits it.
func (t *AutoTopup) cancelUnsentTx(ctx context.Context, tx pgx.Tx, accountID, why string) error {
	_, err := tx.Exec(ctx, `UPDATE topup_attempts SET status = 'failed', failure = $2, updated_at = $3
		WHERE account_id = $1 AND status = 'created'`, accountID, why, t.now().UTC())
	return err
}
