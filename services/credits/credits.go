package credits

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpumarket/gpumarket/services/ledger"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/money"
)

// Limits on one purchase of credits, in cents.
const (
	MinPurchaseCents = 500       // $5
	MaxPurchaseCents = 1_000_000 // $10,000
)

// An account may have at most MaxOpenCheckouts checkouts started within OpenCheckoutWindow
// and never completed (pending purchases): each one is a Checkout Session created at the
// payment provider, so a script looping on the buy form must not create them without end. See
// docs/web-security.md ("Caps per account").
const (
	MaxOpenCheckouts   = 10
	OpenCheckoutWindow = 24 * time.Hour
)

// PurchaseStatus is where a purchase of credits stands.
type PurchaseStatus string

const (
	PurchasePending         PurchaseStatus = "pending"          // checkout started, nothing heard from Stripe
	PurchaseAwaitingPayment PurchaseStatus = "awaiting_payment" // checkout completed, payment not yet settled
	PurchasePaid            PurchaseStatus = "paid"             // credited
	PurchaseFailed          PurchaseStatus = "failed"           // the payment failed; nothing credited
	PurchaseExpired         PurchaseStatus = "expired"          // the checkout was not paid by its expiry; nothing credited
)

// CheckoutExpiry is how long a Checkout Session may be paid for: Stripe expires it then and
// sends checkout.session.expired. A pending purchase past its expiry reads as expired before
// that event arrives (docs/failure-cases.md, case 35). Stripe allows from 30 minutes to 24 hours.
const CheckoutExpiry = 24 * time.Hour

// Purchase is a purchase of prepaid credits.
type Purchase struct {
	ID              string         `json:"id"`
	AccountID       string         `json:"account_id"`
	AmountCents     int64          `json:"amount_cents"`
	Status          PurchaseStatus `json:"status"`
	StripeSessionID string         `json:"stripe_session_id,omitempty"`
	RefundedCents   int64          `json:"refunded_cents"`
	// ExpiresAt is when its Checkout Session expires unpaid; nil for a purchase started before
	// sessions were given an expiry.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// CheckoutRequest is what the platform asks its payment provider for.
type CheckoutRequest struct {
	PurchaseID  string // also the idempotency key: a retried request creates one session
	AccountID   string // client_reference_id
	AmountCents int64
	SuccessURL  string
	CancelURL   string
	// ExpiresAt is when the session expires unpaid.
	ExpiresAt time.Time
}

// CheckoutSession is the payment provider's answer: where to send the buyer.
type CheckoutSession struct {
	ID  string
	URL string
}

// Checkout creates hosted payment pages. StripeCheckout is the implementation; the same
// code talks to Stripe and to stripe-mock.
type Checkout interface {
	CreateSession(ctx context.Context, req CheckoutRequest) (CheckoutSession, error)
}

// Credits sells prepaid credits and keeps the record of every purchase.
type Credits struct {
	pool     *pgxpool.Pool
	ledger   *ledger.Ledger
	checkout Checkout
	now      func() time.Time
	audit    AuditLog // nil records no adjustment in the audit log
}

// AuditLog records a finance action inside the transaction that takes it (audit.Log).
type AuditLog interface {
	RecordTx(ctx context.Context, tx pgx.Tx, r audit.Record) error
}

// RecordTo makes Adjust record every adjustment in the finance audit log, in the transaction
// that posts it, and returns c.
func (c *Credits) RecordTo(log AuditLog) *Credits {
	c.audit = log
	return c
}

// NewCredits returns the credits service.
func NewCredits(pool *pgxpool.Pool, ledger *ledger.Ledger, checkout Checkout, now func() time.Time) *Credits {
	if now == nil {
		now = time.Now
	}
	return &Credits{pool: pool, ledger: ledger, checkout: checkout, now: now}
}

// ParseAmountUSD reads a purchase amount in dollars ("20", "20.00", "$25.5") into cents and
// checks the limits.
func ParseAmountUSD(s string) (int64, error) {
	p, err := money.ParseUSD(strings.TrimSpace(s))
	if err != nil || p < 0 || p%money.PicoPerCent != 0 {
		return 0, amountError("Enter an amount in dollars and cents, like 20 or 20.50.")
	}
	cents := int64(p / money.PicoPerCent)
	if cents < MinPurchaseCents || cents > MaxPurchaseCents {
		return 0, amountError("Buy between $5 and $10,000 of credits at a time.")
	}
	return cents, nil
}

func amountError(msg string) error {
	return &services.Error{Code: services.CodeInvalid, Message: msg, Fields: map[string]string{"amount_usd": msg}}
}

// StartInput starts a purchase.
type StartInput struct {
	AccountID   string
	UserID      string
	AmountCents int64
	// ReturnURL is where the buyer comes back to; the purchase id is appended as ?purchase=.
	ReturnURL string
	CancelURL string
}

// Start records a pending purchase, then creates its Checkout Session. The purchase id is the
// session's idempotency key, so a retry after a timeout cannot create a second session.
func (c *Credits) Start(ctx context.Context, in StartInput) (_ Purchase, _ CheckoutSession, err error) {
	defer services.Wrap(&err, "credits.Credits.Start")
	if in.AmountCents < MinPurchaseCents || in.AmountCents > MaxPurchaseCents {
		return Purchase{}, CheckoutSession{}, amountError("Buy between $5 and $10,000 of credits at a time.")
	}
	id, err := services.NewUUID()
	if err != nil {
		return Purchase{}, CheckoutSession{}, err
	}
	now := c.now().UTC()
	if err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		// The account's row is the lock that makes counting and inserting one step.
		if err := accounts.LockAccount(ctx, tx, in.AccountID); err != nil {
			return err
		}
		var open int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM credit_purchases
			WHERE account_id = $1 AND status = 'pending' AND created_at > $2 AND (expires_at IS NULL OR expires_at > $3)`,
			in.AccountID, now.Add(-OpenCheckoutWindow), now).Scan(&open); err != nil {
			return err
		}
		if open >= MaxOpenCheckouts {
			return services.Errorf(services.CodeConflict,
				"You have %d checkouts from the last 24 hours that were never paid. Pay one of them, or start a new one once the oldest is a day old.",
				open)
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO credit_purchases (id, account_id, created_by, amount_cents, status, expires_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, 'pending', $5, $6, $6)`, id, in.AccountID, in.UserID, in.AmountCents, now.Add(CheckoutExpiry), now)
		return err
	}); err != nil {
		return Purchase{}, CheckoutSession{}, err
	}
	sess, err := c.checkout.CreateSession(ctx, CheckoutRequest{
		PurchaseID: id, AccountID: in.AccountID, AmountCents: in.AmountCents,
		SuccessURL: in.ReturnURL + "?purchase=" + id, CancelURL: in.CancelURL, ExpiresAt: now.Add(CheckoutExpiry),
	})
	if err != nil {
		_, _ = c.pool.Exec(ctx, `UPDATE credit_purchases SET status = 'failed', problem = $2, updated_at = $3 WHERE id = $1`,
			id, "checkout session: "+err.Error(), c.now().UTC())
		return Purchase{}, CheckoutSession{}, &services.Error{Code: services.CodeUnavailable,
			Message: "The payment provider did not answer. Nothing was charged; please try again.", Cause: err}
	}
	if _, err := c.pool.Exec(ctx, `UPDATE credit_purchases SET stripe_session_id = $2, updated_at = $3 WHERE id = $1`,
		id, sess.ID, c.now().UTC()); err != nil {
		return Purchase{}, CheckoutSession{}, err
	}
	p, err := c.Purchase(ctx, in.AccountID, id)
	return p, sess, err
}

