package invoicing

import (
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/credits/stripemock"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/payouts"
)

var (
	stripeMock stripemocktest.Shared
)

// stripeMockURL starts one stripe-mock for the package's tests, on first use; TestMain stops it.
func stripeMockURL(t *testing.T) string { return stripeMock.URL(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	stripeMock.Stop()
	os.Exit(code)
}

// paying is the world's payouts: the payouts service on stripe-mock, joined to the invoicing
// service both ways (approval pays through it, it records statements paid through the
// invoicing service), and the record of what was sent to Stripe.
type paying struct {
	svc *payouts.Service
	rec *stripemock.Recorder
	// hold, while set, keeps every transfer request until it is closed, after telling held.
	mu   sync.Mutex
	hold chan struct{}
	held chan struct{}
}

func (w *world) payouts() *paying {
	w.t.Helper()
	proxy, err := stripemock.Proxy(stripeMockURL(w.t))
	if err != nil {
		w.t.Fatal(err)
	}
	p := &paying{}
	p.rec = stripemock.Record(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/transfers" {
			p.mu.Lock()
			hold, held := p.hold, p.held
			p.mu.Unlock()
			if hold != nil {
				close(held)
				<-hold
			}
		}
		proxy.ServeHTTP(rw, r)
	}))
	srv := httptest.NewServer(p.rec)
	w.t.Cleanup(srv.Close)
	p.svc = payouts.NewService(payouts.Config{Pool: w.pool, Ledger: w.ledger, Statements: w.svc, Now: w.clock,
		Stripe: payouts.NewStripeConnect(credits.NewStripeAPI("sk_test_invoicing", srv.URL))})
	w.svc.PayWith(p.svc)
	return p
}

// onboard connects the provider's Stripe account on stripe-mock and records its onboarding
// complete, as Stripe's account.updated would.
func (p *paying) onboard(w *world, provider string) payouts.ConnectedAccount {
	w.t.Helper()
	a, _, err := p.svc.Connect(w.ctx(), payouts.ConnectInput{ProviderAccountID: provider, Email: "ops@" + provider[:8] + ".test",
		Country: "US", RefreshURL: "https://gpumarket.test/provider/payouts/onboarding",
		ReturnURL: "https://gpumarket.test/provider/payouts/return"})
	if err != nil {
		w.t.Fatal(err)
	}
	if a, err = p.svc.Observe(w.ctx(), payouts.AccountState{ID: a.StripeAccountID, DetailsSubmitted: true, PayoutsEnabled: true},
		w.clock()); err != nil || a.State != payouts.AccountComplete {
		w.t.Fatalf("onboarding: %+v, %v", a, err)
	}
	return a
}

// transfers are the transfer requests sent to Stripe.
func (p *paying) transfers() []stripemock.Request {
	var out []stripemock.Request
	for _, r := range p.rec.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/transfers" {
			out = append(out, r)
		}
	}
	return out
}

// auditTrail is the audit log's actions on the statement and on the period's close, oldest
// first, with their actors' ids.
func (w *world) auditTrail(statementID string, p Period) (actions []audit.Action, actors []string) {
	w.t.Helper()
	page, err := w.audit.List(w.ctx(), audit.Filter{Limit: 500})
	if err != nil {
		w.t.Fatal(err)
	}
	for i := len(page.Entries) - 1; i >= 0; i-- {
		e := page.Entries[i]
		if (e.SubjectKind == "statement" && e.SubjectID == statementID) || (e.SubjectKind == "period" && e.SubjectID == p.String()) {
			actions, actors = append(actions, e.Action), append(actors, e.ActorID)
		}
	}
	return actions, actors
}

