package payouts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// AttemptLease is how long an attempt owns its payout. A second Pay of the statement within it
// is refused as under way; after it, the attempt is taken to have ended without telling (a
// crash), and the next one starts by looking for the transfer it may have made. It outlasts
// the Stripe client's worst case (three tries of 20 s each).
const AttemptLease = 5 * time.Minute

// attempt is one try at paying a payout, from its claim to its outcome.
type attempt struct {
	payout Payout
	number int  // the payout's attempts after the claim: only this attempt writes its outcome
	doubt  bool // an earlier attempt sent a transfer whose outcome the platform does not know
	in     statementInput
	// The provider's payable and Stripe clearing: what the payout posts between.
	payable, clearing ledger.LedgerAccountID
}

func (a attempt) request(destination string) TransferRequest {
	return TransferRequest{PayoutID: a.payout.ID, StatementID: a.in.ID, StatementNumber: a.in.Number, Period: a.in.Period,
		ProviderAccountID: a.in.ProviderAccountID, Destination: destination, AmountCents: a.in.AmountCents}
}

// Pay pays a statement: one Stripe Transfer of its amount to the provider's connected
// account, keyed by the statement, posted on the ledger from the provider's payable to Stripe
// clearing. Its payout is made on the first call and kept: calling Pay again for a paid
// statement returns the payout and does nothing; for a failed one it tries again with the same
// key and amount; while an attempt is under way it is refused.
//
// A statement that owes nothing is refused before anything is written. A payout that cannot be
// sent (no connected account, onboarding unfinished, a payable balance that does not cover it)
// or that Stripe refuses is left failed with its reason, posts nothing, and is returned with
// the error. A call that got no answer from Stripe is left failed and in doubt: the next
// attempt looks for its transfer first, so it never pays twice (docs/payouts.md, "Paying a statement").
func (s *Service) Pay(ctx context.Context, st Statement) (_ Payout, err error) {
	in, err := readStatement(st)
	if err != nil {
		return Payout{}, fmt.Errorf("payouts.Pay: %w", err)
	}
	defer services.Wrap(&err, "payouts.Pay(%s)", in.ID)
	a := attempt{in: in}
	if a.payable, err = s.ledger.AccountFor(ctx, ledger.AccountProviderPayable, in.ProviderAccountID); err != nil {
		return Payout{}, err
	}
	if a.clearing, err = s.ledger.AccountFor(ctx, ledger.AccountStripeClearing, ""); err != nil {
		return Payout{}, err
	}
	p, claimed, err := s.claim(ctx, &a)
	if err != nil || !claimed {
		return p, err
	}
	// From here money may move: the attempt records its outcome even if the caller goes away.
	ctx = context.WithoutCancel(ctx)
	if a.doubt && a.payout.StripeAccountID != "" {
		req := a.request(a.payout.StripeAccountID)
		t, found, err := s.stripe.FindTransfer(ctx, req)
		if err != nil {
			return s.fail(ctx, a, true, clip(fmt.Sprintf("Could not look for the transfer of an earlier attempt (%v). Nothing more was sent; a retry looks again.", err)), err)
		}
		if found {
			return s.settle(ctx, a, req, t)
		}
	}
	req, refusal, err := s.check(ctx, a)
	if err != nil {
		return Payout{}, err
	}
	if refusal != nil {
		return s.fail(ctx, a, false, refusal.Message, refusal)
	}
	t, err := s.stripe.CreateTransfer(ctx, req)
	if err != nil {
		doubt, reason := outcomeOf(err)
		return s.fail(ctx, a, doubt, reason, err)
	}
	if !t.pays(req) {
		return s.fail(ctx, a, true, clip(fmt.Sprintf("Stripe answered with transfer %s of %s to %s in group %q, which is not this payout's. Nothing was posted; check it at Stripe before retrying.",
			t.ID, centsText(t.AmountCents), t.Destination, t.Group)), nil)
	}
	return s.settle(ctx, a, req, t)
}