const purchaseColumns = `id, account_id, amount_cents, status, coalesce(stripe_session_id, ''), refunded_cents, expires_at,
	created_at, updated_at`

// scanPurchase reads a purchase as it stands at now: a pending one past its expiry is expired,
// whether or not Stripe's checkout.session.expired has arrived yet.
func scanPurchase(now time.Time) pgx.RowToFunc[Purchase] {
	return func(r pgx.CollectableRow) (Purchase, error) {
		var p Purchase
		err := r.Scan(&p.ID, &p.AccountID, &p.AmountCents, &p.Status, &p.StripeSessionID, &p.RefundedCents, &p.ExpiresAt,
			&p.CreatedAt, &p.UpdatedAt)
		if p.Status == PurchasePending && p.ExpiresAt != nil && !now.Before(*p.ExpiresAt) {
			p.Status = PurchaseExpired
		}
		return p, err
	}
}

// Purchase returns one of the account's purchases; another account's is not found.
func (c *Credits) Purchase(ctx context.Context, accountID, id string) (_ Purchase, err error) {
	defer services.Wrap(&err, "credits.Credits.Purchase(%s)", id)
	if !services.CanonicalUUID(id) {
		return Purchase{}, errPurchaseNotFound
	}
	rows, err := c.pool.Query(ctx, `SELECT `+purchaseColumns+` FROM credit_purchases WHERE id = $1 AND account_id = $2`, id, accountID)
	if err != nil {
		return Purchase{}, err
	}
	p, err := pgx.CollectExactlyOneRow(rows, scanPurchase(c.now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return Purchase{}, errPurchaseNotFound
	}
	return p, err
}

var errPurchaseNotFound = services.Errorf(services.CodeNotFound, "No such purchase.")

// Purchases lists the account's purchases, newest first.
func (c *Credits) Purchases(ctx context.Context, accountID string, limit int) (_ []Purchase, err error) {
	defer services.Wrap(&err, "credits.Credits.Purchases")
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	rows, err := c.pool.Query(ctx, `SELECT `+purchaseColumns+` FROM credit_purchases
		WHERE account_id = $1 ORDER BY created_at DESC, id LIMIT $2`, accountID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanPurchase(c.now()))
}

// Balance is a customer's prepaid credit.
type Balance struct {
	Pico     money.BigPico `json:"balance_pico"`
	USD      string        `json:"balance_usd"` // exact decimal dollars, at least two decimals
	Negative bool          `json:"negative"`    // flagged: refunds or usage took it below zero
}

// Balance returns the account's credit.
func (c *Credits) Balance(ctx context.Context, accountID string) (_ Balance, err error) {
	defer services.Wrap(&err, "credits.Credits.Balance")
	id, err := c.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, accountID)
	if err != nil {
		return Balance{}, err
	}
	b, err := c.ledger.Balance(ctx, id)
	if err != nil {
		return Balance{}, err
	}
	return balanceOf(b), nil
}

