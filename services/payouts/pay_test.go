package payouts

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

var (
	errVoided   = services.Errorf(services.CodeConflict, "The statement is void.")
	errMarkPaid = errors.New("invoicing could not mark the statement paid")
)

func usd(s string) money.Pico {
	p, err := money.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return p
}

func (e env) march(id string, cents int64) statement {
	return e.statements.add(statement{id: id, provider: e.provider, period: "2026-03", number: "GPM-S-2026-" + id, cents: cents})
}

// payoutPostings returns every posting of payout transactions: the ledger account and amount,
// by transaction, and checks each transaction sums to zero.
func (e env) payoutPostings(t *testing.T) map[string][]ledger.Posting {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `
		SELECT t.id::text, t.idempotency_key, p.ledger_account_id::text, p.amount::bigint
		FROM ledger_transactions t JOIN ledger_postings p ON p.transaction_id = t.id
		WHERE t.kind = 'payout' ORDER BY t.id, p.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]ledger.Posting{}
	sums := map[string]money.Pico{}
	for rows.Next() {
		var id, key, acct string
		var amount int64
		if err := rows.Scan(&id, &key, &acct, &amount); err != nil {
			t.Fatal(err)
		}
		out[key] = append(out[key], ledger.Posting{Account: ledger.LedgerAccountID(acct), Amount: money.Pico(amount)})
		sums[id] += money.Pico(amount)
	}
	for id, s := range sums {
		if s != 0 {
			t.Fatalf("payout transaction %s sums to %s", id, s)
		}
	}
	return out
}

// wantLedger checks the provider's payable and Stripe clearing hold exactly these amounts.
func (e env) wantLedger(t *testing.T, payable, clearing money.Pico) {
	t.Helper()
	if got := e.balance(t, e.payable); !got.Equal(payable) {
		t.Errorf("payable = %s, want %s", got, payable)
	}
	if got := e.balance(t, e.clearing); !got.Equal(clearing) {
		t.Errorf("Stripe clearing = %s, want %s", got, clearing)
	}
}

func (e env) wantOnePosting(t *testing.T, statementID string, cents int64) {
	t.Helper()
	all := e.payoutPostings(t)
	if len(all) != 1 {
		t.Fatalf("%d payout transactions, want 1: %v", len(all), all)
	}
	got := all["payout:"+statementID]
	want := []ledger.Posting{{Account: e.payable, Amount: -centsToPico(cents)}, {Account: e.clearing, Amount: centsToPico(cents)}}
	slices.SortFunc(got, func(a, b ledger.Posting) int { return int(a.Amount - b.Amount) })
	if !slices.Equal(got, want) {
		t.Fatalf("payout postings = %v, want %v", got, want)
	}
}

func wantCode(t *testing.T, err error, code services.Code, contains string) {
	t.Helper()
	if services.ErrorCode(err) != code || !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %v, want %s saying %q", err, code, contains)
	}
}

// A payout against stripe-mock: one transfer of the statement's amount in cents to the
// provider's connected account, keyed by the statement and naming it; the payout paid with the
// transfer; the ledger's payable down and clearing up by exactly the amount, in one balanced
// transaction; the invoicing side told in the same transaction. Paying it again, or retrying
// it, does nothing.
func TestPayTransfersTheStatementAndPostsItExactly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	acct := e.onboard(t)
	e.earn(t, usd("73.456789123456"), "usage-1")
	st := e.march("st-0001", 6137)

	p, err := e.svc.Pay(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != StatusPaid || !strings.HasPrefix(p.StripeTransferID, "tr_") || p.StripeAccountID != acct.StripeAccountID ||
		p.AmountCents != 6137 || p.Attempts != 1 || p.LastError != "" || p.InDoubt || p.PaidAt == nil || !p.PaidAt.Equal(testNow) ||
		p.LedgerTransactionID == "" || p.ProviderName != "Fjord GPU Co-op" || p.StatementNumber != "GPM-S-2026-st-0001" ||
		p.Period != "2026-03" || len(p.Actions) != 0 {
		t.Fatalf("payout = %+v", p)
	}
	sent := e.stripe.rec.Requests()
	var transfers int
	for _, r := range sent {
		if r.Path != "/v1/transfers" {
			continue
		}
		transfers++
		for k, want := range map[string]string{"amount": "6137", "currency": "usd", "destination": acct.StripeAccountID,
			"transfer_group": "statement-st-0001", "metadata[statement_id]": "st-0001", "metadata[payout_id]": p.ID,
			"metadata[statement_number]": "GPM-S-2026-st-0001", "metadata[period]": "2026-03",
			"metadata[provider_account_id]": e.provider} {
			if got := r.Form.Get(k); got != want {
				t.Errorf("transfer %s = %q, want %q", k, got, want)
			}
		}
		if r.Method != http.MethodPost || r.IdempotencyKey != "payout-st-0001" {
			t.Errorf("transfer request %s, idempotency key %q", r.Method, r.IdempotencyKey)
		}
	}
	if transfers != 1 {
		t.Fatalf("%d transfer requests, want 1", transfers)
	}
	e.wantLedger(t, usd("73.456789123456")-usd("61.37"), usd("61.37"))
	e.wantOnePosting(t, "st-0001", 6137)
	if told, ok := e.statements.paidPayout("st-0001"); !ok || told.ID != p.ID || told.Status != StatusPaid {
		t.Fatalf("invoicing told %+v, %v", told, ok)
	}

	// Again, by Pay and by Retry: nothing is sent or posted.
	again, err := e.svc.Pay(ctx, st)
	if err != nil || again.ID != p.ID || again.Status != StatusPaid || again.Attempts != 1 || again.StripeTransferID != p.StripeTransferID {
		t.Fatalf("paying again: %+v, %v", again, err)
	}
	if again, err = e.svc.Retry(ctx, p.ID); err != nil || again.Status != StatusPaid || again.Attempts != 1 {
		t.Fatalf("retrying a paid payout: %+v, %v", again, err)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 1 {
		t.Fatalf("%d transfers after paying again, want 1", n)
	}
	e.wantLedger(t, usd("73.456789123456")-usd("61.37"), usd("61.37"))
	e.wantOnePosting(t, "st-0001", 6137)

	if got, ok, err := e.svc.ForStatement(ctx, "st-0001"); err != nil || !ok || got.ID != p.ID {
		t.Fatalf("ForStatement: %+v, %v, %v", got, ok, err)
	}
	for f, want := range map[ListFilter]int{{}: 1, {Status: StatusPaid}: 1, {Status: StatusFailed}: 0,
		{ProviderAccountID: e.provider}: 1, {ProviderAccountID: e.customer}: 0} {
		if list, err := e.svc.List(ctx, f); err != nil || len(list) != want {
			t.Errorf("List(%+v) = %d payouts, %v; want %d", f, len(list), err, want)
		}
	}
	if _, err := e.svc.List(ctx, ListFilter{Status: "lost"}); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("List(status=lost): %v", err)
	}

	// The database keeps a paid payout as it is.
	if _, err := e.pool.Exec(ctx, `UPDATE payouts SET amount_cents = 1 WHERE id = $1`, p.ID); err == nil {
		t.Fatal("a paid payout's amount was changed")
	}
	if _, err := e.pool.Exec(ctx, `DELETE FROM payouts WHERE id = $1`, p.ID); err == nil {
		t.Fatal("a paid payout was deleted")
	}
}

// A provider without a connected account is refused with a clear error, and so is one whose
// onboarding is unfinished: each attempt leaves the payout failed with its reason, sends
// nothing and posts nothing. Once onboarding is complete, the retry pays.
func TestPayRefusedWithoutACompleteAccountThenRetried(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.earn(t, usd("100"), "usage-1")
	st := e.march("st-0002", 5000)

	p, err := e.svc.Pay(ctx, st)
	wantCode(t, err, services.CodeConflict, "no Stripe account connected")
	if p.Status != StatusFailed || p.Attempts != 1 || p.InDoubt || !strings.Contains(p.LastError, "no Stripe account") ||
		!slices.Equal(p.Actions, []string{ActionRetry}) {
		t.Fatalf("payout = %+v", p)
	}

	a, _, err := e.svc.Connect(ctx, e.connectInput("US"))
	if err != nil {
		t.Fatal(err)
	}
	p, err = e.svc.Retry(ctx, p.ID)
	wantCode(t, err, services.CodeConflict, "cannot receive payouts yet")
	if p.Status != StatusFailed || p.Attempts != 2 || !strings.Contains(p.LastError, a.StripeAccountID) {
		t.Fatalf("payout = %+v", p)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 0 {
		t.Fatalf("%d transfers sent to an account that cannot receive them", n)
	}
	e.wantLedger(t, usd("100"), 0)
	if len(e.payoutPostings(t)) != 0 {
		t.Fatal("a refused payout posted")
	}

	e.stripe.front.set(func(f *stripeFront) { f.onboarded[a.StripeAccountID] = true })
	if _, err := e.svc.Refresh(ctx, e.provider); err != nil {
		t.Fatal(err)
	}
	if p, err = e.svc.Retry(ctx, p.ID); err != nil || p.Status != StatusPaid || p.Attempts != 3 || p.LastError != "" {
		t.Fatalf("retry once onboarded: %+v, %v", p, err)
	}
	e.wantLedger(t, usd("50"), usd("50"))
	e.wantOnePosting(t, "st-0002", 5000)
}

// Stripe refuses the transfer (400, account_invalid): the payout is failed with Stripe's
// reason and not in doubt, nothing is posted, and stripe-go does not send it again by itself.
// The retry sends the same key and the same amount, and pays once.
func TestPayFailsWhenStripeRefusesAndSucceedsOnRetry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.onboard(t)
	e.earn(t, usd("20.00"), "usage-1")
	st := e.march("st-0003", 1999)
	e.stripe.front.set(func(f *stripeFront) {
		f.refusal = stripeErrorBody("account_invalid", "The provided key does not have access to account 'acct_x'.")
	})

	p, err := e.svc.Pay(ctx, st)
	wantCode(t, err, services.CodeConflict, "account_invalid")
	if p.Status != StatusFailed || p.InDoubt || p.Attempts != 1 || !strings.Contains(p.LastError, "Stripe refused the transfer (400)") {
		t.Fatalf("payout = %+v", p)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 1 {
		t.Fatalf("%d transfer requests for a refusal, want 1", n)
	}
	e.wantLedger(t, usd("20"), 0)

	e.stripe.front.set(func(f *stripeFront) { f.refusal = nil })
	if p, err = e.svc.Retry(ctx, p.ID); err != nil || p.Status != StatusPaid || p.Attempts != 2 {
		t.Fatalf("retry: %+v, %v", p, err)
	}
	var keys []string
	for _, r := range e.stripe.rec.Requests() {
		if r.Path == "/v1/transfers" && r.Method == http.MethodPost {
			keys = append(keys, r.IdempotencyKey+" "+r.Form.Get("amount"))
		}
	}
	if !slices.Equal(keys, []string{"payout-st-0003 1999", "payout-st-0003 1999"}) {
		t.Fatalf("transfer requests = %q", keys)
	}
	e.wantLedger(t, usd("0.01"), usd("19.99"))
	e.wantOnePosting(t, "st-0003", 1999)
}

// The transfer goes through at Stripe but its answer never arrives (stripe-go sends it again
// with the same key, and gets no answer either). The payout is failed and in doubt, posts
// nothing, and holds its amount back from the provider's other payouts. The retry finds the
// transfer by its statement, sends nothing, and pays: one transfer, one posting.
func TestRetryAfterATimeoutFindsTheTransferAndPaysOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.onboard(t)
	e.earn(t, usd("80"), "usage-1")
	st := e.march("st-0004", 6000)
	e.stripe.front.set(func(f *stripeFront) { f.drop = true })

	p, err := e.svc.Pay(ctx, st)
	wantCode(t, err, services.CodeUnavailable, "No answer from Stripe")
	if p.Status != StatusFailed || !p.InDoubt || p.Attempts != 1 || p.StripeTransferID != "" {
		t.Fatalf("payout = %+v", p)
	}
	if made := e.stripe.front.transfersMade(); made != 1 {
		t.Fatalf("Stripe made %d transfers, want 1", made)
	}
	posts := e.stripe.rec.Count(http.MethodPost, "/v1/transfers")
	for _, r := range e.stripe.rec.Requests() {
		if r.Path == "/v1/transfers" && r.IdempotencyKey != "payout-st-0004" {
			t.Fatalf("a resend with key %q", r.IdempotencyKey)
		}
	}
	// stripe-go sends it again twice, and Go's transport may resend a request with an
	// Idempotency-Key on a reused connection: every send carried the one key.
	if posts < 3 {
		t.Fatalf("%d sends of the transfer, want stripe-go's 3 at least", posts)
	}
	e.wantLedger(t, usd("80"), 0)

	// $80 owed, $60 possibly on its way: a $30 statement is refused, a $20 one would fit.
	_, err = e.svc.Pay(ctx, e.march("st-0005", 3000))
	wantCode(t, err, services.CodeConflict, "held for its other payouts")

	e.stripe.front.set(func(f *stripeFront) { f.drop = false })
	paid, err := e.svc.Retry(ctx, p.ID)
	if err != nil || paid.Status != StatusPaid || paid.InDoubt || paid.Attempts != 2 || !strings.HasPrefix(paid.StripeTransferID, "tr_") {
		t.Fatalf("retry: %+v, %v", paid, err)
	}
	// Neither the retry nor the refused $30 statement sent a transfer.
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != posts {
		t.Fatalf("%d transfer sends after the retry, want still %d", n, posts)
	}
	if made := e.stripe.front.transfersMade(); made != 1 {
		t.Fatalf("Stripe made %d transfers after the retry, want 1", made)
	}
	var looked bool
	for _, r := range e.stripe.rec.Requests() {
		if r.Method == http.MethodGet && r.Path == "/v1/transfers" && r.Form.Get("transfer_group") == "statement-st-0004" {
			looked = true
		}
	}
	if !looked {
		t.Fatal("the retry did not look for the transfer")
	}
	e.wantLedger(t, usd("20"), usd("60"))
	all := e.payoutPostings(t)
	if len(all) != 1 || len(all["payout:st-0004"]) != 2 {
		t.Fatalf("payout postings %v", all)
	}
}

// Eight Pay calls for one statement at once: one transfer, one posting. Each call either
// returns the paid payout or says a payment is under way.
func TestConcurrentPaysOfOneStatementPayOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.onboard(t)
	e.earn(t, usd("500"), "usage-1")
	st := e.march("st-0006", 25000)

	var wg sync.WaitGroup
	results := make([]Payout, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.svc.Pay(ctx, st)
		}()
	}
	wg.Wait()
	paid := 0
	for i := range results {
		switch {
		case errs[i] == nil && results[i].Status == StatusPaid:
			paid++
		case services.ErrorCode(errs[i]) == services.CodeConflict && strings.Contains(errs[i].Error(), "under way"):
		default:
			t.Fatalf("call %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if paid == 0 {
		t.Fatal("no call paid")
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
	p, ok, err := e.svc.ForStatement(ctx, "st-0006")
	if err != nil || !ok || p.Status != StatusPaid || p.Attempts != 1 {
		t.Fatalf("payout = %+v, %v, %v", p, ok, err)
	}
	e.wantLedger(t, usd("250"), usd("250"))
	e.wantOnePosting(t, "st-0006", 25000)
}

// A refund took money back after the statement was made: the payable holds less than the
// statement. Pay refuses rather than pay more than is owed, or cut the payout down; nothing is
// sent or posted. Once the payable covers it again, the retry pays, to the picodollar.
func TestPayNeverPaysMoreThanThePayableHolds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.onboard(t)
	e.earn(t, usd("40"), "usage-1")
	e.takeBack(t, usd("15.000000000001"), "refund-1")
	st := e.march("st-0007", 2500)

	p, err := e.svc.Pay(ctx, st)
	wantCode(t, err, services.CodeConflict, "payable balance is $24.999999999999")
	if p.Status != StatusFailed || p.InDoubt || !strings.Contains(p.LastError, "less than this statement's $25.00") {
		t.Fatalf("payout = %+v", p)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 0 {
		t.Fatalf("%d transfers sent beyond the payable", n)
	}
	e.wantLedger(t, usd("24.999999999999"), 0)

	e.earn(t, usd("0.000000000001"), "usage-2")
	if p, err = e.svc.Retry(ctx, p.ID); err != nil || p.Status != StatusPaid {
		t.Fatalf("retry once covered: %+v, %v", p, err)
	}
	e.wantLedger(t, 0, usd("25"))
}

// What Pay is given must hold: a statement that owes nothing, or more than one payout
// carries, or that misses its number, period or ids, is refused before any row is written
// or anything is sent. A statement whose amount or provider changed after its payout was
// made is refused and leaves the payout as it was.
func TestPayRefusesStatementsItCannotPay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.earn(t, usd("100"), "usage-1")
	for _, st := range []statement{
		{id: "st-zero", provider: e.provider, period: "2026-03", number: "N1", cents: 0},
		{id: "st-negative", provider: e.provider, period: "2026-03", number: "N2", cents: -500},
		{id: "st-huge", provider: e.provider, period: "2026-03", number: "N3", cents: MaxPayoutCents + 1},
		{id: "st-unnumbered", provider: e.provider, period: "2026-03", number: " ", cents: 100},
		{id: "st-period", provider: e.provider, period: "2026-13", number: "N4", cents: 100},
		{id: "st/../x", provider: e.provider, period: "2026-03", number: "N5", cents: 100},
		{id: "st-provider", provider: "Fjord", period: "2026-03", number: "N6", cents: 100},
	} {
		if _, err := e.svc.Pay(ctx, st); services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("Pay(%+v): %v, want invalid", st, err)
		}
	}
	var rows int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM payouts`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d payouts written for refused statements, %v", rows, err)
	}

	p, _ := e.svc.Pay(ctx, e.march("st-0008", 5000))
	changed := statement{id: "st-0008", provider: e.provider, period: "2026-03", number: "GPM-S-2026-st-0008", cents: 4000}
	_, err := e.svc.Pay(ctx, changed)
	wantCode(t, err, services.CodeConflict, "first paid as $50.00")
	after, _ := e.svc.Get(ctx, p.ID)
	if after.AmountCents != 5000 || after.Attempts != 1 {
		t.Fatalf("payout after a changed statement: %+v", after)
	}
	if len(e.stripe.rec.Requests()) != 0 {
		t.Fatalf("requests sent to Stripe: %+v", e.stripe.rec.Requests())
	}
}

