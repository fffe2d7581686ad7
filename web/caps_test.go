package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
)

// A script creating keys in a loop: the account's 101st live key is refused with 409 and what
// to do; revoking one makes room.
func TestLiveKeysPerAccountAreCapped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dev := e.token(t, "developer@example.com", demo.Password)
	var first keyJSON
	for i := range accounts.MaxLiveKeys {
		var k keyJSON
		wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": fmt.Sprintf("loop %d", i)}, &k), http.StatusCreated)
		if i == 0 {
			first = k
		}
	}
	var out apiErrorJSON
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "one too many"}, &out), http.StatusConflict)
	if out.Error.Code != "conflict" || !strings.Contains(out.Error.Message, "100 live API keys") || !strings.Contains(out.Error.Message, "Revoke") {
		t.Fatalf("key 101: %+v, want a conflict that says to revoke one", out.Error)
	}
	if n := countRows(t, e, `SELECT count(*) FROM api_keys`); n != accounts.MaxLiveKeys {
		t.Fatalf("%d keys stored, want %d", n, accounts.MaxLiveKeys)
	}
	// The page form says the same beside it.
	b, csrf := loginBrowser(t, e, "developer@example.com")
	res, body := postPage(t, b, e.srv.URL+"/keys", url.Values{"_csrf": {csrf}, "name": {"from the page"}})
	wantStatus(t, res, http.StatusConflict)
	if doc, _ := goquery.NewDocumentFromReader(strings.NewReader(body)); !strings.Contains(doc.Find(testID("form-error")).Text(), "100 live API keys") {
		t.Errorf("the keys page does not say why the key was refused")
	}
	wantStatus(t, e.call(t, dev, http.MethodDelete, "/api/keys/"+first.ID, nil, nil), http.StatusNoContent)
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "in the freed place"}, nil), http.StatusCreated)
}

// A script starting $10,000 checkouts in a loop: the eleventh unpaid one of the day is
// refused with 409 and what to do, on the API and on the credits page, and creates nothing.
func TestOpenCheckoutsPerAccountAreCapped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dev := e.token(t, "developer@example.com", demo.Password)
	for i := range credits.MaxOpenCheckouts {
		var p struct {
			ID string `json:"id"`
		}
		if res := e.call(t, dev, http.MethodPost, "/api/credits/checkout", map[string]any{"amount_usd": "10000"}, &p); res.StatusCode != http.StatusCreated {
			t.Fatalf("checkout %d: %d", i+1, res.StatusCode)
		}
	}
	var out apiErrorJSON
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/credits/checkout", map[string]any{"amount_usd": "10000"}, &out), http.StatusConflict)
	if out.Error.Code != "conflict" || !strings.Contains(out.Error.Message, "10 checkouts") {
		t.Fatalf("checkout 11: %+v", out.Error)
	}
	b, csrf := loginBrowser(t, e, "developer@example.com")
	res, body := postPage(t, b, e.srv.URL+"/credits/checkout", url.Values{"_csrf": {csrf}, "amount_usd": {"10000"}})
	wantStatus(t, res, http.StatusConflict)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if msg := doc.Find(testID("form-error")).Text(); !strings.Contains(msg, "Pay one of them") {
		t.Errorf("the credits page says %q, want what to do", msg)
	}
	if n := countRows(t, e, `SELECT count(*) FROM credit_purchases`); n != credits.MaxOpenCheckouts {
		t.Fatalf("%d purchases stored, want %d", n, credits.MaxOpenCheckouts)
	}
}