// Approving a statement of a provider with a connected account pays it through Stripe: one
// transfer of the statement's payout, keyed by the statement; the provider's payable down by
// exactly the amount and Stripe clearing up by it; the statement paid with the transfer as its
// reference, by the approver; the audit log holds the close, the approval and the payout.
// Approving or paying it again sends nothing.
func TestApprovingAStatementPaysItThroughStripe(t *testing.T) {
	w := newWorld(t)
	pay := w.payouts()
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.buy(acme, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), 50_00)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 20) // $14.40 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	acct := pay.onboard(w, fjordAccount)
	st := w.statementOf(fjordAccount, march)
	if st.Payout != 14_40 || st.Status != StatusDraft {
		t.Fatalf("the draft pays %s (%s), want $14.40", st.Payout, st.Status)
	}
	if got := w.balance(ledger.AccountProviderPayable, fjordAccount); !got.Equal(money.Pico(14_40) * money.PicoPerCent) {
		t.Fatalf("payable before = %s", got)
	}

	res := w.approveStatement(st.ID)
	if res.Payout == nil || res.PayoutErr != nil || res.Payout.Status != payouts.StatusPaid || res.Payout.AmountCents != 14_40 ||
		res.Payout.StatementID != st.ID || res.Payout.StatementNumber != res.Number || res.Payout.Period != "2026-03" {
		t.Fatalf("approval's payout: %+v, %v", res.Payout, res.PayoutErr)
	}
	sent := pay.transfers()
	if len(sent) != 1 || sent[0].IdempotencyKey != "payout-"+st.ID || sent[0].Form.Get("amount") != "1440" ||
		sent[0].Form.Get("destination") != acct.StripeAccountID || sent[0].Form.Get("metadata[statement_number]") != res.Number {
		t.Fatalf("transfers sent: %+v", sent)
	}
	if got := w.balance(ledger.AccountProviderPayable, fjordAccount); got.Sign() != 0 {
		t.Errorf("payable after = %s, want $0: down by exactly $14.40", got)
	}
	if got := w.balance(ledger.AccountStripeClearing, ""); !got.Equal(-money.Pico(50_00-14_40) * money.PicoPerCent) {
		t.Errorf("clearing after = %s, want -$35.60: up by exactly $14.40", got)
	}
	paid := w.statementOf(fjordAccount, march)
	if paid.Status != StatusPaid || paid.PaymentReference != res.Payout.StripeTransferID || paid.PaidBy != "finance@example.test" ||
		paid.PaidAt == nil || !paid.PaidAt.Equal(*res.Payout.PaidAt) || len(paid.Actions) != 0 {
		t.Fatalf("the statement after its payout: %s, reference %q, by %q, at %v, actions %v", paid.Status,
			paid.PaymentReference, paid.PaidBy, paid.PaidAt, paid.Actions)
	}
	actions, actors := w.auditTrail(st.ID, march)
	if !slices.Equal(actions, []audit.Action{audit.ActionClose, audit.ActionApprove, audit.ActionPayout}) ||
		!slices.Equal(actors, []string{w.finance, w.finance, w.finance}) {
		t.Fatalf("audit trail %v by %v, want close, approve, payout by the finance user", actions, actors)
	}

	again, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{st.ID})
	if err != nil || services.ErrorCode(again[0].Err) != services.CodeConflict || again[0].Payout != nil {
		t.Fatalf("approving it again: %+v, %v", again, err)
	}
	if _, err := w.svc.StatementToPay(w.ctx(), st.ID); services.ErrorCode(err) != services.CodeConflict ||
		!strings.Contains(err.Error(), "already paid") {
		t.Fatalf("StatementToPay of a paid statement: %v", err)
	}
	if p, err := pay.svc.Pay(w.ctx(), payableStatement{id: st.ID, providerID: fjordAccount, number: res.Number, period: march,
		payout: 14_40}); err != nil || p.Status != payouts.StatusPaid || p.Attempts != 1 {
		t.Fatalf("paying it again: %+v, %v", p, err)
	}
	if n := len(pay.transfers()); n != 1 {
		t.Fatalf("%d transfers after approving and paying again, want 1", n)
	}
	if got := w.balance(ledger.AccountProviderPayable, fjordAccount); got.Sign() != 0 {
		t.Errorf("payable after paying again = %s", got)
	}
}

