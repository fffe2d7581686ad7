package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/payouts"
)

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// pageClient is a browser as the platform's pages see it: cookies, no redirects followed.
type pageClient struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

func newPageClient(t *testing.T, base, email string) *pageClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &pageClient{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, body := c.get("/login")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF field on the login page")
	}
	c.csrf = m[1]
	if code, loc := c.post("/login", url.Values{"email": {email}, "password": {"gpumarket-demo"}}); code != http.StatusSeeOther || strings.HasPrefix(loc, "/login") {
		t.Fatalf("login as %s: %d to %q", email, code, loc)
	}
	return c
}

func (c *pageClient) get(path string) (int, string) {
	c.t.Helper()
	res, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// post sends a page form with the CSRF token and returns the status and where it redirects.
func (c *pageClient) post(path string, form url.Values) (int, string) {
	c.t.Helper()
	form.Set("_csrf", c.csrf)
	res, err := c.http.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}

var confirmTokenField = regexp.MustCompile(`name="confirm_token" value="([^"]+)"`)

// confirmed posts a form of an action that asks for confirmation: the first POST must answer
// the confirmation page (200), whose token the second carries with confirm=yes. It returns
// the second's status and where it redirects.
func (c *pageClient) confirmed(path string, form url.Values) (int, string) {
	c.t.Helper()
	form.Set("_csrf", c.csrf)
	res, err := c.http.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := confirmTokenField.FindStringSubmatch(string(b))
	if res.StatusCode != http.StatusOK || m == nil {
		c.t.Fatalf("POST %s: %d without a confirmation to confirm", path, res.StatusCode)
	}
	form.Set("confirm", "yes")
	form.Set("confirm_token", m[1])
	return c.post(path, form)
}

// The whole platform in test mode, as `make run` runs it: a provider connects Stripe through
// its Payouts page (the account is created on the platform's own stripe-mock) and completes
// onboarding on the local test page; another provider, who never comes back, is completed by
// Stripe's account.updated event on the platform's webhook, signed with its secret.
func TestPlatformOnboardsProvidersOnStripeMock(t *testing.T) {
	cfg := testConfig(t, Roles{Web: true, Gateway: true})
	p := runPlatform(t, cfg)
	ctx := context.Background()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	fjord := newPageClient(t, p.URL(), "provider@example.com")
	if code, loc := fjord.post("/provider/payouts/connect", url.Values{"country": {"NO"}}); code != http.StatusSeeOther ||
		loc != p.URL()+"/provider/payouts/test-onboarding" {
		t.Fatalf("connect: %d to %q", code, loc)
	}
	if code, body := fjord.get("/provider/payouts/test-onboarding"); code != http.StatusOK || !strings.Contains(body, "TEST ONBOARDING") {
		t.Fatalf("test onboarding page: %d", code)
	}
	if code, loc := fjord.post("/provider/payouts/test-onboarding", url.Values{}); code != http.StatusSeeOther || loc != "/provider/payouts?flash=onboarded" {
		t.Fatalf("complete onboarding: %d to %q", code, loc)
	}
	if _, body := fjord.get("/provider/payouts"); !strings.Contains(body, `data-state="complete"`) {
		t.Fatal("the payouts page does not show the account complete")
	}

	northwind := newPageClient(t, p.URL(), "northwind@example.com")
	if code, _ := northwind.post("/provider/payouts/connect", url.Values{"country": {"US"}}); code != http.StatusSeeOther {
		t.Fatalf("connect: %d", code)
	}
	var acct string
	if err := p.pool.QueryRow(ctx, `SELECT s.stripe_account_id FROM provider_stripe_accounts s
		JOIN accounts a ON a.id = s.provider_account_id WHERE a.name = 'Northwind Compute'`).Scan(&acct); err != nil {
		t.Fatal(err)
	}
	payload := []byte(fmt.Sprintf(`{"id":"evt_platform_acct","object":"event","type":"account.updated","created":%d,"account":%q,
		"data":{"object":{"id":%q,"object":"account","details_submitted":true,"payouts_enabled":true}}}`, time.Now().Unix(), acct, acct))
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/webhooks/stripe", strings.NewReader(string(payload)))
	req.Header.Set("Stripe-Signature", credits.SignEvent(payload, cfg.StripeWebhookSecrets[0], time.Now()))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	_ = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || out["outcome"] != "account "+acct+" recorded: complete" {
		t.Fatalf("webhook: %d %v", res.StatusCode, out)
	}
	if _, body := northwind.get("/provider/payouts"); !strings.Contains(body, `data-state="complete"`) {
		t.Fatal("the webhook's completion does not show")
	}
}

// With real payments the pages' CSP lets forms go to Stripe Checkout and Stripe Connect
// onboarding; in test mode to neither, as both pages are the platform's own.
func TestCheckoutOriginsNameStripesPages(t *testing.T) {
	if got := checkoutOrigins(false); !slices.Equal(got, []string{credits.StripeCheckoutOrigin, payouts.StripeConnectOrigin}) {
		t.Fatalf("origins with real payments: %v", got)
	}
	if got := checkoutOrigins(true); len(got) != 0 {
		t.Fatalf("origins in test mode: %v", got)
	}
}

// The whole platform in test mode, as `make run` runs it, with statements and payouts joined:
// finance closes the last month of the demo's history and approves the providers' statements.
// Fjord, onboarded on the local test page, is paid at once by a transfer on the platform's
// stripe-mock and sees it on its Statements and Payouts pages; Northwind, not connected yet,
// sees its payout failed, onboards, and finance's retry from the payouts page pays it, once.
func TestPlatformPaysApprovedStatements(t *testing.T) {
	cfg := testConfig(t, Roles{Web: true, Gateway: true})
	cfg.Invoicing.Seller, cfg.Invoicing.MinimumPayout = demoSeller, demoMinimumPayout
	p := runPlatform(t, cfg)
	ctx := context.Background()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SeedHistory(ctx); err != nil {
		t.Fatal(err)
	}
	fjord := newPageClient(t, p.URL(), "provider@example.com")
	if code, _ := fjord.post("/provider/payouts/connect", url.Values{"country": {"NO"}}); code != http.StatusSeeOther {
		t.Fatalf("connect: %d", code)
	}
	if code, loc := fjord.post("/provider/payouts/test-onboarding", url.Values{}); code != http.StatusSeeOther || loc != "/provider/payouts?flash=onboarded" {
		t.Fatalf("complete onboarding: %d to %q", code, loc)
	}
	finance, err := p.accounts.UserByEmail(ctx, "finance@example.com")
	if err != nil {
		t.Fatal(err)
	}
	period := invoicing.PeriodOf(time.Now()).Prev()
	if _, err := p.invoicing.Close(ctx, invoicing.CloseInput{Period: period, By: finance.ID}); err != nil {
		t.Fatal(err)
	}
	page, err := p.invoicing.Statements(ctx, invoicing.StatementFilter{Period: period})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, st := range page.Statements {
		ids[st.ProviderName] = st.ID
	}
	res, err := p.invoicing.ApproveStatements(ctx, finance.ID, []string{ids["Fjord GPU Co-op"], ids["Northwind Compute"]})
	if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("approve: %+v, %v", res, err)
	}
	if res[0].Payout == nil || res[0].Payout.Status != payouts.StatusPaid || !strings.HasPrefix(res[0].Payout.StripeTransferID, "tr_") {
		t.Fatalf("Fjord's payout: %+v, %v", res[0].Payout, res[0].PayoutErr)
	}
	if res[1].Payout == nil || res[1].Payout.Status != payouts.StatusFailed || !strings.Contains(res[1].PayoutProblem, "no Stripe account") {
		t.Fatalf("Northwind's payout: %+v, %q", res[1].Payout, res[1].PayoutProblem)
	}
	if _, body := fjord.get("/provider/statements"); !strings.Contains(body, `data-id="`+ids["Fjord GPU Co-op"]+`" data-status="paid" data-payout-status="paid"`) ||
		!strings.Contains(body, res[0].Payout.StripeTransferID) {
		t.Fatal("Fjord's Statements page does not show its statement paid by its transfer")
	}
	if _, body := fjord.get("/provider/payouts"); !strings.Contains(body, `href="/statements/`+ids["Fjord GPU Co-op"]+`"`) {
		t.Fatal("Fjord's Payouts page does not link its payout to its statement")
	}

	northwind := newPageClient(t, p.URL(), "northwind@example.com")
	if code, _ := northwind.post("/provider/payouts/connect", url.Values{"country": {"US"}}); code != http.StatusSeeOther {
		t.Fatalf("connect: %d", code)
	}
	if code, _ := northwind.post("/provider/payouts/test-onboarding", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("complete onboarding: %d", code)
	}
	fin := newPageClient(t, p.URL(), "finance@example.com")
	if code, loc := fin.confirmed("/finance/payouts/"+res[1].Payout.ID+"/retry", url.Values{}); code != http.StatusSeeOther ||
		loc != "/finance/payouts?flash=payout-paid" {
		t.Fatalf("retry: %d to %q", code, loc)
	}
	// A paid payout offers no retry: asked again, its page says so and sends nothing.
	if code, _ := fin.post("/finance/payouts/"+res[1].Payout.ID+"/retry", url.Values{}); code != http.StatusConflict {
		t.Fatalf("retry again: %d, want 409", code)
	}
	st, err := p.invoicing.Statement(ctx, ids["Northwind Compute"])
	if err != nil || st.Status != invoicing.StatusPaid || st.PaidBy != "finance@example.com" {
		t.Fatalf("Northwind's statement after the retry: %s by %q, %v", st.Status, st.PaidBy, err)
	}
	var posted int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM ledger_transactions WHERE kind = 'payout'`).Scan(&posted); err != nil || posted != 2 {
		t.Fatalf("%d payouts posted, want 2 (%v)", posted, err)
	}
}