func balanceOf(b money.BigPico) Balance {
	return Balance{Pico: b, USD: strings.TrimPrefix(b.String(), "$"), Negative: b.Sign() < 0}
}

// History returns a page of the account's credit movements, newest first.
func (c *Credits) History(ctx context.Context, accountID string, limit int, before ledger.PostingID) (_ ledger.HistoryPage, err error) {
	defer services.Wrap(&err, "credits.Credits.History")
	id, err := c.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, accountID)
	if err != nil {
		return ledger.HistoryPage{}, err
	}
	return c.ledger.History(ctx, id, limit, before)
}

// AdjustInput grants (positive) or takes back (negative) credit by hand.
type AdjustInput struct {
	AccountID string
	Amount    money.Pico
	Reason    string
	ByUserID  string
}

// Adjust moves credit between the customer and platform revenue, with a required reason,
// recorded with who made it.
func (c *Credits) Adjust(ctx context.Context, in AdjustInput) (_ ledger.Transaction, err error) {
	defer services.Wrap(&err, "credits.Credits.Adjust")
	fe := services.FieldErrors{}
	in.Reason = strings.TrimSpace(in.Reason)
	if in.Reason == "" {
		fe.Add("reason", "Say why: the reason is kept with the adjustment.")
	} else if utf8.RuneCountInString(in.Reason) > 120 {
		// 120 characters of up to 4 bytes fit the ledger's 500-byte memo with its prefix.
		fe.Add("reason", "Keep the reason under 120 characters.")
	}
	if in.Amount == 0 {
		fe.Add("amount_usd", "Enter a non-zero amount; negative takes credit back.")
	}
	if !services.CanonicalUUID(in.AccountID) {
		fe.Add("account_id", "Choose an account.")
	}
	if err := fe.Err(); err != nil {
		return ledger.Transaction{}, err
	}
	customer, err := c.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, in.AccountID)
	if err != nil {
		return ledger.Transaction{}, err
	}
	revenue, err := c.ledger.AccountFor(ctx, ledger.AccountPlatformRevenue, "")
	if err != nil {
		return ledger.Transaction{}, err
	}
	var txn ledger.Transaction
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		txn, _, err = c.ledger.PostTx(ctx, tx, ledger.TransactionInput{
			Kind: ledger.TransactionAdjustment, Memo: "Adjustment: " + in.Reason, CreatedBy: in.ByUserID, OccurredAt: c.now().UTC(),
			Postings: []ledger.Posting{{Account: customer, Amount: in.Amount}, {Account: revenue, Amount: -in.Amount}},
		})
		if err != nil || c.audit == nil {
			return err
		}
		// PostTx holds the account's lock: the balance read here is the one the posting made.
		after, err := c.ledger.BalanceTx(ctx, tx, customer)
		if err != nil {
			return err
		}
		verb, size := "Granted", money.BigPicoOf(in.Amount)
		if in.Amount < 0 {
			verb, size = "Took back", size.Neg()
		}
		type state struct {
			Balance     money.BigPico `json:"balance_pico"`
			Amount      money.Pico    `json:"amount_pico,omitempty"`
			Reason      string        `json:"reason,omitempty"`
			Transaction string        `json:"transaction_id,omitempty"`
		}
		return c.audit.RecordTx(ctx, tx, audit.Record{
			ActorID: in.ByUserID, Action: audit.ActionAdjustment, SubjectKind: "account", SubjectID: in.AccountID,
			Summary: fmt.Sprintf("%s %s of credit: %s", verb, size, in.Reason),
			Before:  state{Balance: after.AddPico(-in.Amount)},
			After:   state{Balance: after, Amount: in.Amount, Reason: in.Reason, Transaction: txn.ID},
		})
	})
	if err != nil {
		return ledger.Transaction{}, err
	}
	return txn, nil
}

func centsToPico(cents int64) money.Pico { return money.Pico(cents) * money.PicoPerCent }

func formatCents(cents int64) string { return money.FormatCents(cents) }

// PurchasedCents is what the account's paid purchases of credits came to, refunds not taken
// off: whether it has ever bought credits (the first of a new account's steps, web/home).
func (c *Credits) PurchasedCents(ctx context.Context, accountID string) (_ int64, err error) {
	defer services.Wrap(&err, "credits.Credits.PurchasedCents")
	var cents int64
	err = c.pool.QueryRow(ctx, `SELECT coalesce(sum(amount_cents), 0)::bigint FROM credit_purchases
		WHERE account_id = $1 AND status = 'paid'`, accountID).Scan(&cents)
	return cents, err
}