// A provider without a connected account: its statement is approved and issued, its payout
// fails with the reason and nothing is sent or posted; retried before onboarding it fails
// again, and after onboarding it pays once, by the user who retried. A statement under the
// minimum is issued and carries over: no payout is made for it.
func TestAStatementWithoutAConnectedAccountIsIssuedAndPaidOnceOnRetry(t *testing.T) {
	w := newWorld(t)
	pay := w.payouts()
	acme := w.account("Acme Labs")
	northwindAccount, lisboaAccount := w.account("Northwind Compute"), w.account("Lisboa Labs")
	northwind, lisboa := w.rig(northwindAccount), w.rig(lisboaAccount)
	w.uses(acme, northwind, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 25) // $18.00 earned
	w.uses(acme, lisboa, time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), 5)     // $3.60 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	st, small := w.statementOf(northwindAccount, march), w.statementOf(lisboaAccount, march)

	res, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{st.ID, small.ID})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("approval: %+v, %v", res, err)
	}
	failed := res[0].Payout
	if failed == nil || failed.Status != payouts.StatusFailed || failed.InDoubt || failed.AmountCents != 18_00 ||
		!strings.Contains(res[0].PayoutProblem, "no Stripe account connected") || !strings.Contains(failed.LastError, "no Stripe account") ||
		!slices.Equal(failed.Actions, []string{payouts.ActionRetry}) {
		t.Fatalf("the payout without an account: %+v, problem %q", failed, res[0].PayoutProblem)
	}
	issued := w.statementOf(northwindAccount, march)
	if issued.Status != StatusIssued || issued.Number != res[0].Number || !equalActions(issued.Actions, []Action{ActionMarkPaid, ActionVoid}) {
		t.Fatalf("the statement after its payout failed: %s %q, actions %v", issued.Status, issued.Number, issued.Actions)
	}
	if res[1].Payout != nil || res[1].PayoutErr != nil {
		t.Fatalf("a statement under the minimum was paid: %+v", res[1])
	}
	if _, err := w.svc.StatementToPay(w.ctx(), small.ID); services.ErrorCode(err) != services.CodeConflict ||
		!strings.Contains(err.Error(), "carried over") {
		t.Fatalf("StatementToPay of a statement that carries over: %v", err)
	}
	if _, ok, err := pay.svc.ForStatement(w.ctx(), small.ID); ok || err != nil {
		t.Fatalf("a payout was made for a statement that carries over: %v, %v", ok, err)
	}
	if n := len(pay.transfers()); n != 0 {
		t.Fatalf("%d transfers without an account", n)
	}
	owed := money.Pico(18_00) * money.PicoPerCent
	if got := w.balance(ledger.AccountProviderPayable, northwindAccount); !got.Equal(owed) {
		t.Fatalf("payable after the failed payout = %s, want $18.00", got)
	}

	retried := w.finance2
	ctx := ActingAs(w.ctx(), retried)
	p, err := pay.svc.Retry(ctx, failed.ID)
	if services.ErrorCode(err) != services.CodeConflict || p.Status != payouts.StatusFailed || p.Attempts != 2 {
		t.Fatalf("retry before onboarding: %+v, %v", p, err)
	}
	pay.onboard(w, northwindAccount)
	if p, err = pay.svc.Retry(ctx, failed.ID); err != nil || p.Status != payouts.StatusPaid || p.Attempts != 3 {
		t.Fatalf("retry after onboarding: %+v, %v", p, err)
	}
	if p, err = pay.svc.Retry(ctx, failed.ID); err != nil || p.Status != payouts.StatusPaid || p.Attempts != 3 {
		t.Fatalf("retrying a paid payout: %+v, %v", p, err)
	}
	sent := pay.transfers()
	if len(sent) != 1 || sent[0].IdempotencyKey != "payout-"+st.ID || sent[0].Form.Get("amount") != "1800" {
		t.Fatalf("transfers: %+v", sent)
	}
	if got := w.balance(ledger.AccountProviderPayable, northwindAccount); got.Sign() != 0 {
		t.Errorf("payable after the retry = %s, want $0", got)
	}
	paid := w.statementOf(northwindAccount, march)
	if paid.Status != StatusPaid || paid.PaymentReference != p.StripeTransferID || paid.PaidBy != "finance2@example.test" {
		t.Fatalf("the statement after the retry: %s, %q by %q", paid.Status, paid.PaymentReference, paid.PaidBy)
	}
	actions, actors := w.auditTrail(st.ID, march)
	if !slices.Equal(actions, []audit.Action{audit.ActionClose, audit.ActionApprove, audit.ActionPayout}) ||
		actors[2] != retried {
		t.Fatalf("audit trail %v by %v, want one payout by the user who retried", actions, actors)
	}
}

