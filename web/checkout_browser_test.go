package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/web"
)

// hostedCheckout stands in for Stripe: an origin of its own that serves the payment page the
// sessions it creates point to, and records the visits to it.
type hostedCheckout struct {
	srv    *httptest.Server
	mu     sync.Mutex
	visits []string
}

func newHostedCheckout(t *testing.T) *hostedCheckout {
	h := &hostedCheckout{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/c/pay/") { // not the browser's favicon
			h.mu.Lock()
			h.visits = append(h.visits, r.Method+" "+r.URL.Path)
			h.mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!DOCTYPE html><title>Checkout</title><h1 data-testid="hosted-checkout">Pay gpumarket</h1>`)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostedCheckout) visited() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.visits...)
}

// CreateSession answers as Stripe does: a session whose URL is on the hosted page's origin.
func (h *hostedCheckout) CreateSession(_ context.Context, req credits.CheckoutRequest) (credits.CheckoutSession, error) {
	id := "cs_test_" + strings.ReplaceAll(req.PurchaseID, "-", "")
	return credits.CheckoutSession{ID: id, URL: h.srv.URL + "/c/pay/" + id}, nil
}

// livePayments configures real payments (no test page) on the hosted checkout, with its origin
// in the pages' CSP when allow is set.
func livePayments(h *hostedCheckout, allow bool) func(*web.Config, *pgxpool.Pool) {
	return func(cfg *web.Config, pool *pgxpool.Pool) {
		cr := credits.NewCredits(pool, cfg.Payments.Ledger, h, nil)
		cfg.Payments = web.Payments{Credits: cr, Ledger: cfg.Payments.Ledger,
			Webhook: credits.NewStripeWebhook(cr, []string{webhookSecret})}
		if allow {
			cfg.Payments.CheckoutOrigins = []string{h.srv.URL}
		}
	}
}

// The buy form, submitted in Chromium, reaches the payment page on its own origin: the pages'
// CSP lets the form's redirect go there (Chromium applies form-action to redirects after a
// form post). The control beside it shows the browser refusing that very redirect under the
// old policy, form-action 'self'.
func TestBuyFormReachesTheHostedCheckoutInChromium(t *testing.T) {
	hosted := newHostedCheckout(t)
	e := setupWith(t, livePayments(hosted, true))

	res, _ := get(t, e.srv.URL+"/catalog", nil)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+hosted.srv.URL+";") {
		t.Fatalf("CSP %q: form-action does not allow the payment page's origin %s", csp, hosted.srv.URL)
	}

	b := newBrowser(t, e.srv.URL)
	b.open("/login?next=/credits")
	b.do("fill the login form", fill("#email", "developer@example.com"), fill("#password", demo.Password))
	if st := b.navigate("log in", click(testID("login-submit"))); st != http.StatusOK || b.path() != "/credits" {
		t.Fatalf("after logging in: %d at %s, want the credits page", st, b.path())
	}
	if n := b.count(testID("test-mode-banner")); n != 0 {
		t.Errorf("real payments, yet the page shows %d test-mode banners", n)
	}
	b.do("enter 20 in the amount", fill(testID("buy-form")+` input[name="amount_usd"]`, "20"))
	if st := b.navigate("submit the buy form", click(testID("buy-submit"))); st != http.StatusOK {
		t.Fatalf("after the buy form: status %d", st)
	}
	loc := browserRun(b, "read location", chromedp.Location())
	if !strings.HasPrefix(loc, hosted.srv.URL+"/c/pay/cs_test_") {
		t.Fatalf("after the buy form the browser is at %s, want the payment page on %s", loc, hosted.srv.URL)
	}
	if h := b.text(testID("hosted-checkout")); h != "Pay gpumarket" {
		t.Errorf("the payment page shows %q", h)
	}
	if v := hosted.visited(); len(v) != 1 || !strings.HasPrefix(v[0], "GET /c/pay/cs_test_") {
		t.Errorf("the payment page's origin saw %v, want one GET of the session's page", v)
	}
	var status string
	var cents int64
	if err := e.pool.QueryRow(context.Background(), `SELECT status, amount_cents FROM credit_purchases`).Scan(&status, &cents); err != nil ||
		status != "pending" || cents != 2000 {
		t.Errorf("the purchase: %s %d cents (%v), want one pending purchase of 2000 cents", status, cents, err)
	}

	t.Run("control: form-action 'self' blocks the redirect", func(t *testing.T) {
		blocked := newHostedCheckout(t)
		var posts sync.WaitGroup
		posts.Add(1)
		site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				posts.Done()
				http.Redirect(w, r, blocked.srv.URL+"/c/pay/cs_test_control", http.StatusSeeOther)
				return
			}
			w.Header().Set("Content-Security-Policy", "default-src 'self'; form-action 'self'")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!DOCTYPE html><form method="post" action="/checkout"><button data-testid="buy-submit">Buy</button></form>`)
		}))
		defer site.Close()
		cb := newBrowser(t, site.URL)
		cb.open("/")
		cb.do("submit the form", click(testID("buy-submit")))
		posts.Wait() // the form was posted and answered with the redirect
		time.Sleep(2 * time.Second)
		if v := blocked.visited(); len(v) != 0 {
			t.Fatalf("under form-action 'self' Chromium still followed the redirect: %v; the test above proves nothing", v)
		}
	})
}

// Without the payment page's origin in the CSP the browser would be stopped without a word:
// the buy form says what happened instead, and the log says why.
func TestBuyFormToAnOriginTheCSPRefusesSaysSo(t *testing.T) {
	t.Parallel()
	hosted := newHostedCheckout(t)
	logs := &logBuffer{}
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		logTo(logs)(cfg, pool)
		livePayments(hosted, false)(cfg, pool)
	})
	b, csrf := loginBrowser(t, e, "developer@example.com")
	res, body := postPage(t, b, e.srv.URL+"/credits/checkout", map[string][]string{"_csrf": {csrf}, "amount_usd": {"20"}})
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Nothing was charged") {
		t.Fatalf("the buy form: %d, want 503 saying nothing was charged", res.StatusCode)
	}
	if !strings.Contains(logs.String(), "does not allow") {
		t.Error("the log does not say why the payment page could not be reached")
	}
}

// In test mode every page says so, error pages included; with real payments none does.
func TestEveryPageSaysTestMode(t *testing.T) {
	t.Parallel()
	testMode := setup(t)
	live := setupWith(t, livePayments(newHostedCheckout(t), true))
	for _, c := range []struct {
		e    *env
		want int
	}{{testMode, 1}, {live, 0}} {
		b, _ := loginBrowser(t, c.e, "developer@example.com")
		for _, path := range []string{"/", "/catalog", "/calculator", "/credits", "/keys", "/usage", "/no-such-page"} {
			res, err := b.Get(c.e.srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := goqueryFrom(res)
			if err != nil {
				t.Fatal(err)
			}
			banner := doc.Find(testID("test-mode-banner"))
			if banner.Length() != c.want || (c.want == 1 && !strings.Contains(banner.Text(), "No card is charged")) {
				t.Errorf("%s (test mode: %v): %d banners %q, want %d", path, c.want == 1, banner.Length(), banner.Text(), c.want)
			}
		}
		anonymous, err := http.Get(c.e.srv.URL + "/login")
		if err != nil {
			t.Fatal(err)
		}
		if doc, _ := goqueryFrom(anonymous); doc.Find(testID("test-mode-banner")).Length() != c.want {
			t.Errorf("/login for a visitor (test mode: %v): want %d banners", c.want == 1, c.want)
		}
	}
}
