package metering

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// spree is a customer's requests through gateway replicas (admission.Admission, and the request
// log the gateway writes its records and holds with) to a rig whose agent holds the usage
// events; the events are published to the meter afterwards, as the agent releases them.
type spree struct {
	e        *meterEnv
	replicas []*admission.Admission
	clock    time.Time
	customer string
	apiKey   string
	limit    *money.Pico
	held     [][2]any // event id and body, published by release
	admitted int
	refused  error
}

// The route ticket of every request of the spree: a 200-byte body, so an input bound of
// 200 + routing.InputAllowance (512) tokens, and no max_tokens on a model the platform knows no
// window for, so an output bound of routing.DefaultOutputLimit (131,072) tokens.
const (
	spreeMaxInput  = 200 + 512
	spreeMaxOutput = 131_072
)

// spreePrice is the standard tier's price in the meter's tests (e.price): $0.15 and $0.30 per
// million input and output tokens.
var spreePrice = catalog.Price{Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}

func (e *meterEnv) newSpree(t *testing.T, name string, credit money.Pico, limit *money.Pico, replicas int) *spree {
	t.Helper()
	s := &spree{e: e, clock: e.now.AddDate(0, 0, -5), limit: limit}
	s.customer, s.apiKey = e.newCustomer(t, name)
	var user string
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM users WHERE account_id = $1`, s.customer).Scan(&user); err != nil {
		t.Fatal(err)
	}
	cr := credits.NewCredits(e.pool, e.ledger, nil, func() time.Time { return s.clock })
	if _, err := cr.Adjust(context.Background(), credits.AdjustInput{AccountID: s.customer, Amount: credit,
		Reason: "bought credits", ByUserID: user}); err != nil {
		t.Fatal(err)
	}
	for range replicas {
		s.replicas = append(s.replicas, s.replica())
	}
	return s
}

// replica is a gateway process's admission, started afresh.
func (s *spree) replica() *admission.Admission {
	return admission.NewAdmission(admission.AdmissionConfig{Pool: s.e.pool, Prices: spreePrices{}, Usage: GatewayReads{},
		Limits: noLimits{}, Now: func() time.Time { return s.clock }})
}

// noLimits are the limits of accounts without member limits or a budget, as the spree's customers are: the budgets'
// own (budgets.AdmissionLimits) import this package.
type noLimits struct{}

func (noLimits) QueueLimited(_ *pgx.Batch, _ string, limited *bool) { *limited = false }

func (noLimits) QueueLimits(*pgx.Batch, string, *admission.AccountLimits) {}

// spreePrices is a price book of the standard tier at spreePrice.
type spreePrices struct{}

func (spreePrices) CurrentPrices(context.Context) (map[catalog.Tier]catalog.Price, error) {
	return map[catalog.Tier]catalog.Price{catalog.TierStandard: spreePrice}, nil
}

// request sends one request through replica i: the rig answers relayed bytes in chunks,
// claiming usage claimed in its answer, while its agent holds an event reporting report.
func (s *spree) request(t *testing.T, i int, relayedBytes, relayedChunks int64, claimed admission.TokenCount, report usage.Usage) {
	t.Helper()
	e := s.e
	// Each request finds its replica's figures older than they are ever used (maxStale), so
	// every admission reads PostgreSQL: what it sees is what every replica has written.
	s.clock = s.clock.Add(31 * time.Second)
	res, err := s.replicas[i].Admit(context.Background(), admission.AdmitInput{AccountID: s.customer, APIKeyID: s.apiKey,
		KeyLimit: s.limit, Tier: catalog.TierStandard, MaxInputTokens: spreeMaxInput, MaxOutputTokens: spreeMaxOutput})
	if err != nil {
		if !errors.Is(err, admission.ErrCreditSpent) && !errors.Is(err, admission.ErrKeyLimitReached) {
			t.Fatal(err)
		}
		s.refused = err
		return
	}
	s.admitted++
	n := e.seq.Add(1)
	requestID := fmt.Sprintf("req_%d", n)
	at := s.clock.Add(2 * time.Second)
	claims := ticket.Claims{RequestID: requestID, AccountID: s.customer, APIKeyID: s.apiKey, OfferingID: e.offering,
		Tier: "standard", AskInput: testAskIn, AskOutput: testAskOut, PriceID: e.price,
		MaxInputTokens: spreeMaxInput, MaxOutputTokens: spreeMaxOutput, IssuedAt: s.clock}
	tk, err := e.signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	hold := res.Settle(admission.SettlementOf(admission.Ending{RequestID: requestID, Answered: true, HTTPStatus: 200,
		RelayedBytes: relayedBytes, RelayedChunks: relayedChunks}))
	e.record(t, requestlog.GatewayRequest{RequestID: requestID, AccountID: s.customer, APIKeyID: s.apiKey, OfferingID: e.offering,
		Tier: catalog.TierStandard, Model: "m", HTTPStatus: 200, Status: requestlog.GatewayOK, Usage: &claimed,
		Duration: 2 * time.Second, At: at, InputBytes: 200, MaxInputTokens: spreeMaxInput, MaxOutputTokens: spreeMaxOutput,
		Streamed: true, RelayedOutputBytes: relayedBytes, RelayedOutputChunks: relayedChunks, Hold: hold})
	report.RequestID, report.Ticket, report.OfferingID, report.Model = requestID, tk, e.offering, "m"
	report.TTFTMillis, report.DurationMillis, report.Status = 100, 2000, usage.StatusOK
	report.EnergyJoules, report.EnergySource = 12.5, usage.EnergyEstimated
	ev := usage.NewEvent(fmt.Sprintf("evt_%d", n), e.provider, e.offering, at, report)
	body, err := usage.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	s.held = append(s.held, [2]any{ev.ID, body})
}

// release publishes the held events and meters them, days after the spree.
func (s *spree) release(t *testing.T) {
	t.Helper()
	for _, h := range s.held {
		s.e.publish(t, events.UsageSubject(s.e.provider, s.e.offering), h[0].(string), h[1].([]byte))
	}
	s.e.drain(t)
	s.clock = s.e.now
}

// The dishonest rig's spree: it answers each request with 60,000 characters and usage
// {1, 1}, while its agent holds the usage events; days later it releases them rewritten to
// 60,000 output tokens and the full input bound, inside the ticket's bounds, so the meter bills
// them. A customer who bought $5 sends 1,000 requests through two gateway replicas, one of which
// restarts halfway. Admission held each request's bound, not its claim, so the spree stops once
// the holds reach the balance, and after metering the balance is above minus one request's
// bound and the provider is owed less than the customer paid.
func TestDishonestRigCannotOverdrawByHeldEvents(t *testing.T) {
	e := setupMeter(t)
	credit := 5 * money.PicoPerUSD
	s := e.newSpree(t, "Spree", credit, nil, 2)
	rewritten := usage.Usage{InputTokens: spreeMaxInput, OutputTokens: 60_000}
	for i := range 1000 {
		if i == 500 {
			s.replicas[1] = s.replica() // a restart forgets what the process kept
		}
		s.request(t, i%2, 60_000, 600, admission.TokenCount{Input: 1, Output: 1}, rewritten)
	}
	// Each answer leaves held 712 input tokens and min(131,072, 60,000 + 600 + 8) output
	// tokens: $0.0001068 + $0.0181824 = $0.0182892. $5 holds 273 of them; the 274th is
	// admitted on the few cents left and the 275th refused.
	const hold = money.Pico(spreeMaxInput*150_000 + 60_608*300_000)
	if hold != 18_289_200_000 {
		t.Fatalf("hold %d", hold)
	}
	if s.admitted != 274 || !errors.Is(s.refused, admission.ErrCreditSpent) {
		t.Fatalf("admitted %d of 1,000 requests (refusal %v); want 274, then the credit spent", s.admitted, s.refused)
	}
	if n := e.count(t, `SELECT count(*) FROM admission_holds WHERE account_id = $1 AND amount_pico = $2`, s.customer, int64(hold)); n != 274 {
		t.Fatalf("%d holds of %d recorded; want one per admitted request", n, hold)
	}

	s.release(t)
	// Each request is billed 712 input and 60,000 output tokens: $0.0001068 + $0.018.
	const charge = money.Pico(spreeMaxInput*150_000 + 60_000*300_000)
	bound := money.Pico(spreeMaxInput*150_000 + spreeMaxOutput*300_000) // one request's bound: $0.0394284
	balance := e.balance(t, ledger.AccountCustomerCredit, s.customer)
	if want := credit - 274*charge; !balance.Equal(want) { // $5 - $4.9612632 = $0.0387368
		t.Errorf("balance after metering %s; want %s", balance, want)
	}
	if balance.Cmp(money.BigPicoOf(-bound)) < 0 {
		t.Errorf("balance %s below minus one request's bound, %s", balance, -bound)
	}
	// The provider is owed its asks on what was billed, $0.06 and $0.12 per million: far less
	// than the $5 the customer paid.
	payable := e.balance(t, ledger.AccountProviderPayable, e.provider)
	if want := money.Pico(274 * (spreeMaxInput*testAskIn + 60_000*testAskOut)); !payable.Equal(want) {
		t.Errorf("provider owed %s; want %s", payable, want)
	}
	if payable.Cmp(money.BigPicoOf(credit)) > 0 {
		t.Errorf("provider owed %s, more than the %s the customer paid", payable, credit)
	}
	if n := e.count(t, `SELECT count(*) FROM admission_holds`); n != 0 {
		t.Errorf("%d holds left after metering; want each released to its charge", n)
	}
}

// The same spree on an API key limited to $2 a month, on an account with $100: the key is
// refused once its holds reach the limit, and after metering its spend is over the limit by
// less than one request's bound.
func TestDishonestRigCannotOvershootAKeyLimit(t *testing.T) {
	e := setupMeter(t)
	limit := 2 * money.PicoPerUSD
	s := e.newSpree(t, "Limited", 100*money.PicoPerUSD, &limit, 2)
	rewritten := usage.Usage{InputTokens: spreeMaxInput, OutputTokens: 60_000}
	for i := range 1000 {
		s.request(t, i%2, 60_000, 600, admission.TokenCount{Input: 1, Output: 1}, rewritten)
	}
	// $2 holds 109 requests' $0.0182892; the 110th is admitted on what is left.
	if s.admitted != 110 || !errors.Is(s.refused, admission.ErrKeyLimitReached) {
		t.Fatalf("admitted %d of 1,000 requests (refusal %v); want 110, then the key's limit reached", s.admitted, s.refused)
	}
	s.release(t)
	const charge = money.Pico(spreeMaxInput*150_000 + 60_000*300_000)
	bound := money.Pico(spreeMaxInput*150_000 + spreeMaxOutput*300_000)
	var spent money.BigPico
	if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(sum(charge_pico), 0) FROM api_key_spend WHERE api_key_id = $1`,
		s.apiKey).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	if !spent.Equal(110 * charge) { // $1.991748
		t.Errorf("key spend %s; want %s", spent, 110*charge)
	}
	if spent.Cmp(money.BigPicoOf(limit+bound)) > 0 {
		t.Errorf("key spend %s overshoots its %s limit by more than one request's bound %s", spent, limit, bound)
	}
	// The holds went to the charges, each $0.0001824 less: the key has $0.008252 left, so one
	// more request is admitted, and while it is in flight the next is refused.
	s.clock = s.clock.Add(time.Minute)
	in := admission.AdmitInput{AccountID: s.customer, APIKeyID: s.apiKey, KeyLimit: s.limit, Tier: catalog.TierStandard,
		MaxInputTokens: spreeMaxInput, MaxOutputTokens: spreeMaxOutput}
	res, err := s.replicas[0].Admit(context.Background(), in)
	if err != nil {
		t.Fatalf("after metering, with $0.008252 left: %v", err)
	}
	if _, err := s.replicas[0].Admit(context.Background(), in); !errors.Is(err, admission.ErrKeyLimitReached) {
		t.Errorf("with that request in flight: %v; want the key's limit reached", err)
	}
	res.Settle(admission.Settlement{})
}