// While a statement's transfer is on its way to Stripe, the statement can be neither voided
// nor marked paid by hand, and offers neither; once the transfer is made it is paid.
func TestAStatementIsNeitherVoidedNorMarkedPaidWhileItsPayoutIsUnderway(t *testing.T) {
	w := newWorld(t)
	pay := w.payouts()
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 15) // $10.80 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	pay.onboard(w, fjordAccount)
	st := w.statementOf(fjordAccount, march)

	release := make(chan struct{})
	held := make(chan struct{})
	pay.mu.Lock()
	pay.hold, pay.held = release, held
	pay.mu.Unlock()
	done := make(chan Approved)
	go func() {
		res, err := w.svc.ApproveStatements(w.ctx(), w.finance, []string{st.ID})
		if err != nil {
			t.Error(err)
		}
		done <- res[0]
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the transfer never reached Stripe")
	}
	if got := w.statementOf(fjordAccount, march); got.Status != StatusIssued || len(got.Actions) != 0 {
		t.Errorf("while the transfer is on its way: %s, actions %v, want none", got.Status, got.Actions)
	}
	_, err := w.svc.VoidStatement(w.ctx(), VoidInput{ID: st.ID, By: w.finance2, Reason: VoidWrongDetails})
	if services.ErrorCode(err) != services.CodeConflict || !strings.Contains(err.Error(), "under way") {
		t.Errorf("voiding while the payout is under way: %v", err)
	}
	err = w.svc.MarkStatementPaid(w.ctx(), w.finance2, st.ID, "bank transfer 42")
	if services.ErrorCode(err) != services.CodeConflict || !strings.Contains(err.Error(), "under way") {
		t.Errorf("marking paid while the payout is under way: %v", err)
	}
	close(release)
	res := <-done
	if res.Err != nil || res.Payout == nil || res.Payout.Status != payouts.StatusPaid {
		t.Fatalf("the approval's payout: %+v", res)
	}
	paid := w.statementOf(fjordAccount, march)
	if paid.Status != StatusPaid || paid.PaymentReference != res.Payout.StripeTransferID || paid.VoidedAt != nil {
		t.Fatalf("the statement: %s, reference %q", paid.Status, paid.PaymentReference)
	}
	var statements int
	w.scan(`SELECT count(*) FROM statements WHERE provider_account_id = $1`, []any{fjordAccount}, &statements)
	if statements != 1 {
		t.Fatalf("%d statements for the provider, want 1: nothing was voided or regenerated", statements)
	}
}

