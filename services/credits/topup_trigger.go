package credits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/money"
)

// DefaultTopupEvery is how often the worker looks at the balances of the accounts with auto
// top-up on.
const DefaultTopupEvery = 5 * time.Second

// Run evaluates every account with auto top-up on, every `every`, until ctx ends. Every process
// may run it: the settings' lock and the attempt's row make two workers charge once.
func (t *AutoTopup) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := t.RunOnce(ctx); err != nil && ctx.Err() == nil && log != nil {
			log.Warn("auto top-up round failed; the next round tries again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// RunOnce gives up the charges that waited too long for Stripe's word, sends again the others
// that got no answer, then evaluates each account with auto top-up on. It returns the first
// error and goes on past it.
func (t *AutoTopup) RunOnce(ctx context.Context) (err error) {
	defer services.Wrap(&err, "credits.AutoTopup.RunOnce")
	first := func(e error) {
		if err == nil {
			err = e
		}
	}
	first(t.giveUp(ctx))
	first(t.resume(ctx))
	rows, err := t.pool.Query(ctx, `SELECT account_id FROM topup_settings WHERE enabled ORDER BY account_id`)
	if err != nil {
		return err
	}
	accounts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range accounts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		first(t.Evaluate(ctx, id))
	}
	return err
}

// Evaluate charges the account's top-up if its balance is below its threshold and this
// crossing has not been charged yet. The decision and the attempt's row are one transaction
// that holds the account's settings locked, so two workers evaluating at once make one attempt;
// Stripe is called after it commits, with the attempt's id as the idempotency key.
func (t *AutoTopup) Evaluate(ctx context.Context, accountID string) (err error) {
	defer services.Wrap(&err, "credits.AutoTopup.Evaluate(%s)", accountID)
	a, ok, err := t.open(ctx, accountID)
	if err != nil || !ok {
		return err
	}
	return t.charge(ctx, a)
}

// attempt is an attempt's row as the trigger reads it.
type attempt struct {
	ID, AccountID, CustomerID, PaymentMethodID string
	AmountCents                                int64
}

// open makes the crossing's attempt, if the balance is below the threshold and the crossing has
// none. A balance at or above the threshold arms the next crossing.
func (t *AutoTopup) open(ctx context.Context, accountID string) (attempt, bool, error) {
	credit, err := t.ledger.AccountFor(ctx, ledger.AccountCustomerCredit, accountID)
	if err != nil {
		return attempt{}, false, err
	}
	now := t.now().UTC()
	a := attempt{AccountID: accountID}
	made := false
	err = pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		var enabled, armed bool
		var threshold int64
		err := tx.QueryRow(ctx, `SELECT enabled, armed, threshold_cents, amount_cents, stripe_customer_id, payment_method_id
			FROM topup_settings WHERE account_id = $1 FOR UPDATE`, accountID).
			Scan(&enabled, &armed, &threshold, &a.AmountCents, &a.CustomerID, &a.PaymentMethodID)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !enabled) {
			return nil
		}
		if err != nil {
			return err
		}
		balance, err := t.ledger.BalanceTx(ctx, tx, credit)
		if err != nil {
			return err
		}
		if balance.Cmp(money.BigPicoOf(centsToPico(threshold))) >= 0 {
			if !armed {
				_, err = tx.Exec(ctx, `UPDATE topup_settings SET armed = true WHERE account_id = $1`, accountID)
			}
			return err
		}
		if !armed {
			return nil // this crossing has had its charge
		}
		var open, today int
		if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('created', 'pending')), count(*) FILTER (WHERE created_at > $2)
			FROM topup_attempts WHERE account_id = $1`, accountID, now.Add(-24*time.Hour)).Scan(&open, &today); err != nil {
			return err
		}
		if open > 0 || today >= MaxTopupsPerDay {
			return nil
		}
		if a.ID, err = services.NewUUID(); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO topup_attempts (id, account_id, amount_cents, stripe_customer_id, payment_method_id, status,
				tries, next_try_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, 'created', 1, $6, $7, $7)`,
			a.ID, accountID, a.AmountCents, a.CustomerID, a.PaymentMethodID, now.Add(t.retryAfter), now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE topup_settings SET armed = false WHERE account_id = $1`, accountID)
		made = err == nil
		return err
	})
	return a, made, err
}

// resume sends again each charge that got no answer (a timeout, a restart between recording
// the attempt and calling Stripe) once its wait is over, with the same idempotency key: Stripe
// answers with the charge it made, if it made one. Taking an attempt moves its next try on and
// counts the try, so that two workers do not send one charge at once and a charge is sent at
// most MaxChargeTries times (giveUp ends it then).
func (t *AutoTopup) resume(ctx context.Context) error {
	now := t.now().UTC()
	rows, err := t.pool.Query(ctx, `
		UPDATE topup_attempts SET next_try_at = $2, tries = tries + 1, updated_at = $1
		WHERE id IN (SELECT id FROM topup_attempts WHERE status = 'created' AND next_try_at <= $1
			AND tries < $3 AND created_at > $4
			ORDER BY next_try_at LIMIT 20 FOR UPDATE SKIP LOCKED)
		RETURNING id, account_id, stripe_customer_id, payment_method_id, amount_cents`,
		now, now.Add(t.retryAfter), MaxChargeTries, now.Add(-t.answerWait))
	if err != nil {
		return err
	}
	due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		return err
	}
	var first error
	for _, a := range due {
		if err := t.charge(ctx, a); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// giveUp ends each charge that waited too long for Stripe's word: one sent MaxChargeTries times
// with no answer, once its last try's wait is over, and one neither answered nor confirmed by
// its webhook within answerWait. Each becomes unanswered, auto top-up stops, and the account
// is alerted once (failTx), as for a decline; the crossing keeps its one charge.
func (t *AutoTopup) giveUp(ctx context.Context) error {
	now := t.now().UTC()
	rows, err := t.pool.Query(ctx, `
		SELECT id, tries FROM topup_attempts
		WHERE (status = 'created' AND next_try_at <= $1 AND (tries >= $2 OR created_at <= $3))
			OR (status = 'pending' AND created_at <= $3)
		ORDER BY created_at LIMIT 20`, now, MaxChargeTries, now.Add(-t.answerWait))
	if err != nil {
		return err
	}
	type waiting struct {
		ID    string
		Tries int
	}
	due, err := pgx.CollectRows(rows, pgx.RowToStructByPos[waiting])
	if err != nil {
		return err
	}
	var first error
	for _, a := range due {
		reason := fmt.Sprintf("The payment provider did not confirm the charge within %s.", waitText(t.answerWait))
		if a.Tries >= MaxChargeTries {
			reason = fmt.Sprintf("The payment provider did not answer the charge, sent %d times.", a.Tries)
		}
		reason += " Nothing was added; if your card was charged, the credit is added when the payment provider confirms it."
		err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
			_, err := t.settleTx(ctx, tx, a.ID, "", reason, AttemptUnanswered)
			return err
		})
		if err != nil && first == nil {
			first = fmt.Errorf("giving up top-up %s: %w", a.ID, err)
		}
	}
	return first
}

// waitText writes a wait in whole hours, or minutes under an hour.
func waitText(d time.Duration) string {
	if d >= time.Hour {
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return fmt.Sprintf("%d minutes", int(d.Minutes()))
}

// charge sends the attempt's charge and records Stripe's answer. A charge Stripe took waits for
// its webhook to credit it; a refusal stops auto top-up; no answer leaves the attempt to be sent
// again with the same key.
func (t *AutoTopup) charge(ctx context.Context, a attempt) error {
	res, err := t.cards.Charge(ctx, ChargeRequest{AttemptID: a.ID, AccountID: a.AccountID, CustomerID: a.CustomerID,
		PaymentMethodID: a.PaymentMethodID, AmountCents: a.AmountCents})
	var refused *ChargeRefused
	switch {
	case errors.As(err, &refused):
		return t.Fail(ctx, a.ID, refused.PaymentIntentID, refusalText(refused.Code, refused.DeclineCode, refused.Message))
	case err != nil:
		return err
	case res.Status == "requires_action":
		return t.Fail(ctx, a.ID, res.PaymentIntentID, refusalText("authentication_required", "", ""))
	}
	// Only the webhook credits (docs/auto-topup.md): the answer only says which PaymentIntent
	// to expect. A decline Stripe tells later comes as payment_intent.payment_failed.
	tag, err := t.pool.Exec(ctx, `UPDATE topup_attempts SET status = 'pending', stripe_payment_intent = $2, updated_at = $3
		WHERE id = $1 AND status = 'created'`, a.ID, res.PaymentIntentID, t.now().UTC())
	if err != nil || tag.RowsAffected() == 0 || t.charged == nil {
		return err
	}
	t.charged(ctx, TopupCharge{AttemptID: a.ID, AccountID: a.AccountID, CustomerID: a.CustomerID,
		PaymentIntentID: res.PaymentIntentID, AmountCents: a.AmountCents})
	return nil
}

// TopupCharge is a charge Stripe took, waiting for its webhook.
type TopupCharge struct {
	AttemptID, AccountID, CustomerID, PaymentIntentID string
	AmountCents                                       int64
}

// refusalText is what the customer reads about a refused charge.
func refusalText(code, declineCode, message string) string {
	switch {
	case code == "authentication_required":
		return "Your bank asked to confirm the payment, which cannot happen while you are away. Buy credits by hand once to confirm the card, or save another card."
	case declineCode == "insufficient_funds":
		return "The card was declined: insufficient funds."
	case code == "expired_card":
		return "The card has expired. Save another card."
	case message != "":
		return "The card was declined: " + message
	}
	return "The card was declined."
}

// Fail records that an attempt's charge was refused: the attempt fails, auto top-up turns off
// with the reason, and the alert (an e-mail to the account and a topup.failed event) is raised
// in the same transaction, so it is raised once. A failure of an attempt already settled
// changes nothing.
func (t *AutoTopup) Fail(ctx context.Context, attemptID, paymentIntent, reason string) (err error) {
	defer services.Wrap(&err, "credits.AutoTopup.Fail(%s)", attemptID)
	return pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		_, err := t.failTx(ctx, tx, attemptID, paymentIntent, reason)
		return err
	})
}

func (t *AutoTopup) failTx(ctx context.Context, tx pgx.Tx, attemptID, paymentIntent, reason string) (string, error) {
	return t.settleTx(ctx, tx, attemptID, paymentIntent, reason, AttemptFailed)
}

// settleTx ends an open attempt without credit, as failed or unanswered: auto top-up turns off
// with the reason and the alert is raised, once. A decline told of an attempt already given up
// as unanswered records the decline's reason and raises no second alert.
func (t *AutoTopup) settleTx(ctx context.Context, tx pgx.Tx, attemptID, paymentIntent, reason string, to AttemptStatus) (string, error) {
	var accountID string
	if err := tx.QueryRow(ctx, `SELECT account_id FROM topup_attempts WHERE id = $1`, attemptID).Scan(&accountID); err != nil {
		return "", err
	}
	// Settings before attempt, the order every writer takes them in.
	var email string
	if err := tx.QueryRow(ctx, `SELECT notify_email FROM topup_settings WHERE account_id = $1 FOR UPDATE`, accountID).Scan(&email); err != nil {
		return "", err
	}
	var status AttemptStatus
	var amount int64
	var created time.Time
	if err := tx.QueryRow(ctx, `SELECT status, amount_cents, created_at FROM topup_attempts WHERE id = $1 FOR UPDATE`, attemptID).
		Scan(&status, &amount, &created); err != nil {
		return "", err
	}
	now := t.now().UTC()
	if status == AttemptUnanswered && to == AttemptFailed {
		_, err := tx.Exec(ctx, `UPDATE topup_attempts SET status = 'failed', failure = $2,
				stripe_payment_intent = coalesce(stripe_payment_intent, nullif($3, '')), updated_at = $4 WHERE id = $1`,
			attemptID, reason, paymentIntent, now)
		return "top-up given up before; now failed: " + reason, err
	}
	if status != AttemptCreated && status != AttemptPending {
		return "top-up already " + string(status), nil
	}
	if _, err := tx.Exec(ctx, `UPDATE topup_attempts SET status = $5, failure = $2,
			stripe_payment_intent = coalesce(stripe_payment_intent, nullif($3, '')), updated_at = $4 WHERE id = $1`,
		attemptID, reason, paymentIntent, now, string(to)); err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, `UPDATE topup_settings SET enabled = false, stopped_reason = $2, stopped_at = $3, updated_at = $3
		WHERE account_id = $1`, accountID, reason, now); err != nil {
		return "", err
	}
	if t.mail != nil && email != "" {
		if err := t.mail.Enqueue(ctx, tx, mail.Message{
			Key: "topup-failed:" + attemptID, To: []string{email},
			Subject: "Auto top-up failed: " + formatCents(amount) + " was not added",
			Text: fmt.Sprintf("Your balance fell below your auto top-up threshold, and the charge of %s to your saved card did not go through.\n\n%s\n\nAuto top-up is now off. Turn it on again on the Credits page once the card is sorted out; until then, buy credits by hand so that your API calls are not refused.\n",
				formatCents(amount), reason),
		}); err != nil {
			return "", err
		}
	}
	if t.events != nil {
		if err := t.events.Emit(ctx, tx, accountID, TopupEventFailed, attemptID, map[string]any{
			"attempt_id": attemptID, "amount_cents": amount, "reason": reason,
			"stripe_payment_intent": paymentIntent, "created_at": created,
		}); err != nil {
			return "", err
		}
	}
	return "top-up " + string(to) + ": " + reason, nil
}
