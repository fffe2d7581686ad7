package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
)

// keyJSON is an API key as the API shows it.
type keyJSON struct {
	ID          string     `json:"id"`
	Key         string     `json:"key"`
	Name        string     `json:"name"`
	Prefix      string     `json:"prefix"`
	LimitUSD    *string    `json:"limit_usd"`
	DefaultTier *string    `json:"default_tier"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

type keyListJSON struct {
	Keys  []keyJSON `json:"keys"`
	Count int       `json:"count"`
}

// keys lists the caller's keys through the API and returns them with the raw answer.
func (e *env) keys(t *testing.T, token string) (keyListJSON, string) {
	t.Helper()
	var raw json.RawMessage
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/keys", nil, &raw), http.StatusOK)
	var list keyListJSON
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	return list, string(raw)
}

// otherDeveloper signs up a developer of another account and returns its bearer token.
func (e *env) otherDeveloper(t *testing.T) string {
	t.Helper()
	_, err := e.accounts.SignUp(context.Background(), accounts.SignUpInput{Email: "other-dev@example.com",
		Password: demo.Password, Role: accounts.RoleDeveloper, AccountName: "Other Labs"})
	if err != nil {
		t.Fatal(err)
	}
	return e.token(t, "other-dev@example.com", demo.Password)
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev := e.token(t, "developer@example.com", demo.Password)

	var raw json.RawMessage
	res := e.call(t, dev, http.MethodPost, "/api/keys",
		map[string]any{"name": " ci ", "limit_usd": "25", "default_tier": "batch"}, &raw)
	wantStatus(t, res, http.StatusCreated)
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q on the answer with the secret, want no-store", cc)
	}
	var ci keyJSON
	if err := json.Unmarshal(raw, &ci); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ci.Key, accounts.KeyPrefix) || !strings.HasPrefix(ci.Key, ci.Prefix) || len(ci.Prefix) >= len(ci.Key) {
		t.Fatalf("created key %q with prefix %q, want a gm_ secret that starts with its shorter prefix", ci.Key, ci.Prefix)
	}
	if ci.ID == "" || ci.Name != "ci" || *ci.LimitUSD != "25.00" || *ci.DefaultTier != "batch" ||
		ci.Status != "live" || ci.LastUsedAt != nil || ci.RevokedAt != nil {
		t.Fatalf("created %+v, want ci, live, $25.00 a month, batch by default, never used", ci)
	}
	// The key the API returned is the one the gateway will accept.
	if k, err := e.accounts.KeyBySecret(ctx, ci.Key); err != nil || k.ID != ci.ID {
		t.Fatalf("KeyBySecret = %+v, %v", k, err)
	}

	var plain, numeric keyJSON
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "notebook"}, &plain), http.StatusCreated)
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys",
		map[string]any{"name": "cron", "limit_usd": 10.5, "default_tier": nil}, &numeric), http.StatusCreated)
	if plain.LimitUSD != nil || plain.DefaultTier != nil {
		t.Errorf("a key without limit or tier shows limit %v and tier %v, want null for both", plain.LimitUSD, plain.DefaultTier)
	}
	if numeric.LimitUSD == nil || *numeric.LimitUSD != "10.50" {
		t.Errorf("a limit sent as the number 10.5 reads back %v, want 10.50", numeric.LimitUSD)
	}

	list, rawList := e.keys(t, dev)
	if list.Count != 3 || len(list.Keys) != 3 {
		t.Fatalf("listed %d keys (count %d), want 3", len(list.Keys), list.Count)
	}
	for _, k := range list.Keys {
		if k.Key != "" {
			t.Errorf("key %s lists its secret", k.Name)
		}
	}
	for _, secret := range []string{ci.Key, plain.Key, numeric.Key} {
		if strings.Contains(rawList, secret) {
			t.Fatalf("the list holds a secret: %s", rawList)
		}
	}

	t.Run("another developer neither sees nor revokes it", func(t *testing.T) {
		other := e.otherDeveloper(t)
		if list, _ := e.keys(t, other); len(list.Keys) != 0 {
			t.Errorf("another developer lists %d keys, want none", len(list.Keys))
		}
		var out apiErrorJSON
		wantStatus(t, e.call(t, other, http.MethodDelete, "/api/keys/"+ci.ID, nil, &out), http.StatusNotFound)
		if out.Error.Code != "not_found" {
			t.Errorf("error %+v, want not_found", out.Error)
		}
		if _, err := e.accounts.KeyBySecret(ctx, ci.Key); err != nil {
			t.Errorf("the key stopped working after another developer tried to revoke it: %v", err)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		wantStatus(t, e.call(t, dev, http.MethodDelete, "/api/keys/"+ci.ID, nil, nil), http.StatusNoContent)
		if _, err := e.accounts.KeyBySecret(ctx, ci.Key); services.ErrorCode(err) != services.CodeUnauthorized {
			t.Errorf("a revoked key still proves itself: %v", err)
		}
		list, _ := e.keys(t, dev)
		last := list.Keys[len(list.Keys)-1]
		if last.ID != ci.ID || last.Status != "revoked" || last.RevokedAt == nil {
			t.Errorf("last key %+v, want ci revoked, listed after the live ones", last)
		}
		// Revoked once is revoked: a second revocation finds no live key.
		wantStatus(t, e.call(t, dev, http.MethodDelete, "/api/keys/"+ci.ID, nil, nil), http.StatusNotFound)
		wantStatus(t, e.call(t, dev, http.MethodDelete, "/api/keys/not-a-uuid", nil, nil), http.StatusNotFound)
	})
}

func TestAPIKeyValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dev := e.token(t, "developer@example.com", demo.Password)
	before := countRows(t, e, `SELECT count(*) FROM api_keys`)

	for _, tc := range []struct {
		what   string
		body   map[string]any
		fields []string
	}{
		{"no name", map[string]any{}, []string{"name"}},
		{"a blank name", map[string]any{"name": "   "}, []string{"name"}},
		{"a name too long", map[string]any{"name": strings.Repeat("n", 101)}, []string{"name"}},
		{"an unreadable limit", map[string]any{"name": "ci", "limit_usd": "lots"}, []string{"limit_usd"}},
		{"a limit of zero", map[string]any{"name": "ci", "limit_usd": 0}, []string{"limit_usd"}},
		{"a negative limit", map[string]any{"name": "ci", "limit_usd": "-5"}, []string{"limit_usd"}},
		{"a limit in fractions of a cent", map[string]any{"name": "ci", "limit_usd": "1.005"}, []string{"limit_usd"}},
		{"a limit that is not an amount", map[string]any{"name": "ci", "limit_usd": true}, []string{"limit_usd"}},
		{"an unknown tier", map[string]any{"name": "ci", "default_tier": "gold"}, []string{"default_tier"}},
		{"a tier that is not text", map[string]any{"name": "ci", "default_tier": 3}, []string{"default_tier"}},
		{"an unknown field", map[string]any{"name": "ci", "scopes": []string{"all"}}, []string{"scopes"}},
		{"everything wrong at once", map[string]any{"name": "", "limit_usd": "x", "default_tier": "gold"},
			[]string{"name", "limit_usd", "default_tier"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var out apiErrorJSON
			var raw json.RawMessage
			res := e.call(t, dev, http.MethodPost, "/api/keys", tc.body, &raw)
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422: %s", res.StatusCode, raw)
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatal(err)
			}
			if out.Error.Code != "invalid" {
				t.Errorf("error code %q, want invalid", out.Error.Code)
			}
			wantFields(t, out, tc.fields...)
			if strings.Contains(string(raw), accounts.KeyPrefix) {
				t.Errorf("a refused request answered with something like a key: %s", raw)
			}
		})
	}
	if after := countRows(t, e, `SELECT count(*) FROM api_keys`); after != before {
		t.Errorf("api keys %d -> %d after refused requests", before, after)
	}
}

// postPage posts a page form and returns the answer with its body, read and closed.
func postPage(t *testing.T, client *http.Client, pageURL string, form url.Values) (*http.Response, string) {
	t.Helper()
	res, err := client.PostForm(pageURL, form)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(raw)
}

// pageText opens a page that must answer 200 and returns its HTML.
func pageText(t *testing.T, client *http.Client, pageURL string) string {
	t.Helper()
	html, err := getPage(t, client, pageURL).Html()
	if err != nil {
		t.Fatal(err)
	}
	return html
}

// A developer creates a key on the page, sees its secret once with the examples, finds it
// listed without the secret, and revokes it with the row's form.
func TestKeysPageFlow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	b, csrf := loginBrowser(t, e, "developer@example.com")
	keysURL := e.srv.URL + "/keys"

	doc := getPage(t, b, keysURL)
	if doc.Find(`[data-testid="nav-keys"]`).Length() != 1 || doc.Find(`[data-testid="no-keys"]`).Length() != 1 {
		t.Fatal("the keys page has no nav link or does not say there are no keys yet")
	}

	t.Run("errors are shown beside the fields and nothing is saved", func(t *testing.T) {
		res, body := postPage(t, b, keysURL, url.Values{"name": {" "}, "limit_usd": {"lots"},
			"default_tier": {"gold"}, "_csrf": {csrf}})
		wantStatus(t, res, http.StatusUnprocessableEntity)
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"name", "limit_usd", "default_tier"} {
			if doc.Find(`[data-testid="error-`+f+`"]`).Length() != 1 {
				t.Errorf("no error beside %s", f)
			}
		}
		if v, _ := doc.Find(`input[name="limit_usd"]`).Attr("value"); v != "lots" {
			t.Errorf("the limit field shows %q, want what was typed", v)
		}
		if doc.Find(`[data-testid="created-key"]`).Length() != 0 {
			t.Error("a refused form shows a created key")
		}
		if n := countRows(t, e, `SELECT count(*) FROM api_keys`); n != 0 {
			t.Errorf("%d keys saved by a refused form", n)
		}
	})

	t.Run("a form without its CSRF token creates nothing", func(t *testing.T) {
		res, _ := postPage(t, b, keysURL, url.Values{"name": {"forged"}})
		wantStatus(t, res, http.StatusForbidden)
		if n := countRows(t, e, `SELECT count(*) FROM api_keys`); n != 0 {
			t.Errorf("%d keys saved by a forged form", n)
		}
	})

	res, body := postPage(t, b, keysURL, url.Values{"name": {"staging chatbot"}, "limit_usd": {"25"},
		"default_tier": {"realtime"}, "_csrf": {csrf}})
	wantStatus(t, res, http.StatusCreated)
	if loc := res.Header.Get("Location"); loc != "" {
		t.Errorf("the answer with the secret sends the browser on to %q, want the page itself", loc)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q on the page with the secret, want no-store", cc)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	secret := doc.Find(`[data-testid="created-secret"]`).Text()
	key, err := e.accounts.KeyBySecret(ctx, secret)
	if err != nil {
		t.Fatalf("the page shows %q, which is no live key: %v", secret, err)
	}
	if !strings.Contains(doc.Find(`[data-testid="shown-once"]`).Text(), "will not be shown again") {
		t.Error("no notice that the key is shown once")
	}
	base := e.srv.URL + "/v1"
	if curl := doc.Find(`[data-testid="example-curl"]`).Text(); !strings.Contains(curl, "curl "+base+"/chat/completions \\\n") ||
		!strings.Contains(curl, "GPUMARKET_API_KEY="+secret+"\n") {
		t.Errorf("curl example %q, want a call to %s/chat/completions with the key", curl, base)
	}
	if sdk := doc.Find(`[data-testid="example-sdk"]`).Text(); !strings.Contains(sdk, `OpenAI(base_url="`+base+`"`) {
		t.Errorf("SDK example %q, want a client with base_url %s", sdk, base)
	}
	if v, _ := doc.Find(`input[name="name"]`).Attr("value"); v != "" {
		t.Errorf("the form still holds %q after the key was created", v)
	}
	row := doc.Find(`[data-testid="key"][data-key="` + key.ID + `"]`)
	if got := row.Find(`[data-testid="key-prefix"]`).Text(); got != key.Prefix+"…" || !strings.HasPrefix(secret, key.Prefix) {
		t.Errorf("the row shows the key as %q, want its prefix %q", got, key.Prefix)
	}
	for field, want := range map[string]string{"key-name": "staging chatbot", "key-tier": "realtime", "key-limit": "$25.00 per month",
		"key-last-used": "never", "key-status": "live"} {
		if got := row.Find(`[data-testid="` + field + `"]`).Text(); got != want {
			t.Errorf("%s %q, want %q", field, got, want)
		}
	}

	t.Run("the page never shows the secret again", func(t *testing.T) {
		html := pageText(t, b, keysURL)
		if strings.Contains(html, secret) || strings.Contains(html, `data-testid="created-key"`) {
			t.Fatal("reloading /keys shows the secret")
		}
		if !strings.Contains(html, key.Prefix+"…") {
			t.Error("reloading /keys does not list the key")
		}
	})

	t.Run("last used shows when the gateway saw the key", func(t *testing.T) {
		used := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
		if err := e.accounts.TouchKeys(ctx, map[string]time.Time{key.ID: used}); err != nil {
			t.Fatal(err)
		}
		got := getPage(t, b, keysURL).Find(`[data-key="` + key.ID + `"] [data-testid="key-last-used"]`).Text()
		if got != "2026-03-04 05:06 UTC" {
			t.Errorf("last used %q, want 2026-03-04 05:06 UTC", got)
		}
	})

	t.Run("another developer's page does not list it", func(t *testing.T) {
		e.otherDeveloper(t)
		other, _ := loginBrowser(t, e, "other-dev@example.com")
		if html := pageText(t, other, keysURL); strings.Contains(html, key.ID) || strings.Contains(html, key.Prefix) {
			t.Error("another developer's page lists the key")
		}
	})

	revokeURL := e.srv.URL + "/keys/" + key.ID + "/revoke"
	res, _ = postPage(t, b, revokeURL, url.Values{})
	wantStatus(t, res, http.StatusForbidden)
	if _, err := e.accounts.KeyBySecret(ctx, secret); err != nil {
		t.Fatalf("a revocation without its CSRF token revoked the key: %v", err)
	}

	if n := doc.Find(`[data-key="` + key.ID + `"] form[action="/keys/` + key.ID + `/revoke"] input[name="_csrf"]`).Length(); n != 1 {
		t.Fatalf("the row has %d revoke forms with a CSRF token, want 1", n)
	}
	// The first POST says what stops working and revokes nothing; the confirmation revokes it,
	// and posting it again finds no live key to revoke.
	ask := askedToConfirm(t, b, revokeURL, url.Values{"_csrf": {csrf}})
	if c := consequences(ask); !strings.Contains(c, "cannot be undone") || !strings.Contains(c, "refuses requests made with it (401)") ||
		!strings.Contains(c, "Batches created with it stop") {
		t.Errorf("revoking says %q, want what stops working", c)
	}
	if _, err := e.accounts.KeyBySecret(ctx, secret); err != nil {
		t.Fatalf("the first POST revoked the key: %v", err)
	}
	res = confirmation(t, b, e.srv.URL, ask)
	wantStatus(t, res, http.StatusSeeOther)
	if again := confirmation(t, b, e.srv.URL, ask); again.StatusCode != http.StatusNotFound {
		t.Errorf("the same confirmation again: status %d, want 404", again.StatusCode)
	}
	if loc := res.Header.Get("Location"); loc != "/keys?flash=key-revoked" {
		t.Fatalf("revoking sent the browser to %q", loc)
	}
	if _, err := e.accounts.KeyBySecret(ctx, secret); services.ErrorCode(err) != services.CodeUnauthorized {
		t.Errorf("the revoked key still proves itself: %v", err)
	}
	doc = getPage(t, b, e.srv.URL+"/keys?flash=key-revoked")
	if !strings.Contains(doc.Find(`[data-testid="flash"]`).Text(), "revoked") {
		t.Errorf("flash %q, want that the key is revoked", doc.Find(`[data-testid="flash"]`).Text())
	}
	row = doc.Find(`[data-key="` + key.ID + `"]`)
	if st := row.Find(`[data-testid="key-status"]`).Text(); st != "revoked" || row.Find(`[data-testid="key-revoke"]`).Length() != 0 {
		t.Errorf("after revoking, the row says %q with %d revoke buttons, want revoked and none", st,
			row.Find(`[data-testid="key-revoke"]`).Length())
	}
}
