// Package ledger owns the platform's money: the double-entry ledger that records every
// purchase of credits, every batch of metered usage, refunds, adjustments, credit notes and
// payouts.
//
// Amounts are signed integers of picodollars (money.Pico; 1e-12 USD, so that one token at one
// MicroUSD per million tokens is one unit), stored as NUMERIC(38,0). The sign is the ledger's
// view of what the platform owes: a positive balance on a customer_credit account is credit
// the customer may spend, on a provider_payable account what the platform owes the provider,
// on platform_revenue what it has earned; stripe_clearing runs negative by the money taken
// in through Stripe and not yet paid out or refunded. A purchase of $10 posts +$10 to the
// customer's credit and -$10 to Stripe clearing.
//
// Invariants, each enforced by the database as well as here:
//
//   - Every transaction has postings and they sum to zero (checked in Post, and by deferred
//     constraint triggers at commit).
//   - The ledger is append-only: postings and transactions are never updated or deleted;
//     a correction is a new transaction (triggers refuse UPDATE, DELETE and TRUNCATE).
//   - A ledger account's cached balance always equals the sum of its postings: a trigger adds
//     each posting to it in the inserting database transaction, and a direct UPDATE of a
//     balance is refused.
//   - A transaction with an idempotency key is posted at most once; posting it again returns
//     the stored transaction.
//   - Writers lock the ledger accounts a transaction touches in id order before writing, so
//     concurrent postings to shared accounts serialise on those rows and never deadlock
//     among themselves.
//
// The database sums in NUMERIC and never overflows. In Go a posting is a money.Pico (int64,
// ±$9.2 million): enough for any one posting, and a transaction moving more is refused. A
// balance, which may grow past that range (a platform account over years, a provider's
// earnings), is read back as a money.BigPico, exact at any size.
//
// The ledger lets a customer's credit go negative: usage is recorded after it happened, and
// refusing to record it would lose money. Stopping traffic at a zero balance is the gateway's
// job (docs/failure-cases.md, case 19).
//
// Tables: ledger_accounts, ledger_transactions and ledger_postings, which only this package
// names in SQL; its reports are its functions. It imports services and services/money and no
// other part of the platform's money: credits, metering, invoicing and payouts import it, and
// post through Ledger, so the dependency runs one way.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// AccountKind is what a ledger account holds.
type AccountKind string

const (
	AccountCustomerCredit  AccountKind = "customer_credit"  // a customer's prepaid credit
	AccountProviderPayable AccountKind = "provider_payable" // what the platform owes a provider
	AccountPlatformRevenue AccountKind = "platform_revenue" // the platform's margin; one account
	AccountStripeClearing  AccountKind = "stripe_clearing"  // money taken in through Stripe; one account
)

// Owned reports whether accounts of this kind belong to an organisation (customer or
// provider) rather than to the platform.
func (k AccountKind) Owned() bool {
	return k == AccountCustomerCredit || k == AccountProviderPayable
}

// Valid reports whether k is a known kind.
func (k AccountKind) Valid() bool {
	return k.Owned() || k == AccountPlatformRevenue || k == AccountStripeClearing
}

// TransactionKind is the business event a ledger transaction records.
type TransactionKind string

const (
	TransactionPurchase   TransactionKind = "purchase"   // credits bought through Stripe
	TransactionUsage      TransactionKind = "usage"      // a batch of metered usage
	TransactionRefund     TransactionKind = "refund"     // credits given back through Stripe
	TransactionAdjustment TransactionKind = "adjustment" // a correction made by finance
	TransactionPayout     TransactionKind = "payout"     // a provider paid
	// TransactionCreditNote is a credit note that puts the amount of a voided invoice back on
	// the customer's credit and takes the providers' share back from their payables.
	TransactionCreditNote TransactionKind = "credit_note"
)

// Valid reports whether k is a known kind.
func (k TransactionKind) Valid() bool {
	switch k {
	case TransactionPurchase, TransactionUsage, TransactionRefund, TransactionAdjustment, TransactionPayout,
		TransactionCreditNote:
		return true
	}
	return false
}

// LedgerAccountID names a ledger account (not the organisation that owns it).
type LedgerAccountID string

