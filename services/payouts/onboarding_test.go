package payouts

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits"
)

// accountUpdated builds Stripe's account.updated event about a connected account.
func accountUpdated(eventID, acct string, detailsSubmitted, payoutsEnabled bool, created time.Time) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": eventID, "object": "event", "api_version": stripe.APIVersion, "created": created.Unix(),
		"type": "account.updated", "account": acct, "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": map[string]any{"id": acct, "object": "account", "type": "express",
			"details_submitted": detailsSubmitted, "payouts_enabled": payoutsEnabled, "charges_enabled": payoutsEnabled}},
	})
	return b
}

func (e env) deliver(t *testing.T, payload []byte) string {
	t.Helper()
	outcome, err := e.webhook.Handle(context.Background(), payload, credits.SignEvent(payload, testWebhookSecret, time.Now()))
	if err != nil {
		t.Fatalf("webhook: %v", err)
	}
	return outcome
}

// A provider clicks "connect" again and again, some clicks at once: Stripe is asked to create
// one Express account with the provider's email and country, the platform stores its id, and
// every click gets a fresh Account Link for that one account, with the platform's refresh and
// return URLs.
func TestConnectCreatesOneAccountHoweverOftenTheProviderClicks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()

	first, link, err := e.svc.Connect(ctx, e.connectInput("us"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.StripeAccountID, "acct_") || first.State != AccountOnboarding || first.Country != "US" ||
		first.Email != "ops@fjord.test" || first.DetailsSubmitted || first.PayoutsEnabled {
		t.Fatalf("connected account = %+v", first)
	}
	if !strings.HasPrefix(link.URL, "https://") {
		t.Fatalf("account link URL %q, want stripe-mock's https link", link.URL)
	}
	for range 3 {
		a, _, err := e.svc.Connect(ctx, e.connectInput("US"))
		if err != nil || a.StripeAccountID != first.StripeAccountID {
			t.Fatalf("a later click: %+v, %v; want account %s", a, err, first.StripeAccountID)
		}
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, _, err := e.svc.Connect(ctx, e.connectInput("US"))
			ids[i], errs[i] = a.StripeAccountID, err
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != first.StripeAccountID {
			t.Fatalf("click %d at once: %q, %v; want %s", i, ids[i], errs[i], first.StripeAccountID)
		}
	}

	if n := e.stripe.rec.Count(http.MethodPost, "/v1/accounts"); n != 1 {
		t.Fatalf("%d accounts created at Stripe, want 1", n)
	}
	var created, links int
	for _, r := range e.stripe.rec.Requests() {
		switch r.Path {
		case "/v1/accounts":
			created++
			for k, want := range map[string]string{"type": "express", "email": "ops@fjord.test", "country": "US",
				"capabilities[transfers][requested]": "true", "metadata[provider_account_id]": e.provider} {
				if got := r.Form.Get(k); got != want {
					t.Errorf("account %s = %q, want %q", k, got, want)
				}
			}
			if r.IdempotencyKey != "connect-account-"+e.provider+"-US" {
				t.Errorf("account idempotency key %q", r.IdempotencyKey)
			}
		case "/v1/account_links":
			links++
			for k, want := range map[string]string{"account": first.StripeAccountID, "type": "account_onboarding",
				"refresh_url": "https://gpumarket.test/provider/payouts/onboarding", "return_url": "https://gpumarket.test/provider/payouts/return"} {
				if got := r.Form.Get(k); got != want {
					t.Errorf("account link %s = %q, want %q", k, got, want)
				}
			}
		}
	}
	if links != 12 {
		t.Fatalf("%d account links, want one per click (12)", links)
	}
	var rows int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM provider_stripe_accounts WHERE provider_account_id = $1
		AND stripe_account_id = $2 AND creating_since IS NULL`, e.provider, first.StripeAccountID).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("stored accounts = %d, %v", rows, err)
	}

	// The refresh URL gives a new link to the same account and never creates one.
	if _, err := e.svc.OnboardingLink(ctx, e.provider, "https://gpumarket.test/r", "https://gpumarket.test/b"); err != nil {
		t.Fatal(err)
	}
	other := newOrg(t, e.pool, "Northwind Compute")
	if _, err := e.svc.OnboardingLink(ctx, other, "https://gpumarket.test/r", "https://gpumarket.test/b"); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("a link for a provider with no account: %v, want not found", err)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/accounts"); n != 1 {
		t.Fatalf("%d accounts created after the refresh links, want 1", n)
	}
}

// Stripe refuses the first creation (a country it does not support): nothing is stored as the
// provider's account, the reason is kept, the next click is not held back, and the corrected
// country creates the account under a key of its own.
func TestConnectAfterStripeRefusedTheCountry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if _, _, err := e.svc.Connect(ctx, e.connectInput("U1")); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("country U1: %v, want invalid", err)
	}
	if n := e.stripe.rec.Count(http.MethodPost, "/v1/accounts"); n != 0 {
		t.Fatalf("a malformed country reached Stripe %d times", n)
	}
	e.stripe.front.set(func(f *stripeFront) {
		f.accountRefusal = stripeErrorBody("country_unsupported", "Connected accounts in AQ are not supported.")
	})
	if _, _, err := e.svc.Connect(ctx, e.connectInput("AQ")); services.ErrorCode(err) != services.CodeUnavailable {
		t.Fatalf("country AQ: %v, want Stripe's refusal", err)
	}
	a, err := e.svc.Account(ctx, e.provider)
	if err != nil || a.StripeAccountID != "" || a.State != AccountNotConnected || !strings.Contains(a.LastError, "country_unsupported") {
		t.Fatalf("after the refusal: %+v, %v", a, err)
	}
	e.stripe.front.set(func(f *stripeFront) { f.accountRefusal = nil })
	if a, _, err = e.svc.Connect(ctx, e.connectInput("DE")); err != nil || a.Country != "DE" || a.LastError != "" ||
		!strings.HasPrefix(a.StripeAccountID, "acct_") {
		t.Fatalf("connect DE: %+v, %v", a, err)
	}
	sent := e.stripe.rec.Requests()
	if len(sent) < 2 || sent[0].IdempotencyKey != "connect-account-"+e.provider+"-AQ" || sent[1].IdempotencyKey != "connect-account-"+e.provider+"-DE" ||
		sent[1].Form.Get("country") != "DE" {
		t.Fatalf("creations sent: %+v", sent)
	}
}

// The return from onboarding reads the account from Stripe and records it: complete once
// Stripe says details are submitted and payouts are enabled, with the time it first was.
func TestReturnFromOnboardingRecordsCompletion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	a, _, err := e.svc.Connect(ctx, e.connectInput("US"))
	if err != nil {
		t.Fatal(err)
	}
	// Back before finishing: Stripe (stripe-mock's account) says nothing is submitted yet.
	if a, err = e.svc.Refresh(ctx, e.provider); err != nil || a.State != AccountOnboarding || a.OnboardedAt != nil {
		t.Fatalf("back before finishing: %+v, %v", a, err)
	}
	e.clock.Advance(time.Minute)
	e.stripe.front.set(func(f *stripeFront) { f.onboarded[a.StripeAccountID] = true })
	a, err = e.svc.Refresh(ctx, e.provider)
	if err != nil || a.State != AccountComplete || !a.DetailsSubmitted || !a.PayoutsEnabled || a.OnboardedAt == nil ||
		!a.OnboardedAt.Equal(testNow.Add(time.Minute)) {
		t.Fatalf("back after finishing: %+v, %v", a, err)
	}
	got, err := e.svc.Account(ctx, e.provider)
	if err != nil || got.State != AccountComplete {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if n := e.stripe.rec.Count(http.MethodGet, "/v1/accounts/"+a.StripeAccountID); n != 2 {
		t.Fatalf("%d reads of the account, want 2", n)
	}
}

// The provider never comes back: Stripe's account.updated webhook, signature-verified on the
// platform's one Stripe webhook, records the completed onboarding. A late event describing
// the account as it was before changes nothing; an event about an account that is no
// provider's, or one whose event account disagrees with its object, touches nothing.
func TestAccountUpdatedWebhookRecordsCompletion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	a, _, err := e.svc.Connect(ctx, e.connectInput("US"))
	if err != nil {
		t.Fatal(err)
	}
	at := testNow.Add(10 * time.Minute)
	if got := e.deliver(t, accountUpdated("evt_done", a.StripeAccountID, true, true, at)); got != "account "+a.StripeAccountID+" recorded: complete" {
		t.Fatalf("outcome %q", got)
	}
	done, err := e.svc.Account(ctx, e.provider)
	if err != nil || done.State != AccountComplete || done.OnboardedAt == nil || !done.OnboardedAt.Equal(at) {
		t.Fatalf("after the webhook: %+v, %v", done, err)
	}
	// An older description delivered late.
	if got := e.deliver(t, accountUpdated("evt_old", a.StripeAccountID, true, false, at.Add(-5*time.Minute))); !strings.Contains(got, "older") {
		t.Fatalf("late event outcome %q", got)
	}
	// The same event again.
	e.deliver(t, accountUpdated("evt_done", a.StripeAccountID, true, true, at))
	if got, _ := e.svc.Account(ctx, e.provider); got.State != AccountComplete {
		t.Fatalf("after a late and a repeated event: %+v", got)
	}
	if got := e.deliver(t, accountUpdated("evt_stranger", "acct_nobodys", true, true, at)); !strings.Contains(got, "no provider's") {
		t.Fatalf("stranger outcome %q", got)
	}
	forged := accountUpdated("evt_mixed", a.StripeAccountID, false, false, at.Add(time.Hour))
	var ev map[string]any
	_ = json.Unmarshal(forged, &ev)
	ev["account"] = "acct_someoneelse"
	forged, _ = json.Marshal(ev)
	if got := e.deliver(t, forged); !strings.Contains(got, "ignored") {
		t.Fatalf("mismatched account outcome %q", got)
	}
	if got, _ := e.svc.Account(ctx, e.provider); got.State != AccountComplete {
		t.Fatalf("after the stranger's events: %+v", got)
	}
	// Later, Stripe restricts the account: payouts are off again, and the first completion
	// time stays.
	if got := e.deliver(t, accountUpdated("evt_restricted", a.StripeAccountID, true, false, at.Add(time.Hour))); !strings.HasSuffix(got, "onboarding") {
		t.Fatalf("restricted outcome %q", got)
	}
	if got, _ := e.svc.Account(ctx, e.provider); got.State != AccountOnboarding || got.PayoutsEnabled || !got.OnboardedAt.Equal(at) {
		t.Fatalf("after the restriction: %+v", got)
	}
	// A forged event with the wrong signature is refused before anything is read.
	payload := accountUpdated("evt_forged", a.StripeAccountID, true, true, at.Add(2*time.Hour))
	if _, err := e.webhook.Handle(ctx, payload, credits.SignEvent(payload, "whsec_wrong", time.Now())); !errors.Is(err, credits.ErrBadSignature) {
		t.Fatalf("forged event: %v", err)
	}
	if got, _ := e.svc.Account(ctx, e.provider); got.PayoutsEnabled {
		t.Fatalf("a forged event enabled payouts: %+v", got)
	}
}
