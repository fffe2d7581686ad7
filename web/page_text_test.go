package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// The pages' text (docs/page-text.md): things by their names with their ids kept in a closed
// detail, moments with their zone, counts that agree with their nouns, destructive actions
// drawn as such and confirmed.

// visibleText is a page's main text as a person reads it: without the ids kept in closed
// details.
func visibleText(doc *goquery.Document) string {
	main := doc.Find("main").Clone()
	main.Find("details.id-detail").Remove()
	return text(main)
}

// hiddenFields are the named fields of the form at selector, as its submit button posts them.
func hiddenFields(doc *goquery.Document, selector string) url.Values {
	values := url.Values{}
	doc.Find(selector + ` input[type="hidden"]`).Each(func(_ int, s *goquery.Selection) {
		values.Add(s.AttrOr("name", ""), s.AttrOr("value", ""))
	})
	return values
}

// The admin's users page names each user's account; its id is only in the copyable detail
// and in the JSON.
func TestAdminUsersPageNamesAccounts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	names, err := e.accounts.AccountNames(ctx, []string{dev.AccountID})
	if err != nil || names[dev.AccountID] == "" {
		t.Fatalf("the developer's account name: %v, %v", names, err)
	}
	b, _ := loginBrowser(t, e, "admin@example.com")
	doc := getPage(t, b, e.srv.URL+"/admin/users")
	var row *goquery.Selection
	doc.Find(testID("user")).Each(func(_ int, s *goquery.Selection) {
		if strings.Contains(s.Text(), "developer@example.com") {
			row = s
		}
	})
	if row == nil {
		t.Fatal("no row for developer@example.com")
	}
	cell := row.Find(testID("user-account")).Clone()
	if id := cell.Find(testID("id")).Text(); id != dev.AccountID {
		t.Errorf("the account's copyable id = %q, want %s", id, dev.AccountID)
	}
	cell.Find("details").Remove()
	if got := text(cell); got != names[dev.AccountID] {
		t.Errorf("account cell = %q, want %q", got, names[dev.AccountID])
	}
	if strings.Contains(visibleText(doc), dev.AccountID) {
		t.Error("the page's visible text shows an account id")
	}
	var out struct {
		Users []struct {
			Email     string `json:"email"`
			AccountID string `json:"account_id"`
			TimeZone  string `json:"time_zone"`
		} `json:"users"`
	}
	wantStatus(t, e.call(t, e.token(t, "admin@example.com", demo.Password), http.MethodGet, "/api/admin/users", nil, &out), http.StatusOK)
	found := false
	for _, u := range out.Users {
		found = found || (u.Email == "developer@example.com" && u.AccountID == dev.AccountID && u.TimeZone == "UTC")
	}
	if !found {
		t.Error("the JSON does not carry the developer's account id and zone")
	}
}

// Finance's bulk approval names each document by its customer and period, and the audit log
// names its subjects by number; the ids stay in the copyable details and in the JSON. The
// month's statements name their regions, not their codes.
func TestFinanceNamesDocumentsNotIDs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := e.closeLastMonth(t)
	acme := e.invoiceOf(t, m, "developer@example.com")
	b, csrf := loginBrowser(t, e, "finance@example.com")

	ask := askedToConfirm(t, b, e.srv.URL+"/finance/invoices/approve", url.Values{"_csrf": {csrf}, "id": {acme.ID}})
	res, err := b.PostForm(e.srv.URL+ask.Find(testID("confirm-form")).AttrOr("action", ""), formOf(ask))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	result := doc.Find(testID("approval-result"))
	want := acme.AccountName + "'s invoice for " + acme.Period.Label()
	if got := text(result.Find(testID("approved-document"))); got != want {
		t.Errorf("approval result names %q, want %q", got, want)
	}
	number := text(result.Find(testID("approved-number")))
	if !strings.HasPrefix(number, "GPM-") {
		t.Errorf("approval result number %q", number)
	}
	if strings.Contains(visibleText(doc), acme.ID) {
		t.Errorf("the approval shows the invoice's id: %q", text(result))
	}

	audit := getPage(t, b, e.srv.URL+"/finance/audit")
	visible := visibleText(audit)
	if strings.Contains(visible, acme.ID) {
		t.Error("the audit log's visible text shows the invoice's id")
	}
	if !strings.Contains(visible, "invoice "+number+" ("+acme.AccountName) {
		t.Errorf("the audit log does not name invoice %s of %s", number, acme.AccountName)
	}
	if audit.Find(testID("id")).FilterFunction(func(_ int, s *goquery.Selection) bool { return s.Text() == acme.ID }).Length() == 0 {
		t.Error("the audit log has no copyable id of the invoice")
	}
	if !strings.Contains(apiBody(t, e, "finance@example.com", "/api/finance/audit"), acme.ID) {
		t.Error("the audit log's JSON does not carry the invoice's id")
	}

	// Statements write regions by name.
	page, err := e.invoicing.Statements(context.Background(), invoicing.StatementFilter{Period: m.period})
	if err != nil || len(page.Statements) == 0 {
		t.Fatalf("statements: %d, %v", len(page.Statements), err)
	}
	code := regexp.MustCompile(` in [a-z]{2,5} · `)
	named := false
	for _, v := range page.Statements {
		st, err := e.invoicing.Statement(context.Background(), v.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range st.Lines {
			if code.MatchString(l.Description) {
				t.Errorf("statement line %q writes a region code", l.Description)
			}
			named = named || regexp.MustCompile(` in (Norway|France|Germany|Poland|India|United States|European Union \(EU-27\)|World average) · `).MatchString(l.Description)
		}
	}
	if !named {
		t.Error("no statement line names its region")
	}
}

