package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web"
)

// keyChangeLog records the keys the web layer says changed, as the gateways would hear them.
type keyChangeLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *keyChangeLog) KeyChanged(_ context.Context, keyID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, keyID)
	return nil
}

func (l *keyChangeLog) told() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids)
}

func recordKeyChanges(l *keyChangeLog) func(*web.Config, *pgxpool.Pool) {
	return func(cfg *web.Config, _ *pgxpool.Pool) { cfg.KeyChanges = l }
}

// PATCH /api/keys/{id} changes the caller's own key's monthly limit, or removes it with null;
// the gateways are told each time. Another developer's key is not found, and a bad limit is
// refused beside the field; neither changes anything or tells anyone.
func TestAPIKeyLimitChange(t *testing.T) {
	t.Parallel()
	changes := &keyChangeLog{}
	e := setupWith(t, recordKeyChanges(changes))
	ctx := context.Background()
	dev := e.token(t, "developer@example.com", demo.Password)
	var k keyJSON
	wantStatus(t, e.call(t, dev, http.MethodPost, "/api/keys", map[string]any{"name": "ci", "limit_usd": "5"}, &k),
		http.StatusCreated)

	limitOf := func() *money.Pico {
		t.Helper()
		stored, err := e.accounts.KeyBySecret(ctx, k.Key)
		if err != nil {
			t.Fatal(err)
		}
		return stored.Limit
	}
	var got keyJSON
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+k.ID, map[string]any{"limit_usd": "12.50"}, &got), http.StatusOK)
	if got.ID != k.ID || got.LimitUSD == nil || *got.LimitUSD != "12.50" || got.Key != "" {
		t.Fatalf("after raising to 12.50: %+v", got)
	}
	if l := limitOf(); l == nil || *l != 1250*money.PicoPerCent {
		t.Fatalf("the gateway's lookup sees %v, want $12.50", l)
	}
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+k.ID, map[string]any{"limit_usd": 7.25}, &got), http.StatusOK)
	if got.LimitUSD == nil || *got.LimitUSD != "7.25" {
		t.Fatalf("a limit sent as the number 7.25 reads back %v", got.LimitUSD)
	}
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+k.ID, map[string]any{"limit_usd": nil}, &got), http.StatusOK)
	if got.LimitUSD != nil || limitOf() != nil {
		t.Fatalf("after null: %v, stored %v; want no limit", got.LimitUSD, limitOf())
	}
	if told := changes.told(); !slices.Equal(told, []string{k.ID, k.ID, k.ID}) {
		t.Fatalf("the gateways were told of %v, want the key three times", told)
	}

	for name, body := range map[string]map[string]any{
		"no field":      {},
		"empty string":  {"limit_usd": ""},
		"zero":          {"limit_usd": "0"},
		"negative":      {"limit_usd": -5},
		"not a number":  {"limit_usd": "lots"},
		"a tenth cent":  {"limit_usd": "1.001"},
		"a wrong field": {"monthly_limit": "5"},
	} {
		var out apiErrorJSON
		res := e.call(t, dev, http.MethodPatch, "/api/keys/"+k.ID, body, &out)
		if res.StatusCode != http.StatusUnprocessableEntity || out.Error.Code != "invalid" {
			t.Errorf("%s: %d %+v, want 422 invalid", name, res.StatusCode, out.Error)
		}
	}
	other := e.otherDeveloper(t)
	var out apiErrorJSON
	wantStatus(t, e.call(t, other, http.MethodPatch, "/api/keys/"+k.ID, map[string]any{"limit_usd": "1.00"}, &out),
		http.StatusNotFound)
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/not-a-uuid", map[string]any{"limit_usd": "1.00"}, nil),
		http.StatusNotFound)
	if l := limitOf(); l != nil {
		t.Fatalf("refused changes left the limit at %v, want none", *l)
	}
	if n := len(changes.told()); n != 3 {
		t.Fatalf("refused changes told the gateways: %d notices, want still 3", n)
	}

	// Revoking tells them too; a revoked key's limit is not found.
	wantStatus(t, e.call(t, dev, http.MethodDelete, "/api/keys/"+k.ID, nil, nil), http.StatusNoContent)
	if told := changes.told(); len(told) != 4 || told[3] != k.ID {
		t.Fatalf("after the revocation the gateways were told of %v", told)
	}
	wantStatus(t, e.call(t, dev, http.MethodPatch, "/api/keys/"+k.ID, map[string]any{"limit_usd": "1.00"}, nil),
		http.StatusNotFound)
}