// Retry tries a payout again, for finance: it asks the invoicing side for the statement as it
// stands now (a statement voided since is not paid) and pays it. A paid payout is returned
// as it is.
func (s *Service) Retry(ctx context.Context, payoutID string) (_ Payout, err error) {
	defer services.Wrap(&err, "payouts.Retry(%s)", payoutID)
	p, err := s.Get(ctx, payoutID)
	if err != nil || p.Status == StatusPaid {
		return p, err
	}
	if s.statements == nil {
		return p, services.Errorf(services.CodeUnavailable, "Statements are not available here, so the payout cannot be retried.")
	}
	st, err := s.statements.StatementToPay(ctx, p.StatementID)
	if err != nil {
		return p, err
	}
	if st.StatementID() != p.StatementID {
		return p, fmt.Errorf("asked for statement %s, got %s", p.StatementID, st.StatementID())
	}
	return s.Pay(ctx, st)
}

// claim makes the statement's payout on first use and claims it for this attempt. It reports
// claimed=false, with the payout, when there is nothing to do (already paid). A statement that
// no longer says what its payout was first made with, or whose payout another attempt holds,
// is refused.
func (s *Service) claim(ctx context.Context, a *attempt) (Payout, bool, error) {
	id, err := services.NewUUID()
	if err != nil {
		return Payout{}, false, err
	}
	now := s.now().UTC()
	var p Payout
	claimed := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		in := a.in
		if _, err := tx.Exec(ctx, `
			INSERT INTO payouts (id, statement_id, statement_number, period, provider_account_id, amount_cents, status, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7)
			ON CONFLICT (statement_id) DO NOTHING`, id, in.ID, in.Number, in.Period, in.ProviderAccountID, in.AmountCents, now); err != nil {
			return err
		}
		var err error
		if p, err = s.scanPayout(tx.QueryRow(ctx, `SELECT `+payoutColumns+payoutFrom+` WHERE p.statement_id = $1 FOR UPDATE OF p`, in.ID)); err != nil {
			return err
		}
		if err := named(ctx, tx, &p); err != nil {
			return err
		}
		switch {
		case p.ProviderAccountID != in.ProviderAccountID || p.AmountCents != in.AmountCents:
			return services.Errorf(services.CodeConflict,
				"Statement %s was first paid as %s to account %s, and now says %s to account %s. Nothing was sent: a payout's amount and provider never change.",
				in.ID, centsText(p.AmountCents), p.ProviderAccountID, centsText(in.AmountCents), in.ProviderAccountID)
		case p.Status == StatusPaid:
			return nil
		case underway(p, now):
			return services.Errorf(services.CodeConflict,
				"A payment of statement %s is under way; its outcome shows in a moment.", in.Number)
		}
		a.doubt = p.InDoubt || (p.Status == StatusPending && p.Attempts > 0)
		a.number = p.Attempts + 1
		if _, err := tx.Exec(ctx, `UPDATE payouts SET status = 'pending', attempts = $2, attempt_started_at = $3, updated_at = $3
			WHERE id = $1`, p.ID, a.number, now); err != nil {
			return err
		}
		claimed = true
		return nil
	})
	if err != nil {
		return p, false, err
	}
	a.payout = p
	return p, claimed, nil
}

// underway reports whether an attempt holds the payout now.
func underway(p Payout, now time.Time) bool {
	return p.Status == StatusPending && p.AttemptStartedAt != nil && now.Sub(*p.AttemptStartedAt) < AttemptLease
}

