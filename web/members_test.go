package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
)

// invite sends an invitation from the members page of the browser's account and returns the
// link's path.
func invite(t *testing.T, e *env, owner *http.Client, csrf, email, role string) string {
	t.Helper()
	res := postForm(t, owner, e.srv.URL+"/account/members/invite", url.Values{"email": {email}, "role": {role}, "_csrf": {csrf}})
	wantStatus(t, res, http.StatusOK)
	msg := e.mail.to(t, email)
	if !strings.HasPrefix(msg.Key, "invite:") || !strings.Contains(msg.Text, e.srv.URL+accounts.InvitationPath) {
		t.Fatalf("invitation e-mail %+v: want key invite:<id> and a link to this site", msg)
	}
	return e.mail.inviteLink(t, email)
}

// me is GET /api/me as the browser's session sees it.
type me struct {
	User struct {
		Email     string `json:"email"`
		Role      string `json:"role"`
		AccountID string `json:"account_id"`
	} `json:"user"`
	Account     accounts.Account      `json:"account"`
	MemberRole  string                `json:"member_role"`
	Memberships []accounts.Membership `json:"memberships"`
}

func whoAmI(t *testing.T, e *env, b *http.Client) me {
	t.Helper()
	res, err := b.Get(e.srv.URL + "/api/me")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	wantStatus(t, res, http.StatusOK)
	var out me
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnInvitationMakesANewLoginAMember(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner, csrf := loginBrowser(t, e, "developer@example.com")
	link := invite(t, e, owner, csrf, "new-teammate@example.com", "developer")

	// The members page lists it as pending.
	doc := getPage(t, owner, e.srv.URL+"/account/members")
	if got := doc.Find(`[data-testid="invitation"]`).Text(); !strings.Contains(got, "new-teammate@example.com") {
		t.Fatalf("pending invitations: %q", got)
	}

	b := browserClient(t)
	page := getPage(t, b, e.srv.URL+link)
	if got := page.Find(`[data-testid="invitation-summary"]`).Text(); !strings.Contains(got, "developer@example.com invites new-teammate@example.com") {
		t.Fatalf("invitation page says %q", got)
	}
	token, _ := page.Find(`input[name="_csrf"]`).First().Attr("value")
	res := postForm(t, b, e.srv.URL+link, url.Values{"password": {"short"}, "_csrf": {token}})
	wantStatus(t, res, http.StatusUnprocessableEntity)
	res = postForm(t, b, e.srv.URL+link, url.Values{"password": {"a-good-password-1"}, "_csrf": {token}})
	wantStatus(t, res, http.StatusSeeOther)

	got := whoAmI(t, e, b)
	dev, err := e.accounts.UserByEmail(context.Background(), "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got.User.Email != "new-teammate@example.com" || got.Account.ID != dev.AccountID || got.MemberRole != "developer" ||
		got.User.Role != "developer" || len(got.Memberships) != 1 {
		t.Fatalf("after joining: %+v", got)
	}
	// A developer member makes keys, and pays for nothing.
	wantStatus(t, getStatus(t, b, e.srv.URL+"/keys"), http.StatusOK)
	wantStatus(t, getStatus(t, b, e.srv.URL+"/credits"), http.StatusForbidden)

	// The link works once: opened again it says so, and posting it changes nothing.
	again := browserClient(t)
	doc = getPageStatus(t, again, e.srv.URL+link, http.StatusConflict)
	if got := doc.Find(`[data-testid="invitation-refused"]`).Text(); !strings.Contains(got, "already been used") {
		t.Fatalf("a used link says %q", got)
	}
	token = csrfFromPage(t, again, e.srv.URL+"/login")
	res = postForm(t, again, e.srv.URL+link, url.Values{"password": {"another-password-1"}, "_csrf": {token}})
	wantStatus(t, res, http.StatusConflict)
}

func TestAnInvitationAddsAnAccountToAnExistingLoginWhichSwitchesBetweenThem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, csrf := loginBrowser(t, e, "developer@example.com")
	link := invite(t, e, owner, csrf, "lisboa@example.com", "billing")

	// Lisboa, a provider, is signed in to its own account when it opens the link.
	b, _ := loginBrowser(t, e, "lisboa@example.com")
	page := getPage(t, b, e.srv.URL+link)
	if page.Find(`input[name="password"]`).Length() != 0 {
		t.Fatal("the invited login, signed in, is asked for its password")
	}
	token, _ := page.Find(`input[name="_csrf"]`).First().Attr("value")
	wantStatus(t, postForm(t, b, e.srv.URL+link, url.Values{"_csrf": {token}}), http.StatusSeeOther)

	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	lisboa, err := e.accounts.UserByEmail(ctx, "lisboa@example.com")
	if err != nil {
		t.Fatal(err)
	}
	got := whoAmI(t, e, b)
	if got.Account.ID != dev.AccountID || got.MemberRole != "billing" || got.Account.Kind != accounts.KindCustomer ||
		len(got.Memberships) != 2 {
		t.Fatalf("after joining: %+v", got)
	}
	// In the customer's account, as billing: credits and invoices, no keys, no rigs.
	wantStatus(t, getStatus(t, b, e.srv.URL+"/credits"), http.StatusOK)
	wantStatus(t, getStatus(t, b, e.srv.URL+"/keys"), http.StatusForbidden)
	wantStatus(t, getStatus(t, b, e.srv.URL+"/provider/rigs"), http.StatusForbidden)

	// The header's menu lists both accounts; switching goes to the provider's home, and its rigs.
	doc := getPage(t, b, e.srv.URL+"/invoices")
	if n := doc.Find(`[data-testid="account-choice"]`).Length(); n != 2 {
		t.Fatalf("the account menu lists %d accounts, want 2", n)
	}
	token, _ = doc.Find(`input[name="_csrf"]`).First().Attr("value")
	res := postForm(t, b, e.srv.URL+"/account/switch", url.Values{"account_id": {lisboa.AccountID}})
	wantStatus(t, res, http.StatusForbidden) // no CSRF token
	res = postForm(t, b, e.srv.URL+"/account/switch", url.Values{"account_id": {lisboa.AccountID}, "_csrf": {token}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/home?flash=switched" {
		t.Fatalf("switched to %q", loc)
	}
	if got := whoAmI(t, e, b); got.Account.ID != lisboa.AccountID || got.MemberRole != "owner" || got.User.Role != "provider" {
		t.Fatalf("after switching: %+v", got)
	}
	wantStatus(t, getStatus(t, b, e.srv.URL+"/provider/rigs"), http.StatusOK)
	wantStatus(t, getStatus(t, b, e.srv.URL+"/credits"), http.StatusForbidden)
	// An account the login does not belong to cannot be switched to.
	res = postForm(t, b, e.srv.URL+"/account/switch", url.Values{"account_id": {noSuchDocument}, "_csrf": {token}})
	wantStatus(t, res, http.StatusForbidden)
}

func TestOneLoginSeesEachAccountsDataOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, csrf := loginBrowser(t, e, "developer@example.com")
	link := invite(t, e, owner, csrf, "lisboa@example.com", "developer")
	b := browserClient(t)
	token := csrfFromPage(t, b, e.srv.URL+link)
	wantStatus(t, postForm(t, b, e.srv.URL+link, url.Values{"password": {demo.Password}, "_csrf": {token}}), http.StatusSeeOther)

	dev, _ := e.accounts.UserByEmail(ctx, "developer@example.com")
	lisboa, _ := e.accounts.UserByEmail(ctx, "lisboa@example.com")
	devKey, _, err := e.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "the developer's app"})
	if err != nil {
		t.Fatal(err)
	}
	ownRigs, err := e.catalog.ListOwn(ctx, lisboa.AccountID)
	if err != nil || len(ownRigs) == 0 {
		t.Fatalf("Lisboa's rigs: %d, %v", len(ownRigs), err)
	}

	// A bearer token works in the account its login asked for.
	login := func(accountID string) string {
		var out struct {
			Token string `json:"token"`
		}
		res := e.call(t, "", http.MethodPost, "/api/auth/login",
			map[string]string{"email": "lisboa@example.com", "password": demo.Password, "account_id": accountID}, &out)
		wantStatus(t, res, http.StatusOK)
		return out.Token
	}
	asCustomer, asProvider := login(dev.AccountID), login(lisboa.AccountID)

	var keys struct {
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}
	wantStatus(t, e.call(t, asCustomer, http.MethodGet, "/api/keys", nil, &keys), http.StatusOK)
	if len(keys.Keys) != 1 || keys.Keys[0].ID != devKey.ID {
		t.Fatalf("keys in the customer's account: %+v, want only %s", keys, devKey.ID)
	}
	wantStatus(t, e.call(t, asCustomer, http.MethodGet, "/api/provider/offerings", nil, nil), http.StatusForbidden)

	var listed struct {
		Offerings []struct {
			ID string `json:"id"`
		} `json:"offerings"`
	}
	wantStatus(t, e.call(t, asProvider, http.MethodGet, "/api/provider/offerings", nil, &listed), http.StatusOK)
	if len(listed.Offerings) != len(ownRigs) {
		t.Fatalf("rigs in the provider's account: %d, want its own %d", len(listed.Offerings), len(ownRigs))
	}
	for _, r := range listed.Offerings {
		if r.ID == "" || !containsRig(ownRigs, r.ID) {
			t.Fatalf("rig %q is not Lisboa's", r.ID)
		}
	}
	wantStatus(t, e.call(t, asProvider, http.MethodGet, "/api/keys", nil, nil), http.StatusForbidden)

	// Not a member: refused, and no session opened.
	res := e.call(t, "", http.MethodPost, "/api/auth/login",
		map[string]string{"email": "lisboa@example.com", "password": demo.Password, "account_id": noSuchDocument}, nil)
	wantStatus(t, res, http.StatusForbidden)

	// Switching a bearer token's account through the API.
	var sw struct {
		Account accounts.Account `json:"account"`
	}
	wantStatus(t, e.call(t, asProvider, http.MethodPost, "/api/account/switch", map[string]string{"account_id": dev.AccountID}, &sw), http.StatusOK)
	if sw.Account.ID != dev.AccountID {
		t.Fatalf("switched to %+v", sw.Account)
	}
	wantStatus(t, e.call(t, asProvider, http.MethodGet, "/api/keys", nil, nil), http.StatusOK)
}

func TestExpiredAndRevokedInvitationsAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	// An invitation made eight days ago, by a clock of that day, has expired.
	past, err := accounts.NewService(e.pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)), Hasher: fastHasher,
		Outbox: e.mail, Now: func() time.Time { return time.Now().Add(-8 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	then, err := past.Login(ctx, accounts.LoginInput{Email: "developer@example.com", Password: demo.Password})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := past.Invite(ctx, then, accounts.InviteInput{Email: "late@example.com", Role: accounts.MemberReadOnly,
		LinkBase: e.srv.URL}); err != nil {
		t.Fatal(err)
	}
	link := e.mail.inviteLink(t, "late@example.com")
	b := browserClient(t)
	doc := getPageStatus(t, b, e.srv.URL+link, http.StatusConflict)
	if got := doc.Find(`[data-testid="invitation-refused"]`).Text(); !strings.Contains(got, "expired") {
		t.Fatalf("an expired link says %q", got)
	}
	token := csrfFromPage(t, b, e.srv.URL+"/login")
	wantStatus(t, postForm(t, b, e.srv.URL+link, url.Values{"password": {"a-good-password-1"}, "_csrf": {token}}), http.StatusConflict)
	if _, err := e.accounts.UserByEmail(ctx, "late@example.com"); err == nil {
		t.Fatal("an expired invitation made a login")
	}

	// A revoked one.
	owner, csrf := loginBrowser(t, e, "developer@example.com")
	link = invite(t, e, owner, csrf, "withdrawn@example.com", "billing")
	page := getPage(t, owner, e.srv.URL+"/account/members")
	id, _ := page.Find(`[data-testid="invitation"]`).First().Attr("data-invitation")
	wantStatus(t, postForm(t, owner, e.srv.URL+"/account/members/invitations/"+id+"/revoke", url.Values{"_csrf": {csrf}}), http.StatusSeeOther)
	doc = getPageStatus(t, browserClient(t), e.srv.URL+link, http.StatusConflict)
	if got := doc.Find(`[data-testid="invitation-refused"]`).Text(); !strings.Contains(got, "withdrawn") {
		t.Fatalf("a revoked link says %q", got)
	}
	// A token that names nothing.
	getPageStatus(t, browserClient(t), e.srv.URL+accounts.InvitationPath+"not-a-token", http.StatusNotFound)
}

func TestARemovedMemberIsRefusedAtOnceAndTheirKeysStop(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, csrf := loginBrowser(t, e, "developer@example.com")
	join := func(email string) (*http.Client, string) {
		link := invite(t, e, owner, csrf, email, "developer")
		b := browserClient(t)
		token := csrfFromPage(t, b, e.srv.URL+link)
		wantStatus(t, postForm(t, b, e.srv.URL+link, url.Values{"password": {demo.Password}, "_csrf": {token}}), http.StatusSeeOther)
		return b, e.token(t, email, demo.Password)
	}
	leaver, leaverToken := join("leaver@example.com")
	join("stayer@example.com")

	// Each makes a key, which the gateway takes: past its check of the key, this test's gateway,
	// which has no router, answers 503; a refused key is 401.
	newKey := func(token string) string {
		var out struct {
			Key string `json:"key"`
		}
		wantStatus(t, e.call(t, token, http.MethodPost, "/api/keys", map[string]any{"name": "mine"}, &out), http.StatusCreated)
		res, _ := get(t, e.srv.URL+"/v1/models", map[string]string{"Authorization": "Bearer " + out.Key})
		wantStatus(t, res, http.StatusServiceUnavailable)
		return out.Key
	}
	leaverKey := newKey(leaverToken)
	newKey(leaverToken)
	stayerToken := e.token(t, "stayer@example.com", demo.Password)
	stayerKey := newKey(stayerToken)
	wantStatus(t, getStatus(t, leaver, e.srv.URL+"/keys"), http.StatusOK)

	// The leaver is removed, their keys revoked.
	leaverUser, _ := e.accounts.UserByEmail(ctx, "leaver@example.com")
	doc := getPage(t, owner, e.srv.URL+"/account/members/"+leaverUser.ID+"/remove")
	if got := text(doc.Find(`[data-testid="remove-keys"]`)); !strings.Contains(got, "They created 2 live API keys here") {
		t.Fatalf("the remove page says %q, want the member's 2 live API keys", got)
	}
	// The removal page is its confirmation: a POST without its fields removes no one.
	res := postForm(t, owner, e.srv.URL+"/account/members/"+leaverUser.ID+"/remove", url.Values{"_csrf": {csrf}})
	wantStatus(t, res, http.StatusOK)
	wantStatus(t, getStatus(t, leaver, e.srv.URL+"/keys"), http.StatusOK)
	res = postForm(t, owner, e.srv.URL+"/account/members/"+leaverUser.ID+"/remove", hiddenFields(doc, testID("remove-form")))
	wantStatus(t, res, http.StatusSeeOther)

	// Their next request, by page or by API, is refused; so is their key at the gateway.
	res = getStatus(t, leaver, e.srv.URL+"/keys")
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); !strings.HasPrefix(loc, "/login") {
		t.Fatalf("a removed member's page goes to %q", loc)
	}
	wantStatus(t, e.call(t, leaverToken, http.MethodGet, "/api/keys", nil, nil), http.StatusUnauthorized)
	res, _ = get(t, e.srv.URL+"/v1/models", map[string]string{"Authorization": "Bearer " + leaverKey})
	wantStatus(t, res, http.StatusUnauthorized)
	// Logging in again finds no account.
	res = e.call(t, "", http.MethodPost, "/api/auth/login", map[string]string{"email": "leaver@example.com", "password": demo.Password}, nil)
	wantStatus(t, res, http.StatusForbidden)

	// The stayer is removed with their keys passed to the owner: the key keeps working.
	stayerUser, _ := e.accounts.UserByEmail(ctx, "stayer@example.com")
	dev, _ := e.accounts.UserByEmail(ctx, "developer@example.com")
	before, err := e.accounts.LiveKeysCreatedBy(ctx, dev.AccountID, dev.ID)
	if err != nil {
		t.Fatal(err)
	}
	stayerPage := getPage(t, owner, e.srv.URL+"/account/members/"+stayerUser.ID+"/remove")
	if got := text(stayerPage.Find(`[data-testid="remove-keys"]`)); !strings.Contains(got, "They created 1 live API key here") {
		t.Errorf("the remove page says %q, want the member's 1 live API key", got)
	}
	form := hiddenFields(stayerPage, testID("remove-form"))
	form.Set("keys_transfer", dev.ID)
	res = postForm(t, owner, e.srv.URL+"/account/members/"+stayerUser.ID+"/remove", form)
	wantStatus(t, res, http.StatusSeeOther)
	wantStatus(t, e.call(t, stayerToken, http.MethodGet, "/api/keys", nil, nil), http.StatusUnauthorized)
	res, _ = get(t, e.srv.URL+"/v1/models", map[string]string{"Authorization": "Bearer " + stayerKey})
	wantStatus(t, res, http.StatusServiceUnavailable)
	if after, _ := e.accounts.LiveKeysCreatedBy(ctx, dev.AccountID, dev.ID); after != before+1 {
		t.Fatalf("the owner holds %d live keys after the transfer, want %d", after, before+1)
	}

	// The owner is the last owner: it cannot step down nor leave.
	res = postForm(t, owner, e.srv.URL+"/account/members/"+dev.ID+"/role", url.Values{"_csrf": {csrf}, "role": {"admin"}})
	wantStatus(t, res, http.StatusConflict)
	members, err := e.accounts.Members(ctx, dev.AccountID)
	if err != nil || len(members) != 1 || members[0].Role != accounts.MemberOwner {
		t.Fatalf("members after: %+v, %v", members, err)
	}
}

func containsRig(rigs []catalog.Offering, id string) bool {
	for _, r := range rigs {
		if r.ID == id {
			return true
		}
	}
	return false
}

// getStatus opens a page and returns its answer, whatever its status.
func getStatus(t *testing.T, b *http.Client, pageURL string) *http.Response {
	t.Helper()
	res, err := b.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// getPageStatus opens a page that must answer the status and parses it.
func getPageStatus(t *testing.T, b *http.Client, pageURL string, status int) *goquery.Document {
	t.Helper()
	res, err := b.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	wantStatus(t, res, status)
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