// apiBody is the body of a GET of the API as the user.
func apiBody(t *testing.T, e *env, email, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token(t, email, demo.Password))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	return string(body)
}

var zoned = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2} (UTC|CET|CEST)$`)

// Every moment says its zone: UTC until the user chooses another, then that zone's
// abbreviation (Europe/Oslo is CET in winter and CEST in summer). A zone the database does
// not know is refused and nothing changes. The pages' other text is kept: a purchase is
// written in its zone, an expired one says so.
func TestMomentsSayTheirZone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	p := e.checkout(t, e.token(t, "developer@example.com", demo.Password), dev.AccountID, "20")
	b, csrf := loginBrowser(t, e, "developer@example.com")

	created := func() string {
		t.Helper()
		row := getPage(t, b, e.srv.URL+"/credits").Find(`[data-purchase="` + p.ID + `"] td`).First()
		return text(row)
	}
	utc := created()
	if !zoned.MatchString(utc) || !strings.HasSuffix(utc, " UTC") {
		t.Fatalf("purchase created %q, want a minute in UTC", utc)
	}

	res := postForm(t, b, e.srv.URL+"/settings/profile", url.Values{"_csrf": {csrf}, "time_zone": {"Mars/Olympus_Mons"}})
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if got := created(); got != utc {
		t.Fatalf("after a refused zone, created %q, want %q", got, utc)
	}

	res = postForm(t, b, e.srv.URL+"/settings/profile", url.Values{"_csrf": {csrf}, "time_zone": {"Europe/Oslo"}})
	wantStatus(t, res, http.StatusSeeOther)
	oslo, _ := time.LoadLocation("Europe/Oslo")
	want := p.CreatedAt.In(oslo).Format("2006-01-02 15:04 MST")
	if got := created(); got != want || !(strings.HasSuffix(got, " CET") || strings.HasSuffix(got, " CEST")) {
		t.Errorf("in Europe/Oslo, created %q, want %q", got, want)
	}
	if v := getPage(t, b, e.srv.URL+"/settings/profile").Find(testID("time-zone")).AttrOr("value", ""); v != "Europe/Oslo" {
		t.Errorf("the profile's zone is %q, want Europe/Oslo", v)
	}
	var me struct {
		User struct {
			TimeZone string `json:"time_zone"`
		} `json:"user"`
	}
	if err := json.Unmarshal([]byte(apiBody(t, e, "developer@example.com", "/api/me")), &me); err != nil || me.User.TimeZone != "Europe/Oslo" {
		t.Errorf("/api/me zone = %q, %v; want Europe/Oslo", me.User.TimeZone, err)
	}
}

// A checkout not paid by its expiry shows as expired on the credits page: at once when
// Stripe's signed checkout.session.expired arrives, and, before it does, once its expiry
// has passed.
func TestCheckoutExpiredShowsExpired(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	token := e.token(t, "developer@example.com", demo.Password)
	byEvent := e.checkout(t, token, dev.AccountID, "20")
	byTime := e.checkout(t, token, dev.AccountID, "30")
	open := e.checkout(t, token, dev.AccountID, "40")

	event := credits.CheckoutEvent("evt_web_expired", "checkout.session.expired", byEvent, "unpaid", "", time.Now())
	for range 2 {
		wantStatus(t, e.postWebhook(t, event, credits.SignEvent(event, webhookSecret, time.Now())), http.StatusOK)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE credit_purchases SET expires_at = $2 WHERE id = $1`, byTime.ID, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}

	b, _ := loginBrowser(t, e, "developer@example.com")
	doc := getPage(t, b, e.srv.URL+"/credits")
	for id, want := range map[string]string{byEvent.ID: "expired", byTime.ID: "expired", open.ID: "pending"} {
		if got := text(doc.Find(`[data-purchase="` + id + `"] ` + testID("purchase-status"))); got != want {
			t.Errorf("purchase %s shows %q, want %q", id, got, want)
		}
	}
	if n := countRows(t, e, `SELECT count(*) FROM credit_purchases WHERE status = 'expired'`); n != 1 {
		t.Errorf("%d purchases marked expired, want 1 (the event's, once)", n)
	}
	ret := getPage(t, b, e.srv.URL+"/credits/return?purchase="+byTime.ID)
	if ret.Find(testID("expired")).Length() != 1 {
		t.Errorf("the return page of an expired checkout says %q", visibleText(ret))
	}
	if e.balance(t, token) != "0.00" {
		t.Error("an expired checkout credited something")
	}
}