// The keys page changes a key's limit with the row's form; a bad value is shown beside that
// row, and another developer's key is not found.
func TestKeysPageLimitForm(t *testing.T) {
	t.Parallel()
	changes := &keyChangeLog{}
	e := setupWith(t, recordKeyChanges(changes))
	ctx := context.Background()
	b, csrf := loginBrowser(t, e, "developer@example.com")
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := e.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	row := `[data-testid="key"][data-key="` + k.ID + `"]`
	if n := getPage(t, b, e.srv.URL+"/keys").Find(row + ` [data-testid="key-limit-form"]`).Length(); n != 1 {
		t.Fatalf("the key's row has %d limit forms, want 1", n)
	}

	res := postForm(t, b, e.srv.URL+"/keys/"+k.ID+"/limit", url.Values{"_csrf": {csrf}, "limit_usd": {"12.50"}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/keys?flash=key-limit-set" {
		t.Fatalf("redirect to %q", loc)
	}
	doc := getPage(t, b, e.srv.URL+"/keys?flash=key-limit-set")
	if got := doc.Find(row + ` [data-testid="key-limit"]`).Text(); got != "$12.50 per month" {
		t.Fatalf("the row shows limit %q, want $12.50", got)
	}
	if v, _ := doc.Find(row + ` input[name="limit_usd"]`).Attr("value"); v != "12.50" {
		t.Errorf("the row's limit field holds %q, want 12.50", v)
	}
	if stored, _ := e.accounts.KeyBySecret(ctx, secret); stored.Limit == nil || *stored.Limit != 1250*money.PicoPerCent {
		t.Fatalf("stored limit %v, want $12.50", stored.Limit)
	}

	res, body := postPage(t, b, e.srv.URL+"/keys/"+k.ID+"/limit", url.Values{"_csrf": {csrf}, "limit_usd": {"lots"}})
	wantStatus(t, res, http.StatusUnprocessableEntity)
	doc, err = goquery.NewDocumentFromReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if msg := doc.Find(row + ` [data-testid="error-limit_usd"]`).Text(); !strings.Contains(msg, "dollars and cents") {
		t.Errorf("the row's error says %q", msg)
	}
	if v, _ := doc.Find(row + ` input[name="limit_usd"]`).Attr("value"); v != "lots" {
		t.Errorf("the row's field holds %q, want what was typed", v)
	}

	// Empty removes the limit.
	wantStatus(t, postForm(t, b, e.srv.URL+"/keys/"+k.ID+"/limit", url.Values{"_csrf": {csrf}, "limit_usd": {""}}),
		http.StatusSeeOther)
	if stored, _ := e.accounts.KeyBySecret(ctx, secret); stored.Limit != nil {
		t.Fatalf("after an empty limit: %v, want none", *stored.Limit)
	}

	e.otherDeveloper(t)
	other, otherCSRF := loginBrowser(t, e, "other-dev@example.com")
	wantStatus(t, postForm(t, other, e.srv.URL+"/keys/"+k.ID+"/limit", url.Values{"_csrf": {otherCSRF}, "limit_usd": {"1.00"}}),
		http.StatusNotFound)
	wantStatus(t, postForm(t, other, e.srv.URL+"/keys/"+k.ID+"/limit", url.Values{"_csrf": {otherCSRF}, "limit_usd": {"lots"}}),
		http.StatusNotFound)
	if stored, _ := e.accounts.KeyBySecret(ctx, secret); stored.Limit != nil {
		t.Fatalf("another developer set the limit to %v", *stored.Limit)
	}
	if told := changes.told(); !slices.Equal(told, []string{k.ID, k.ID}) {
		t.Fatalf("the gateways were told of %v, want the key twice", told)
	}
}

// A key revoked on this process is refused by this process's gateway at once, not when its
// cache entry expires. (The gateway here has no router: a valid key is answered 503, an
// invalid one 401.)
func TestRevokedKeyIsForgottenAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := e.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	models := func() int {
		res, _ := get(t, e.srv.URL+"/v1/models", map[string]string{"Authorization": "Bearer " + secret})
		return res.StatusCode
	}
	if st := models(); st != http.StatusServiceUnavailable {
		t.Fatalf("a live key: %d, want past the key check (503, no router)", st)
	}
	token := e.token(t, "developer@example.com", demo.Password)
	wantStatus(t, e.call(t, token, http.MethodDelete, "/api/keys/"+k.ID, nil, nil), http.StatusNoContent)
	if st := models(); st != http.StatusUnauthorized {
		t.Fatalf("the key just revoked: %d, want 401 at once (the cache keeps keys %v)", st, e.gateway.KeyCacheTTL())
	}
}

// modelsOnly is a gateway router that answers only Models: what the keys page asks of it.
type modelsOnly struct {
	web.Router
	models []routing.ModelTiers
}

func (m modelsOnly) Models() []routing.ModelTiers { return m.models }

// The example beside a new key names a model the gateway serves now, preferring one offered in
// standard (what a request without a tier gets); with none on offer it says so and names none.
func TestNewKeyExampleNamesAModelOnOffer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		models []routing.ModelTiers
		want   string // "" for no model
	}{
		{"standard preferred", []routing.ModelTiers{
			{Model: "a-batch-only", Tiers: []catalog.Tier{catalog.TierBatch}},
			{Model: "b-standard", Tiers: []catalog.Tier{catalog.TierRealtime, catalog.TierStandard}},
		}, "b-standard"},
		{"any when none in standard", []routing.ModelTiers{{Model: "only-batch", Tiers: []catalog.Tier{catalog.TierBatch}}}, "only-batch"},
		{"none on offer", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, func(cfg *web.Config, _ *pgxpool.Pool) { cfg.Router = modelsOnly{models: c.models} })
			b, csrf := loginBrowser(t, e, "developer@example.com")
			res, body := postPage(t, b, e.srv.URL+"/keys", url.Values{"_csrf": {csrf}, "name": {"first app"}})
			wantStatus(t, res, http.StatusCreated)
			doc, err := goquery.NewDocumentFromReader(strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			curl, sdk := doc.Find(testID("example-curl")).Text(), doc.Find(testID("example-sdk")).Text()
			notice := doc.Find(testID("example-no-model")).Length()
			catalogModels, err := e.catalog.Models(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if notice != 1 {
					t.Error("with no model on offer the page does not say so")
				}
				for _, m := range catalogModels {
					if strings.Contains(curl, `"`+m+`"`) || strings.Contains(sdk, `"`+m+`"`) {
						t.Errorf("with no model on offer the example names the catalog's %s", m)
					}
				}
				return
			}
			if notice != 0 {
				t.Error("the page says no model is on offer")
			}
			if !strings.Contains(curl, `{"model": "`+c.want+`"`) || !strings.Contains(sdk, `model="`+c.want+`"`) {
				t.Errorf("the examples do not name %s:\n%s\n%s", c.want, curl, sdk)
			}
		})
	}
}
