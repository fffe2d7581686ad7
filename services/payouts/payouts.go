// Package payouts pays providers what their statements say they are owed, through Stripe
// Connect: a provider connects a Stripe account (Connect Express), and each statement finance
// approves becomes one Stripe Transfer to it, posted on the ledger from the provider's payable
// to Stripe clearing. It owns the tables provider_stripe_accounts and payouts, and writes the
// ledger only through ledger.Ledger.
//
// Invariants (docs/payouts.md says why each holds; docs/failure-cases.md, cases 32 to 34):
//
//   - A statement is paid at most once. Its payout is one row (unique on the statement), every
//     attempt sends Stripe the same idempotency key and the same parameters, and an attempt
//     that got no answer is resolved by looking for its transfer before anything is sent again.
//   - A payout is paid exactly when its transfer exists and the ledger posted it: status paid,
//     the transfer id and the ledger transaction are written in the one database transaction
//     that posts, keyed by the statement, so a retry never posts twice. A paid payout never
//     changes (the database refuses it).
//   - Money leaves only against what the ledger owes: a payout is sent only when the provider's
//     payable balance, less the payouts of that provider already on their way, covers it.
//   - A provider is paid only to the Stripe account the platform created for it, and only once
//     Stripe said the account can receive payouts.
//   - A statement is paid only as it stands: the invoicing side is asked for it again, under the
//     provider's payable lock, just before its transfer is sent.
//
// It names only its own tables in SQL: its providers' names come from package accounts
// (accounts.NamesByID, through the transaction that reads the payouts), the ledger's balances
// and postings from package ledger.
package payouts

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/ledger"
)

// Statement is a provider statement to pay, as the invoicing side hands it to Pay. Each
// method says one thing Pay reads; none may change between attempts (a payout's amount and
// provider are fixed when it is first made).
type Statement interface {
	// StatementID is the statement's id: the payout's key, at Stripe and on the ledger.
	// Letters, digits, '-' and '_', at most 100.
	StatementID() string
	// PayeeAccountID is the provider's account (organisation) id.
	PayeeAccountID() string
	// PayableCents is what the statement says the provider is paid, in US cents: more than
	// zero (a statement below the minimum payout carries over and is not paid).
	PayableCents() int64
	// StatementPeriod is the month the statement covers, "YYYY-MM".
	StatementPeriod() string
	// StatementNumber is the statement's legal number, as printed on it.
	StatementNumber() string
}

// Statements is the invoicing side as payouts needs it once a payout exists.
type Statements interface {
	// StatementToPay returns a statement as it stands now, for a retry of its payout. An
	// error (not found, voided) stops the retry and is returned to whoever asked for it.
	StatementToPay(ctx context.Context, statementID string) (Statement, error)
	// MarkPaidTx records that the statement is paid, inside the database transaction that
	// marks its payout paid and posts it on the ledger: both commit, or neither does.
	MarkPaidTx(ctx context.Context, tx pgx.Tx, statementID string, p Payout) error
}

// Status is where a payout stands.
type Status string

const (
	StatusPending Status = "pending" // an attempt is under way, or ended without an outcome
	StatusPaid    Status = "paid"    // transferred and posted; final
	StatusFailed  Status = "failed"  // the last attempt did not pay; it can be retried
)

// ActionRetry is the action a failed payout allows.
const ActionRetry = "retry"

// Payout is one statement's payment to its provider.
type Payout struct {
	ID                  string     `json:"id"`
	StatementID         string     `json:"statement_id"`
	StatementNumber     string     `json:"statement_number"`
	Period              string     `json:"period"`
	ProviderAccountID   string     `json:"provider_account_id"`
	ProviderName        string     `json:"provider_name"`
	AmountCents         int64      `json:"amount_cents"`
	Currency            string     `json:"currency"`
	Status              Status     `json:"status"`
	StripeAccountID     string     `json:"stripe_account_id,omitempty"`
	StripeTransferID    string     `json:"stripe_transfer_id,omitempty"`
	LedgerTransactionID string     `json:"ledger_transaction_id,omitempty"`
	Attempts            int        `json:"attempts"`
	LastError           string     `json:"last_error"`
	InDoubt             bool       `json:"in_doubt"`                     // the last attempt got no answer: a transfer may exist
	AttemptStartedAt    *time.Time `json:"attempt_started_at,omitempty"` // while an attempt holds it
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	PaidAt              *time.Time `json:"paid_at,omitempty"`
	Actions             []string   `json:"actions"` // what finance may do with it now
}

// actionsOf lists what a payout in its state allows now, so that no page offers what the state
// forbids: a failed payout may be retried, and so may a pending one whose attempt ended without
// telling (its lease ran out); one under way may not; a paid one is final.
func actionsOf(p Payout, now time.Time) []string {
	if p.Status == StatusFailed || (p.Status == StatusPending && !underway(p, now)) {
		return []string{ActionRetry}
	}
	return []string{}
}

// Config wires the service.
type Config struct {
	Pool   *pgxpool.Pool
	Ledger *ledger.Ledger
	Stripe Stripe
	// Statements is the invoicing side: Retry asks it for the statement as it stands now, and
	// a payout marked paid is reported to it in the same database transaction. Without it Pay
	// still pays the statements it is given, and Retry refuses (it cannot tell whether the
	// statement is still to be paid).
	Statements Statements
	// Events is told of each payout paid, in the transaction that marks it paid (payout.paid,
	// docs/webhooks.md); nil tells no one.
	Events Events
	Now    func() time.Time // nil means time.Now
}

// Events records an event for an account's webhooks inside the transaction of what happened
// (webhooks.Service.Emit).
type Events interface {
	Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error
}

// Service connects providers' Stripe accounts and pays their statements.
type Service struct {
	pool       *pgxpool.Pool
	ledger     *ledger.Ledger
	stripe     Stripe
	statements Statements
	events     Events
	now        func() time.Time
}

// NewService returns the payouts service.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{pool: cfg.Pool, ledger: cfg.Ledger, stripe: cfg.Stripe, statements: cfg.Statements, events: cfg.Events, now: cfg.Now}
}