// Destructive actions are drawn as such and ask to be confirmed on the server: a POST
// without the confirmation destroys nothing; the confirmation does.
func TestDestructiveActionsAreConfirmed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()

	t.Run("deleting a webhook endpoint", func(t *testing.T) {
		token := e.token(t, "developer@example.com", demo.Password)
		var created struct {
			Endpoint struct {
				ID string `json:"id"`
			} `json:"endpoint"`
		}
		wantStatus(t, e.call(t, token, http.MethodPost, "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/confirm"}, &created), http.StatusCreated)
		b, csrf := loginBrowser(t, e, "developer@example.com")
		page := getPage(t, b, e.srv.URL+"/settings/webhooks")
		if page.Find(testID("endpoint-delete")+".danger").Length() != 1 {
			t.Error("the delete button is not drawn as a destructive action")
		}
		deleteURL := e.srv.URL + "/settings/webhooks/" + created.Endpoint.ID + "/delete"
		ask := askedToConfirm(t, b, deleteURL, url.Values{"_csrf": {csrf}})
		if !strings.Contains(consequences(ask), "cannot be undone") || ask.Find(testID("confirm")+".danger").Length() != 1 {
			t.Errorf("the confirmation says %q", consequences(ask))
		}
		wantStatus(t, postForm(t, b, deleteURL, url.Values{"_csrf": {csrf}, "confirm": {"yes"}, "confirm_token": {"made-up"}}), http.StatusConflict)
		if n := countRows(t, e, `SELECT count(*) FROM webhook_endpoints WHERE id = $1`, created.Endpoint.ID); n != 1 {
			t.Fatalf("the endpoint is gone before the confirmation")
		}
		wantStatus(t, confirmation(t, b, e.srv.URL, ask), http.StatusSeeOther)
		if n := countRows(t, e, `SELECT count(*) FROM webhook_endpoints WHERE id = $1`, created.Endpoint.ID); n != 0 {
			t.Errorf("the confirmed delete left the endpoint")
		}
	})

	t.Run("delisting a rig", func(t *testing.T) {
		prov, err := e.accounts.UserByEmail(ctx, "provider@example.com")
		if err != nil {
			t.Fatal(err)
		}
		rigs, err := e.catalog.ListOwn(ctx, prov.AccountID)
		if err != nil || len(rigs) == 0 {
			t.Fatalf("the provider's rigs: %d, %v", len(rigs), err)
		}
		rig := rigs[0]
		b, csrf := loginBrowser(t, e, "provider@example.com")
		if getPage(t, b, e.srv.URL+"/provider/rigs").Find(testID("delist")+".danger").Length() == 0 {
			t.Error("the delist button is not drawn as a destructive action")
		}
		delistURL := e.srv.URL + "/provider/rigs/" + rig.ID + "/delist"
		ask := askedToConfirm(t, b, delistURL, url.Values{"_csrf": {csrf}})
		if !strings.Contains(consequences(ask), "cannot be resumed") {
			t.Errorf("the confirmation says %q", consequences(ask))
		}
		if got, _ := e.catalog.Own(ctx, prov.AccountID, rig.ID); got.Status == "delisted" {
			t.Fatal("the rig was delisted before the confirmation")
		}
		// Pausing needs no confirmation: it can be undone.
		wantStatus(t, postForm(t, b, e.srv.URL+"/provider/rigs/"+rig.ID+"/pause", url.Values{"_csrf": {csrf}}), http.StatusSeeOther)
		wantStatus(t, confirmation(t, b, e.srv.URL, ask), http.StatusSeeOther)
		if n := countRows(t, e, `SELECT count(*) FROM offerings WHERE id = $1 AND status = 'delisted'`, rig.ID); n != 1 {
			t.Error("after the confirmation the rig is not delisted")
		}
	})

	t.Run("revoking a key and removing a member are drawn as destructive", func(t *testing.T) {
		token := e.token(t, "developer@example.com", demo.Password)
		wantStatus(t, e.call(t, token, http.MethodPost, "/api/keys", map[string]any{"name": "confirm-style"}, nil), http.StatusCreated)
		b, _ := loginBrowser(t, e, "developer@example.com")
		if getPage(t, b, e.srv.URL+"/keys").Find(testID("key-revoke")+".danger").Length() == 0 {
			t.Error("the revoke button is not drawn as a destructive action")
		}
	})
}