// A statement voided after its payout failed is not paid by a retry; a retry without the
// invoicing side refuses too.
func TestRetryOfAVoidedStatementPaysNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.earn(t, usd("100"), "usage-1")
	p, _ := e.svc.Pay(ctx, e.march("st-0009", 5000))
	e.onboard(t)
	e.statements.mu.Lock()
	e.statements.voided = map[string]bool{"st-0009": true}
	e.statements.mu.Unlock()
	if _, err := e.svc.Retry(ctx, p.ID); !errors.Is(err, errVoided) {
		t.Fatalf("retry of a voided statement: %v", err)
	}
	alone := NewService(Config{Pool: e.pool, Ledger: e.ledger, Stripe: e.stripe.client, Now: e.clock.Now})
	if _, err := alone.Retry(ctx, p.ID); services.ErrorCode(err) != services.CodeUnavailable {
		t.Fatalf("retry without statements: %v", err)
	}
	if _, err := e.svc.Retry(ctx, "00000000-0000-4000-8000-000000000000"); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("retry of no payout: %v", err)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 0 {
		t.Fatalf("%d transfers for a voided statement", n)
	}
	e.wantLedger(t, usd("100"), 0)
}

// A statement voided after Pay was handed it, or that now says another amount, is refused at
// the check, under the provider's payable lock, before anything is sent: the invoicing side is
// asked there whether the statement still stands as the payout was made.
func TestPayChecksTheStatementStillStandsBeforeItSends(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.onboard(t)
	e.earn(t, usd("100"), "usage-1")
	st := e.march("st-0012", 5000)
	e.statements.mu.Lock()
	e.statements.voided = map[string]bool{"st-0012": true}
	e.statements.mu.Unlock()
	p, err := e.svc.Pay(ctx, st)
	wantCode(t, err, services.CodeConflict, "The statement is void. Nothing was paid.")
	if p.Status != StatusFailed || p.InDoubt || p.Attempts != 1 || !strings.Contains(p.LastError, "void") {
		t.Fatalf("payout of a voided statement: %+v", p)
	}

	lowered := e.march("st-0013", 3000)
	e.statements.add(statement{id: "st-0013", provider: e.provider, period: "2026-03", number: lowered.number, cents: 2000})
	p, err = e.svc.Pay(ctx, lowered)
	wantCode(t, err, services.CodeConflict, "now says $20.00")
	if p.Status != StatusFailed || p.AmountCents != 3000 {
		t.Fatalf("payout of a changed statement: %+v", p)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 0 {
		t.Fatalf("%d transfers sent for statements that no longer stand", n)
	}
	e.wantLedger(t, usd("100"), 0)
}

// The process dies after Stripe made the transfer and before it was recorded. The payout
// stays pending: within the attempt's lease a second Pay is refused as under way; after it,
// the retry looks for the transfer, finds it and pays without sending anything.
func TestACrashedAttemptIsResolvedByItsTransfer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	acct := e.onboard(t)
	e.earn(t, usd("30"), "usage-1")
	st := e.march("st-0010", 3000)

	// The attempt as Pay runs it, stopped after the transfer.
	in, err := readStatement(st)
	if err != nil {
		t.Fatal(err)
	}
	a := attempt{in: in, payable: e.payable, clearing: e.clearing}
	if _, claimed, err := e.svc.claim(ctx, &a); err != nil || !claimed {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	req, refusal, err := e.svc.check(ctx, a)
	if err != nil || refusal != nil || req.Destination != acct.StripeAccountID {
		t.Fatalf("check: %+v, %v, %v", req, refusal, err)
	}
	made, err := e.stripe.client.CreateTransfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	_, err = e.svc.Pay(ctx, st)
	wantCode(t, err, services.CodeConflict, "under way")
	if p, _, _ := e.svc.ForStatement(ctx, "st-0010"); p.Status != StatusPending || len(p.Actions) != 0 {
		t.Fatalf("payout under way = %+v", p)
	}
	e.clock.Advance(AttemptLease)
	if p, _, _ := e.svc.ForStatement(ctx, "st-0010"); !slices.Equal(p.Actions, []string{ActionRetry}) {
		t.Fatalf("stale payout offers %v", p.Actions)
	}
	p, err := e.svc.Pay(ctx, st)
	if err != nil || p.Status != StatusPaid || p.StripeTransferID != made.ID || p.Attempts != 2 {
		t.Fatalf("after the lease: %+v, %v", p, err)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
	e.wantLedger(t, 0, usd("30"))
	e.wantOnePosting(t, "st-0010", 3000)
}

// The invoicing side cannot mark the statement paid: the payout's posting and its paid status
// roll back with it, so the ledger and the payout never disagree; the transfer is found and
// recorded once the invoicing side can.
func TestPaidIsRecordedWithTheStatementOrNotAtAll(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	e.onboard(t)
	e.earn(t, usd("10"), "usage-1")
	st := e.march("st-0011", 1000)
	e.statements.mu.Lock()
	e.statements.failPaid = true
	e.statements.mu.Unlock()

	if _, err := e.svc.Pay(ctx, st); !errors.Is(err, errMarkPaid) {
		t.Fatalf("pay: %v", err)
	}
	p, _, _ := e.svc.ForStatement(ctx, "st-0011")
	if p.Status != StatusPending || p.StripeTransferID != "" || p.LedgerTransactionID != "" {
		t.Fatalf("payout = %+v", p)
	}
	e.wantLedger(t, usd("10"), 0)

	e.statements.mu.Lock()
	e.statements.failPaid = false
	e.statements.mu.Unlock()
	e.clock.Advance(AttemptLease + time.Second)
	if p, err := e.svc.Retry(ctx, p.ID); err != nil || p.Status != StatusPaid {
		t.Fatalf("retry: %+v, %v", p, err)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/transfers"); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
	e.wantLedger(t, 0, usd("10"))
	e.wantOnePosting(t, "st-0011", 1000)
}