// check decides whether the payout may be sent, under the lock of the provider's payable
// account, so that two payouts of one provider are checked one after the other. It returns the
// transfer to send, or the refusal to record. The money rule (docs/payouts.md, "What may be
// paid"): the payable balance less what the provider's other payouts on their way hold back
// must cover the whole amount; a payout is never cut down to fit. The invoicing side is asked,
// under the same lock, whether the statement still stands as the payout was made (docs/payouts.md,
// "Joining the statements").
func (s *Service) check(ctx context.Context, a attempt) (req TransferRequest, refusal *services.Error, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.ledger.LockTx(ctx, tx, []ledger.LedgerAccountID{a.payable}); err != nil {
			return err
		}
		if refusal, err = s.stillToPay(ctx, a.in); err != nil || refusal != nil {
			return err
		}
		var destination string
		var enabled bool
		err := tx.QueryRow(ctx, `SELECT coalesce(stripe_account_id, ''), payouts_enabled FROM provider_stripe_accounts
			WHERE provider_account_id = $1`, a.in.ProviderAccountID).Scan(&destination, &enabled)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		switch {
		case destination == "":
			refusal = services.Errorf(services.CodeConflict,
				"The provider has no Stripe account connected, so nothing was paid. The provider connects one on its Payouts page; then retry.")
			return nil
		case !enabled:
			refusal = services.Errorf(services.CodeConflict,
				"The provider's Stripe account %s cannot receive payouts yet, so nothing was paid. The provider finishes Stripe's onboarding on its Payouts page; then retry.",
				destination)
			return nil
		}
		balance, err := s.ledger.BalanceTx(ctx, tx, a.payable)
		if err != nil {
			return err
		}
		var reserved money.BigPico
		if err := tx.QueryRow(ctx, `
			SELECT coalesce(sum(amount_cents), 0)::numeric * $3 FROM payouts
			WHERE provider_account_id = $1 AND id <> $2 AND (status = 'pending' OR in_doubt)`,
			a.in.ProviderAccountID, a.payout.ID, int64(money.PicoPerCent)).Scan(&reserved); err != nil {
			return err
		}
		amount := centsToPico(a.in.AmountCents)
		if !covers(balance, reserved, amount) {
			msg := fmt.Sprintf("The provider's payable balance is %s", balance.String())
			if reserved.Sign() != 0 {
				msg += fmt.Sprintf(", of which %s is held for its other payouts on their way", reserved.String())
			}
			refusal = services.Errorf(services.CodeConflict,
				"%s: less than this statement's %s, so nothing was paid. Money was taken back (a refund) after the statement was made; the shortfall nets against the next statement. Void and regenerate this one, or retry once the balance covers it.",
				msg, centsText(a.in.AmountCents))
			return nil
		}
		req = a.request(destination)
		_, err = tx.Exec(ctx, `UPDATE payouts SET stripe_account_id = $2, updated_at = $3 WHERE id = $1 AND attempts = $4`,
			a.payout.ID, destination, s.now().UTC(), a.number)
		return err
	})
	return req, refusal, err
}

// stillToPay asks the invoicing side whether the statement is still to be paid as its payout
// was made: not voided nor paid since, the same amount to the same provider. It runs under the
// provider's payable lock, which the invoicing side takes too before it voids a statement or
// records it paid by hand, so that one of the two always sees the other. Without the invoicing
// side wired in, Pay pays the statement it was given.
func (s *Service) stillToPay(ctx context.Context, in statementInput) (*services.Error, error) {
	if s.statements == nil {
		return nil, nil
	}
	st, err := s.statements.StatementToPay(ctx, in.ID)
	var e *services.Error
	switch {
	case errors.As(err, &e) && e.Code != services.CodeInternal:
		return services.Errorf(services.CodeConflict, "%s Nothing was paid.", e.Message), nil
	case err != nil:
		return nil, err
	case st.PayableCents() != in.AmountCents || st.PayeeAccountID() != in.ProviderAccountID:
		return services.Errorf(services.CodeConflict,
			"Statement %s now says %s to account %s, not the %s to account %s its payout was made for. Nothing was paid.",
			in.Number, centsText(st.PayableCents()), st.PayeeAccountID(), centsText(in.AmountCents), in.ProviderAccountID), nil
	}
	return nil, nil
}

// fail records that the attempt did not pay, with its reason, and returns the payout and the
// error. inDoubt says a transfer may nonetheless exist. Only the attempt that holds the payout
// writes: one whose lease ran out and was taken over by another leaves it alone.
func (s *Service) fail(ctx context.Context, a attempt, inDoubt bool, reason string, cause error) (Payout, error) {
	if _, err := s.pool.Exec(ctx, `
		UPDATE payouts SET status = 'failed', last_error = $3, in_doubt = $4, attempt_started_at = NULL, updated_at = $5
		WHERE id = $1 AND attempts = $2 AND status = 'pending'`, a.payout.ID, a.number, reason, inDoubt, s.now().UTC()); err != nil {
		return Payout{}, errors.Join(cause, err)
	}
	p, err := s.Get(ctx, a.payout.ID)
	if err != nil {
		return Payout{}, errors.Join(cause, err)
	}
	code := services.CodeConflict
	if inDoubt {
		code = services.CodeUnavailable
	}
	return p, &services.Error{Code: code, Message: reason, Cause: cause}
}