// Posting moves a signed amount into one ledger account.
type Posting struct {
	Account LedgerAccountID
	Amount  money.Pico
}

// Limits of a transaction's text fields and size.
const (
	MaxMemoLength           = 500
	MaxIdempotencyKeyLength = 200
	MaxPostings             = 1000
)

// TransactionInput is a transaction to post.
type TransactionInput struct {
	Kind TransactionKind
	// IdempotencyKey, when not empty, makes the transaction exactly-once: posting a second
	// input with the same key returns the first transaction. Callers derive it from what
	// makes the event unique (a Stripe checkout session, a meter batch).
	IdempotencyKey string
	Memo           string
	CreatedBy      string    // the user who made it, or "" for the system
	OccurredAt     time.Time // when the event happened; zero means now
	Postings       []Posting
}

// Validate checks the input without the database: a known kind, fields within their limits,
// postings that name an account, move some money and sum to exactly zero.
func (in TransactionInput) Validate() error {
	fe := services.FieldErrors{}
	if !in.Kind.Valid() {
		fe.Add("kind", fmt.Sprintf("Unknown transaction kind %q.", in.Kind))
	}
	if len(in.Memo) > MaxMemoLength {
		fe.Add("memo", fmt.Sprintf("Use at most %d characters.", MaxMemoLength))
	}
	if in.CreatedBy != "" && !services.CanonicalUUID(in.CreatedBy) {
		fe.Add("created_by", "Not a user id.")
	}
	if len(in.IdempotencyKey) > MaxIdempotencyKeyLength {
		fe.Add("idempotency_key", fmt.Sprintf("Use at most %d characters.", MaxIdempotencyKeyLength))
	}
	switch {
	case len(in.Postings) == 0:
		fe.Add("postings", "A transaction needs postings.")
	case len(in.Postings) > MaxPostings:
		fe.Add("postings", fmt.Sprintf("A transaction has at most %d postings.", MaxPostings))
	default:
		if problem := postingsProblem(in.Postings); problem != "" {
			fe.Add("postings", problem)
		}
	}
	return fe.Err()
}

// postingsProblem says what is wrong with a set of postings, or "". Positive and negative
// amounts are summed apart with checked additions, so that no intermediate sum can wrap
// around and make an unbalanced transaction look balanced.
func postingsProblem(ps []Posting) string {
	var credits, debits money.Pico
	for _, p := range ps {
		if !services.CanonicalUUID(string(p.Account)) {
			return fmt.Sprintf("%q is not a ledger account id.", p.Account)
		}
		var err error
		if p.Amount > 0 {
			credits, err = credits.Add(p.Amount)
		} else {
			debits, err = debits.Add(p.Amount)
		}
		if err != nil {
			return "The transaction moves more than a single transaction may."
		}
	}
	if credits == 0 && debits == 0 {
		return "The postings move no money."
	}
	if sum, _ := credits.Add(debits); sum != 0 { // opposite signs: cannot overflow
		return fmt.Sprintf("Postings must sum to zero; these sum to %s.", sum)
	}
	return ""
}

// Transaction is a posted ledger transaction.
type Transaction struct {
	ID             string
	Kind           TransactionKind
	IdempotencyKey string
	Memo           string
	CreatedBy      string
	OccurredAt     time.Time
	CreatedAt      time.Time
	Postings       []Posting
}

// Ledger is the double-entry ledger on PostgreSQL.
type Ledger struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewLedger returns the ledger on the given clock (nil means time.Now).
func NewLedger(pool *pgxpool.Pool, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{pool: pool, now: now}
}

