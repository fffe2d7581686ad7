package invoicing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/payouts"
)

// Paying statements (see docs/invoicing.md, "Paying statements"): once a statement that pays
// out is approved, and its numbering transaction has committed, approval hands it to the
// Payer (payouts.Service.Pay), which makes its Stripe transfer and, in the transaction that
// posts it, records the statement paid through MarkPaidTx. The service is the payouts side's
// payouts.Statements. A payout that fails leaves the statement issued; finance retries it from
// the payouts page, and payouts asks StatementToPay for the statement as it stands then.
//
// This file reads the payouts table of package payouts (whether a statement's payout is under
// way) and takes the provider's payable ledger account lock of package ledger, the lock
// payouts checks a payout under.

// Payer pays an approved statement: payouts.Service.
type Payer interface {
	Pay(ctx context.Context, st payouts.Statement) (payouts.Payout, error)
}

var _ Payer = (*payouts.Service)(nil)

var _ payouts.Statements = (*Service)(nil)

// PayWith makes approval pay each statement it issues with a payout through p. It is called
// once, while the platform is wired and before the service serves an approval: the payouts
// service takes this one as its payouts.Statements, so neither can be built with the other.
// Without a payer, statements are issued and paid by hand (MarkStatementPaid).
func (s *Service) PayWith(p Payer) { s.payer = p }

// payableStatement is a statement as Pay takes it.
type payableStatement struct {
	id, providerID, number string
	period                 Period
	payout                 Cents
}

var _ payouts.Statement = payableStatement{}

func (p payableStatement) StatementID() string     { return p.id }
func (p payableStatement) PayeeAccountID() string  { return p.providerID }
func (p payableStatement) PayableCents() int64     { return int64(p.payout) }
func (p payableStatement) StatementPeriod() string { return p.period.String() }
func (p payableStatement) StatementNumber() string { return p.number }

// actorKey carries, on a context, the user on whose behalf a statement is paid.
type actorKey struct{}

// ActingAs returns ctx naming the finance user whose action pays a statement (the approval,
// or a retry of its payout), so that the statement's paid_by and the payout's audit entry
// name them. A payout on a context without one is recorded as the platform's own.
func ActingAs(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, actorKey{}, userID)
}

func actorOf(ctx context.Context) string {
	id, _ := ctx.Value(actorKey{}).(string)
	if !isUUID(id) {
		return ""
	}
	return id
}

// payOut pays an approved statement through the payer and says on its approval how it went.
// A payout that fails leaves the approval standing: the statement is issued, and its payout
// failed with the reason, for finance to retry.
func (s *Service) payOut(ctx context.Context, by string, st payableStatement, res *Approved) {
	p, err := s.payer.Pay(ActingAs(ctx, by), st)
	if p.ID != "" {
		res.Payout = &p
	}
	if err != nil {
		res.PayoutErr, res.PayoutProblem = err, problemOf(err)
		s.log.Warn("an approved statement's payout failed", "statement", st.id, "number", st.number, "err", err)
	}
}

// StatementToPay returns the statement as it stands now, for its payout: an issued statement
// with a payout. Any other (a draft, one paid, one voided, one that carries over) is refused
// with what to do, and nothing is paid. Payouts asks it before a retry and again, under the
// provider's payable lock, before it sends a transfer.
func (s *Service) StatementToPay(ctx context.Context, id string) (_ payouts.Statement, err error) {
	defer services.Wrap(&err, "invoicing.StatementToPay(%s)", id)
	if !isUUID(id) {
		return nil, errStatementNotFound
	}
	var st payableStatement
	var status Status
	var period time.Time
	err = s.pool.QueryRow(ctx, `SELECT id::text, provider_account_id::text, coalesce(number, ''), period, status, payout_cents
		FROM statements WHERE id = $1`, id).Scan(&st.id, &st.providerID, &st.number, &period, &status, &st.payout)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errStatementNotFound
	}
	if err != nil {
		return nil, err
	}
	st.period = periodOfDate(period)
	if problem := payoutProblem(status, st.payout, displayNumber(st.number)); problem != "" {
		return nil, services.Errorf(services.CodeConflict, "%s", problem)
	}
	return st, nil
}