// settle records a transfer that pays the payout: the ledger posting, keyed by the statement,
// and the payout paid with its transfer, in one database transaction, with the invoicing
// side's record that the statement is paid. A payout already paid is returned as it is.
func (s *Service) settle(ctx context.Context, a attempt, req TransferRequest, t Transfer) (Payout, error) {
	now := s.now().UTC()
	var p Payout
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if p, err = s.scanPayout(tx.QueryRow(ctx, `SELECT `+payoutColumns+payoutFrom+` WHERE p.id = $1 FOR UPDATE OF p`, a.payout.ID)); err != nil {
			return err
		}
		if err := named(ctx, tx, &p); err != nil {
			return err
		}
		if p.Status == StatusPaid {
			return nil
		}
		amount := centsToPico(a.in.AmountCents)
		txn, _, err := s.ledger.PostTx(ctx, tx, ledger.TransactionInput{
			Kind: ledger.TransactionPayout, IdempotencyKey: "payout:" + a.in.ID,
			Memo: clip(fmt.Sprintf("Payout of %s to %s for statement %s (%s), Stripe transfer %s",
				centsText(a.in.AmountCents), p.ProviderName, a.in.Number, a.in.Period, t.ID)),
			OccurredAt: now,
			Postings:   []ledger.Posting{{Account: a.payable, Amount: -amount}, {Account: a.clearing, Amount: amount}},
		})
		if err != nil {
			return err
		}
		if p, err = s.scanPayout(tx.QueryRow(ctx, `
			WITH paid AS (
				UPDATE payouts SET status = 'paid', stripe_transfer_id = $2, stripe_account_id = $3, ledger_transaction_id = $4,
					paid_at = $5, last_error = '', in_doubt = false, attempt_started_at = NULL, updated_at = $5
				WHERE id = $1 RETURNING *)
			SELECT `+payoutColumns+` FROM paid p`,
			p.ID, t.ID, req.Destination, txn.ID, now)); err != nil {
			return err
		}
		if err := named(ctx, tx, &p); err != nil {
			return err
		}
		if s.events != nil {
			if err := s.events.Emit(ctx, tx, p.ProviderAccountID, EventPayoutPaid, EventPayoutPaid+":"+p.ID, PayoutPaid{
				PayoutID: p.ID, StatementID: p.StatementID, StatementNumber: p.StatementNumber, Period: p.Period,
				Currency: p.Currency, AmountCents: p.AmountCents, AmountUSD: centsToPico(p.AmountCents).Decimal(2),
				StripeTransferID: p.StripeTransferID, PaidAt: now,
			}); err != nil {
				return err
			}
		}
		if s.statements != nil {
			return s.statements.MarkPaidTx(ctx, tx, a.in.ID, p)
		}
		return nil
	})
	if err != nil {
		return Payout{}, fmt.Errorf("record transfer %s: %w", t.ID, err)
	}
	return p, nil
}

// EventPayoutPaid is the webhook event of a provider's payout transferred.
const EventPayoutPaid = "payout.paid"

// PayoutPaid is the data of a payout.paid event: the amount in cents and as decimal dollars.
type PayoutPaid struct {
	PayoutID         string    `json:"payout_id"`
	StatementID      string    `json:"statement_id"`
	StatementNumber  string    `json:"statement_number"`
	Period           string    `json:"period"` // "YYYY-MM"
	Currency         string    `json:"currency"`
	AmountCents      int64     `json:"amount_cents"`
	AmountUSD        string    `json:"amount_usd"`
	StripeTransferID string    `json:"stripe_transfer_id"`
	PaidAt           time.Time `json:"paid_at"`
}