// AccountFor returns the ledger account of kind for the organisation ownerAccountID, creating
// it on first use. Platform kinds (platform_revenue, stripe_clearing) take no owner: pass "".
func (l *Ledger) AccountFor(ctx context.Context, kind AccountKind, ownerAccountID string) (_ LedgerAccountID, err error) {
	defer services.Wrap(&err, "ledger.AccountFor(%s, %q)", kind, ownerAccountID)
	if !kind.Valid() {
		return "", services.Errorf(services.CodeInvalid, "Unknown ledger account kind %q.", kind)
	}
	if kind.Owned() != (ownerAccountID != "") {
		if kind.Owned() {
			return "", services.Errorf(services.CodeInvalid, "A %s account needs an owner.", kind)
		}
		return "", services.Errorf(services.CodeInvalid, "The %s account belongs to the platform and takes no owner.", kind)
	}
	owner := pgtype.Text{String: ownerAccountID, Valid: ownerAccountID != ""}
	// Insert-then-read rather than an upsert: an upsert would lock the row and wait behind
	// any transaction posting to the account.
	var id string
	err = l.pool.QueryRow(ctx, `
		INSERT INTO ledger_accounts (kind, owner_account_id, created_at)
		VALUES ($1, $2::uuid, $3)
		ON CONFLICT ON CONSTRAINT ledger_accounts_kind_owner_key DO NOTHING
		RETURNING id`, string(kind), owner, l.now().UTC()).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = l.pool.QueryRow(ctx, `
			SELECT id FROM ledger_accounts
			WHERE kind = $1 AND owner_account_id IS NOT DISTINCT FROM $2::uuid`,
			string(kind), owner).Scan(&id)
	}
	if pgErrorCode(err) == codeForeignKeyViolation || pgErrorCode(err) == codeInvalidText {
		return "", services.Errorf(services.CodeNotFound, "No account %q to open a %s account for.", ownerAccountID, kind)
	}
	if err != nil {
		return "", err
	}
	return LedgerAccountID(id), nil
}

// Post records a transaction in a database transaction of its own. See PostTx.
func (l *Ledger) Post(ctx context.Context, in TransactionInput) (txn Transaction, created bool, err error) {
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		txn, created, err = l.PostTx(ctx, tx, in)
		return err
	})
	return txn, created, err
}