// Honest traffic: each request's hold is its bound on what was relayed, recorded with the
// gateway's record; the meter releases it to the charge of what the rig reported, and the
// balance is then the credit less the postings, with nothing held.
func TestHonestTrafficHoldsAreReleasedToTheCharge(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	credit := 5 * money.PicoPerUSD
	s := e.newSpree(t, "Honest", credit, nil, 2)
	for i := range 40 {
		// 100 output tokens relayed as 400 bytes in 100 chunks, reported as they were.
		s.request(t, i%2, 400, 100, admission.TokenCount{Input: 50, Output: 100}, usage.Usage{InputTokens: 50, OutputTokens: 100})
	}
	if s.admitted != 40 {
		t.Fatalf("admitted %d of 40 honest requests", s.admitted)
	}
	// Held until metered: 712 input and 400 + 100 + 8 output tokens each.
	var held int64
	if err := e.pool.QueryRow(ctx, `SELECT sum(amount_pico) FROM admission_holds WHERE account_id = $1`, s.customer).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if want := int64(40 * (spreeMaxInput*150_000 + 508*300_000)); held != want { // 40 x $0.0002592
		t.Errorf("held %d before metering; want %d", held, want)
	}
	s.release(t)
	charge := money.Pico(50*150_000 + 100*300_000) // $0.0000375 each
	e.wantBalancesOf(t, s.customer, credit-40*charge)
	var postings, cached money.BigPico
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(p.amount), 0), min(a.balance) FROM ledger_postings p
		JOIN ledger_accounts a ON a.id = p.ledger_account_id
		WHERE a.kind = 'customer_credit' AND a.owner_account_id = $1`, s.customer).Scan(&postings, &cached); err != nil {
		t.Fatal(err)
	}
	if !postings.Equal(credit-40*charge) || postings != cached {
		t.Errorf("postings sum to %s, the cached balance is %s; want both %s", postings, cached, credit-40*charge)
	}
	if n := e.count(t, `SELECT count(*) FROM admission_holds`); n != 0 {
		t.Errorf("%d holds left after metering", n)
	}
	// With nothing held, the balance admits as it reads.
	s.clock = s.clock.Add(time.Minute)
	res, err := s.replicas[1].Admit(ctx, admission.AdmitInput{AccountID: s.customer, APIKeyID: s.apiKey, Tier: catalog.TierStandard,
		MaxInputTokens: spreeMaxInput, MaxOutputTokens: spreeMaxOutput})
	if err != nil {
		t.Fatal(err)
	}
	if res.Amount() != money.Pico(spreeMaxInput*150_000+spreeMaxOutput*300_000) {
		t.Errorf("reservation %d; want the ticket's bound", res.Amount())
	}
	res.Settle(admission.Settlement{})
}

func (e *meterEnv) wantBalancesOf(t *testing.T, customer string, want money.Pico) {
	t.Helper()
	if got := e.balance(t, ledger.AccountCustomerCredit, customer); !got.Equal(want) {
		t.Errorf("customer balance %s, want %s", got, want)
	}
}