// payoutProblem says why a statement in this state is not paid out, or "".
func payoutProblem(status Status, payout Cents, number string) string {
	switch {
	case status == StatusDraft:
		return fmt.Sprintf("Statement %s is a draft: it is paid once approved.", number)
	case status == StatusPaid:
		return fmt.Sprintf("Statement %s is already paid.", number)
	case status == StatusVoid:
		return fmt.Sprintf("Statement %s is void: its regenerated statement is paid once approved.", number)
	case payout <= 0:
		return fmt.Sprintf("Statement %s pays nothing out: what it nets is carried over to the next statement.", number)
	}
	return ""
}

// MarkPaidTx records, inside the transaction that marks the payout paid and posts it on the
// ledger, that the statement is paid by it: status paid, with the transfer as its reference,
// and the audit entry payout. The statement must be issued and say what the payout paid, to
// whom; anything else is an error, and the whole transaction, posting included, rolls back.
func (s *Service) MarkPaidTx(ctx context.Context, tx pgx.Tx, id string, p payouts.Payout) (err error) {
	defer services.Wrap(&err, "invoicing.MarkPaidTx(%s)", id)
	var status Status
	var number, provider string
	var payout Cents
	err = tx.QueryRow(ctx, `SELECT status, coalesce(number, ''), payout_cents, provider_account_id::text
		FROM statements WHERE id = $1 FOR UPDATE`, id).Scan(&status, &number, &payout, &provider)
	if errors.Is(err, pgx.ErrNoRows) {
		return errStatementNotFound
	}
	if err != nil {
		return err
	}
	names, err := accounts.NamesByID(ctx, tx, []string{provider})
	if err != nil {
		return err
	}
	providerName := names[provider]
	switch {
	case status != StatusIssued:
		return fmt.Errorf("statement %s is %s, and its payout %s cannot be recorded on it", displayNumber(number), status, p.ID)
	case p.Status != payouts.StatusPaid || p.StripeTransferID == "" || p.PaidAt == nil:
		return fmt.Errorf("payout %s is %s, not paid", p.ID, p.Status)
	case Cents(p.AmountCents) != payout || p.ProviderAccountID != provider:
		return fmt.Errorf("payout %s paid %s to account %s; statement %s pays %s to account %s", p.ID,
			Cents(p.AmountCents), p.ProviderAccountID, displayNumber(number), payout, provider)
	}
	by := actorOf(ctx)
	if _, err := tx.Exec(ctx, `UPDATE statements SET status = 'paid', paid_at = $2, paid_by = nullif($3, '')::uuid,
		payment_reference = $4 WHERE id = $1`, id, p.PaidAt.UTC(), by, p.StripeTransferID); err != nil {
		return wrapf(err, "invoicing: record the statement paid")
	}
	type state struct {
		Status      Status `json:"status"`
		Payout      Cents  `json:"payout_cents"`
		PayoutID    string `json:"payout_id,omitempty"`
		Transfer    string `json:"stripe_transfer_id,omitempty"`
		Destination string `json:"stripe_account_id,omitempty"`
		Ledger      string `json:"ledger_transaction_id,omitempty"`
	}
	return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
		ActorID: by, Action: audit.ActionPayout, SubjectKind: "statement", SubjectID: id,
		Summary: fmt.Sprintf("Paid statement %s to %s: %s by Stripe transfer %s", number, providerName, payout, p.StripeTransferID),
		Before:  state{Status: StatusIssued, Payout: payout},
		After: state{Status: StatusPaid, Payout: payout, PayoutID: p.ID, Transfer: p.StripeTransferID,
			Destination: p.StripeAccountID, Ledger: p.LedgerTransactionID},
	})
}

// lockPayable takes, in tx, the lock of the provider's payable ledger account: the lock under
// which payouts checks a payout and asks StatementToPay before it sends the transfer. A void
// or a payment recorded by hand takes it before it reads whether a payout is under way, so
// that of the two, whichever comes second sees what the first did (see docs/invoicing.md,
// "Paying statements").
func (s *Service) lockPayable(ctx context.Context, tx pgx.Tx, providerID string) error {
	payable, err := s.cfg.Ledger.AccountFor(ctx, ledger.AccountProviderPayable, providerID)
	if err != nil {
		return err
	}
	return s.cfg.Ledger.LockTx(ctx, tx, []ledger.LedgerAccountID{payable})
}

// statementPayoutUnderway reads, in tx, whether the statement's payout is under way
// (payouts.UnderwayOf).
func statementPayoutUnderway(ctx context.Context, tx pgx.Tx, id string) (bool, error) {
	underway, err := payouts.UnderwayOf(ctx, tx, []string{id})
	return underway[id], err
}