// The paying transaction records only the payout its statement says: another amount, another
// provider, a payout not paid, or a statement not issued is refused, and the statement stays
// as it was.
func TestMarkPaidTxRecordsOnlyThePayoutTheStatementSays(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount, otherAccount := w.account("Fjord GPU Co-op"), w.account("Northwind Compute")
	fjord := w.rig(fjordAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 15) // $10.80 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	st := w.statementOf(fjordAccount, march)
	paidAt := w.clock()
	good := payouts.Payout{ID: "00000000-0000-4000-8000-000000000001", StatementID: st.ID, ProviderAccountID: fjordAccount,
		AmountCents: 10_80, Status: payouts.StatusPaid, StripeTransferID: "tr_test", PaidAt: &paidAt}
	record := func(p payouts.Payout) error {
		return pgx.BeginFunc(w.ctx(), w.pool, func(tx pgx.Tx) error { return w.svc.MarkPaidTx(w.ctx(), tx, st.ID, p) })
	}
	if err := record(good); err == nil {
		t.Fatal("a draft was recorded paid")
	}
	w.approveStatement(st.ID)
	for name, edit := range map[string]func(*payouts.Payout){
		"another amount":   func(p *payouts.Payout) { p.AmountCents = 10_79 },
		"another provider": func(p *payouts.Payout) { p.ProviderAccountID = otherAccount },
		"not paid":         func(p *payouts.Payout) { p.Status = payouts.StatusPending },
		"no transfer":      func(p *payouts.Payout) { p.StripeTransferID = "" },
	} {
		p := good
		edit(&p)
		if err := record(p); err == nil {
			t.Errorf("%s: recorded", name)
		}
	}
	if got := w.statementOf(fjordAccount, march); got.Status != StatusIssued || got.PaymentReference != "" {
		t.Fatalf("the statement after refused payouts: %s %q", got.Status, got.PaymentReference)
	}
	if err := record(good); err != nil {
		t.Fatal(err)
	}
	if got := w.statementOf(fjordAccount, march); got.Status != StatusPaid || got.PaymentReference != "tr_test" || got.PaidBy != "" {
		t.Fatalf("the statement paid by the platform itself: %s %q by %q", got.Status, got.PaymentReference, got.PaidBy)
	}
	if _, actors := w.auditTrail(st.ID, march); actors[len(actors)-1] != "" {
		t.Fatalf("the payout's audit entry names %q, want the platform", actors[len(actors)-1])
	}
}

// An approval confirmed at a payout pays that payout or nothing: usage metered since the
// draft was shown raises its payout from $14.40 to $18.00, so the approval confirmed at
// $14.40 is refused with the new figure, sends no transfer and leaves the draft; confirmed at
// $18.00 it pays $18.00, once, and confirming it again pays nothing more.
func TestAConfirmedApprovalPaysOnlyTheConfirmedPayout(t *testing.T) {
	w := newWorld(t)
	pay := w.payouts()
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.buy(acme, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), 50_00)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 20) // $14.40 earned
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	pay.onboard(w, fjordAccount)
	st := w.statementOf(fjordAccount, march)
	if st.Payout != 14_40 {
		t.Fatalf("the draft pays %s, want $14.40", st.Payout)
	}
	w.uses(acme, fjord, time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), 5) // $3.60 more, metered after the close

	res, err := w.svc.ApproveConfirmedStatements(w.ctx(), w.finance, []Confirmed{{ID: st.ID, Cents: 14_40}})
	if err != nil || services.ErrorCode(res[0].Err) != services.CodeConflict || res[0].Payout != nil ||
		!strings.Contains(res[0].Problem, "now $18.00, not the $14.40 confirmed") {
		t.Fatalf("approval confirmed at the old payout: %+v, %v", res, err)
	}
	if n := len(pay.transfers()); n != 0 {
		t.Fatalf("%d transfers after a refused approval, want none", n)
	}
	if again := w.statementOf(fjordAccount, march); again.Status != StatusDraft || again.Number != "" {
		t.Fatalf("after a refused approval the statement is %s %q, want an unnumbered draft", again.Status, again.Number)
	}

	res, err = w.svc.ApproveConfirmedStatements(w.ctx(), w.finance, []Confirmed{{ID: st.ID, Cents: 18_00}})
	if err != nil || res[0].Err != nil || res[0].Payout == nil || res[0].Payout.Status != payouts.StatusPaid ||
		res[0].Payout.AmountCents != 18_00 {
		t.Fatalf("approval confirmed at the new payout: %+v, %v", res, err)
	}
	res, err = w.svc.ApproveConfirmedStatements(w.ctx(), w.finance, []Confirmed{{ID: st.ID, Cents: 18_00}})
	if err != nil || services.ErrorCode(res[0].Err) != services.CodeConflict || res[0].Payout != nil {
		t.Fatalf("the same confirmation again: %+v, %v", res, err)
	}
	sent := pay.transfers()
	if len(sent) != 1 || sent[0].Form.Get("amount") != "1800" {
		t.Fatalf("transfers sent: %+v, want one of $18.00", sent)
	}
}