// PostTx records a transaction inside the caller's database transaction, so that a service
// can post together with its own writes (the meter's usage rows, the webhook's session
// state) and commit or roll back both. It returns the stored transaction and whether this
// call created it: with an idempotency key already used for the same kind and postings it
// returns the earlier transaction and created=false, posting nothing; used for different
// ones, a conflict error. Input that breaks a rule (see Validate) is an invalid error, and
// leaves tx usable; an error from the database aborts tx, as any failed statement does.
//
// The account locks taken here are held until the caller commits. A caller that posts more
// than once in one database transaction takes them in the order of its posts, so it may
// deadlock with another such caller (PostgreSQL then aborts one of them with a retryable
// error), unless it takes every lock first with LockTx; one post per database transaction
// never does.
func (l *Ledger) PostTx(ctx context.Context, tx pgx.Tx, in TransactionInput) (_ Transaction, created bool, err error) {
	defer services.Wrap(&err, "ledger.Post(%s, %q)", in.Kind, in.IdempotencyKey)
	if err := in.Validate(); err != nil {
		return Transaction{}, false, err
	}
	if err := lockAccounts(ctx, tx, in.Postings); err != nil {
		return Transaction{}, false, err
	}

	now := l.now().UTC()
	occurred := in.OccurredAt.UTC()
	if in.OccurredAt.IsZero() {
		occurred = now
	}
	key := pgtype.Text{String: in.IdempotencyKey, Valid: in.IdempotencyKey != ""}
	createdBy := pgtype.Text{String: in.CreatedBy, Valid: in.CreatedBy != ""}
	txn := Transaction{
		Kind: in.Kind, IdempotencyKey: in.IdempotencyKey, Memo: in.Memo, CreatedBy: in.CreatedBy,
		OccurredAt: occurred, CreatedAt: now, Postings: slices.Clone(in.Postings),
	}
	// A concurrent insert of the same key makes this statement wait for that transaction,
	// then do nothing if it committed; the read below then sees its row.
	err = tx.QueryRow(ctx, `
		INSERT INTO ledger_transactions (kind, idempotency_key, memo, created_by, occurred_at, created_at)
		VALUES ($1, $2, $3, $4::uuid, $5, $6)
		ON CONFLICT (idempotency_key) DO NOTHING
		RETURNING id`,
		string(in.Kind), key, in.Memo, createdBy, occurred, now).Scan(&txn.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return replay(ctx, tx, in)
	case pgErrorCode(err) == codeForeignKeyViolation:
		return Transaction{}, false, &services.Error{Code: services.CodeInvalid,
			Message: "Please correct the highlighted fields.", Fields: map[string]string{"created_by": "No such user."}}
	case err != nil:
		return Transaction{}, false, err
	}

	accounts := make([]string, len(in.Postings))
	amounts := make([]int64, len(in.Postings))
	for i, p := range in.Postings {
		accounts[i], amounts[i] = string(p.Account), int64(p.Amount)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO ledger_postings (transaction_id, ledger_account_id, amount)
		SELECT $1, p.account::uuid, p.amount
		FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS p(account, amount, n)
		ORDER BY p.n`, txn.ID, accounts, amounts); err != nil {
		return Transaction{}, false, err
	}
	return txn, true, nil
}

// PostAllTx records several transactions inside the caller's database transaction, as PostTx
// records one, but in one round trip: it locks every account they post to, in id order, then
// writes every transaction and its postings in one statement. It is for a caller that posts many
// at once (the meter posts one per customer account per batch), whose database transaction would
// otherwise hold its account locks through three round trips per post. The transactions carry
// no idempotency key (the caller's own writes make its posts happen once); input that breaks a
// rule (see Validate), or that carries a key, is an invalid error and posts nothing, leaving tx
// usable; an error from the database aborts tx, as any failed statement does. The sums are
// checked at commit, per transaction, as PostTx's are.
func (l *Ledger) PostAllTx(ctx context.Context, tx pgx.Tx, ins []TransactionInput) (err error) {
	defer services.Wrap(&err, "ledger.PostAllTx(%d transactions)", len(ins))
	if len(ins) == 0 {
		return nil
	}
	var all []Posting
	for _, in := range ins {
		if err := in.Validate(); err != nil {
			return err
		}
		if in.IdempotencyKey != "" {
			return services.Errorf(services.CodeInvalid, "Transactions posted together carry no idempotency key: post %q on its own.",
				in.IdempotencyKey)
		}
		all = append(all, in.Postings...)
	}
	if err := lockAccounts(ctx, tx, all); err != nil {
		return err
	}
	now := l.now().UTC()
	kinds, memos := make([]string, len(ins)), make([]string, len(ins))
	createdBy, occurred := make([]pgtype.Text, len(ins)), make([]time.Time, len(ins))
	txns, accounts, amounts := make([]int64, 0, len(all)), make([]string, 0, len(all)), make([]int64, 0, len(all))
	for i, in := range ins {
		kinds[i], memos[i] = string(in.Kind), in.Memo
		createdBy[i] = pgtype.Text{String: in.CreatedBy, Valid: in.CreatedBy != ""}
		occurred[i] = in.OccurredAt.UTC()
		if in.OccurredAt.IsZero() {
			occurred[i] = now
		}
		for _, p := range in.Postings {
			txns, accounts, amounts = append(txns, int64(i+1)), append(accounts, string(p.Account)), append(amounts, int64(p.Amount))
		}
	}
	// The transactions' ids are drawn once, in t (a query with a volatile function is evaluated
	// once, not folded into the statements that read it), so that each posting joins the
	// transaction it belongs to. The postings' foreign keys are checked at the end of the
	// statement, when the transactions are in.
	_, err = tx.Exec(ctx, `
		WITH t AS (
			SELECT gen_random_uuid() AS id, kind, memo, created_by, occurred_at, n
			FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY
				AS t (kind, memo, created_by, occurred_at, n)),
		txns AS (
			INSERT INTO ledger_transactions (id, kind, memo, created_by, occurred_at, created_at)
			SELECT id, kind, memo, created_by::uuid, occurred_at, $5 FROM t ORDER BY n)
		INSERT INTO ledger_postings (transaction_id, ledger_account_id, amount)
		SELECT t.id, p.account::uuid, p.amount
		FROM unnest($6::bigint[], $7::text[], $8::bigint[]) WITH ORDINALITY AS p (txn, account, amount, n)
		JOIN t ON t.n = p.txn
		ORDER BY p.n`, kinds, memos, createdBy, occurred, now, txns, accounts, amounts)
	if pgErrorCode(err) == codeForeignKeyViolation {
		return &services.Error{Code: services.CodeInvalid,
			Message: "Please correct the highlighted fields.", Fields: map[string]string{"created_by": "No such user."}}
	}
	return err
}

// LockTx takes, in id order, the locks of every account that the caller is about to post to
// in several transactions inside one database transaction (the meter posts one per customer
// per batch). Taken up front, they make concurrent batches queue instead of deadlocking;
// each PostTx then finds its locks already held.
func (l *Ledger) LockTx(ctx context.Context, tx pgx.Tx, accounts []LedgerAccountID) error {
	postings := make([]Posting, len(accounts))
	for i, a := range accounts {
		postings[i] = Posting{Account: a}
	}
	return lockAccounts(ctx, tx, postings)
}

// lockAccounts takes the row locks of every account the postings touch, in id order, so that
// two transactions over the same accounts queue instead of deadlocking. It also checks that
// every account exists.
func lockAccounts(ctx context.Context, tx pgx.Tx, postings []Posting) error {
	ids := make([]string, 0, len(postings))
	for _, p := range postings {
		ids = append(ids, string(p.Account))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, err := tx.Query(ctx, `
		SELECT id::text FROM ledger_accounts
		WHERE id = ANY ($1::text[]::uuid[])
		ORDER BY id
		FOR UPDATE`, ids)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(found) != len(ids) {
		var missing []string
		for _, id := range ids {
			if !slices.Contains(found, id) {
				missing = append(missing, id)
			}
		}
		return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"postings": "No ledger account " + strings.Join(missing, ", ") + "."}}
	}
	return nil
}

// replay returns the transaction already stored under in's idempotency key, after checking
// that it records the same event: the same kind and the same postings, in any order.
func replay(ctx context.Context, tx pgx.Tx, in TransactionInput) (Transaction, bool, error) {
	var t Transaction
	var createdBy pgtype.Text
	err := tx.QueryRow(ctx, `
		SELECT id, kind, memo, created_by::text, occurred_at, created_at
		FROM ledger_transactions WHERE idempotency_key = $1`, in.IdempotencyKey).
		Scan(&t.ID, &t.Kind, &t.Memo, &createdBy, &t.OccurredAt, &t.CreatedAt)
	if err != nil {
		return Transaction{}, false, err
	}
	t.IdempotencyKey, t.CreatedBy = in.IdempotencyKey, createdBy.String
	if t.Postings, err = postingsOf(ctx, tx, t.ID); err != nil {
		return Transaction{}, false, err
	}
	if t.Kind != in.Kind || !samePostings(t.Postings, in.Postings) {
		return Transaction{}, false, services.Errorf(services.CodeConflict,
			"The idempotency key %q was already used for a different transaction.", in.IdempotencyKey)
	}
	return t, false, nil
}

func postingsOf(ctx context.Context, tx pgx.Tx, transactionID string) ([]Posting, error) {
	rows, err := tx.Query(ctx, `
		SELECT ledger_account_id::text, amount FROM ledger_postings
		WHERE transaction_id = $1 ORDER BY id`, transactionID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Posting, error) {
		var p Posting
		var amount pgtype.Numeric
		if err := r.Scan(&p.Account, &amount); err != nil {
			return Posting{}, err
		}
		p.Amount, err = picoFromNumeric(amount)
		return p, err
	})
}

func samePostings(a, b []Posting) bool {
	order := func(x, y Posting) int {
		if c := strings.Compare(string(x.Account), string(y.Account)); c != 0 {
			return c
		}
		return cmp.Compare(x.Amount, y.Amount)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, order)
	slices.SortFunc(b, order)
	return slices.Equal(a, b)
}

// picoFromNumeric reads a NUMERIC amount into a Pico, refusing one outside its range with
// money.ErrOverflow rather than returning a wrong number.
func picoFromNumeric(n pgtype.Numeric) (money.Pico, error) {
	if !n.Valid {
		return 0, errors.New("ledger: NULL amount")
	}
	v, err := n.Int64Value()
	if err != nil {
		return 0, fmt.Errorf("ledger: a stored amount is outside the range of money.Pico: %w", money.ErrOverflow)
	}
	return money.Pico(v.Int64), nil
}

const (
	codeForeignKeyViolation = "23503"
	codeInvalidText         = "22P02"
)

func pgErrorCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
