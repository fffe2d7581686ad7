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

	"github.com/gpumarket/gpumarket/services/billing"
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

// The whole platform in test mode, as `make run` runs it: a provider connects Stripe through
// its Payouts page (the account is created on the platform's own stripe-mock) and completes
// onboarding on the local test page; another provider, who never comes back, is completed by
// Stripe's account.updated event on the platform's webhook, signed with its secret.
func TestPlatformOnboardsProvidersOnStripeMock(t *testing.T) {
	cfg := testConfig(t, Roles{Web: true})
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
	req.Header.Set("Stripe-Signature", billing.SignEvent(payload, cfg.StripeWebhookSecrets[0], time.Now()))
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
	if got := checkoutOrigins(false); !slices.Equal(got, []string{billing.StripeCheckoutOrigin, payouts.StripeConnectOrigin}) {
		t.Fatalf("origins with real payments: %v", got)
	}
	if got := checkoutOrigins(true); len(got) != 0 {
		t.Fatalf("origins in test mode: %v", got)
	}
}
