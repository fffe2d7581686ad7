package web_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
)

// The cookies a browser holds: the session, and the CSRF token that its forms echo.
const (
	sessionCookieName = "gpumarket_session"
	csrfCookieName    = "gpumarket_csrf"
)

// apiErrorJSON is the shape of every API error.
type apiErrorJSON struct {
	Error struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
}

// offeringJSON is an offering as the API shows it, with the fields these tests read.
type offeringJSON struct {
	ID           string         `json:"id"`
	Tier         string         `json:"tier"`
	GPU          string         `json:"gpu"`
	GPUCount     int            `json:"gpu_count"`
	Model        string         `json:"model"`
	Region       string         `json:"region"`
	Status       string         `json:"status"`
	AskInput     money.MicroUSD `json:"ask_input_usd_per_mtok"`
	AskOutput    money.MicroUSD `json:"ask_output_usd_per_mtok"`
	BlendedAsk   money.MicroUSD `json:"blended_ask_usd_per_mtok"`
	NotRouted    string         `json:"not_routed_because"`
	RigState     string         `json:"rig_state"`
	RigReason    string         `json:"rig_state_reason"`
	NativeAPIs   []string       `json:"native_apis"`
	APIsServed   string         `json:"apis_served"`
	TTFTP99Ms    *float64       `json:"ttft_p99_ms"`
	TokensPerSec *float64       `json:"tokens_per_second"`
	FiguresBasis string         `json:"figures_basis"`
	Footprint    *footprintJSON `json:"footprint_estimate"`
}

type footprintJSON struct {
	KWh   float64 `json:"kwh_per_million_tokens"`
	GCO2e float64 `json:"g_co2e_per_million_tokens"`
}

type offeringListJSON struct {
	Offerings []offeringJSON `json:"offerings"`
	Count     int            `json:"count"`
}

// rigJSON is a valid listing with its values as JSON numbers; its claimed P99 earns realtime.
func rigJSON() map[string]any {
	return map[string]any{"gpu": "rtx-4090", "gpu_count": 4, "region": "eu", "model": "Qwen/Qwen2.5-7B-Instruct",
		"ask_input_usd_per_mtok": 0.12, "ask_output_usd_per_mtok": 0.24,
		"claimed_ttft_p50_ms": 20, "claimed_ttft_p99_ms": 45, "claimed_tokens_per_second": 2500}
}

// rigForm is a valid listing as the listing page posts it.
func rigForm() url.Values {
	return url.Values{"gpu": {"rtx-4090"}, "gpu_count": {"4"}, "region": {"eu"}, "model": {"Qwen/Qwen2.5-7B-Instruct"},
		"ask_input_usd_per_mtok": {"0.12"}, "ask_output_usd_per_mtok": {"0.24"}, "claimed_ttft_p99_ms": {"45"}}
}

// csrfFromPage opens a page and returns the CSRF token its forms carry.
func csrfFromPage(t *testing.T, client *http.Client, pageURL string) string {
	t.Helper()
	doc := getPage(t, client, pageURL)
	token, _ := doc.Find(`input[name="_csrf"]`).First().Attr("value")
	if token == "" {
		t.Fatalf("%s: no _csrf field", pageURL)
	}
	return token
}

// getPage opens a page that must answer 200 and parses it.
func getPage(t *testing.T, client *http.Client, pageURL string) *goquery.Document {
	t.Helper()
	res, err := client.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200", pageURL, res.StatusCode)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// postForm posts a page form and returns the response, its body read and closed.
func postForm(t *testing.T, client *http.Client, pageURL string, form url.Values) *http.Response {
	t.Helper()
	res, err := client.PostForm(pageURL, form)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func wantStatus(t *testing.T, res *http.Response, want int) {
	t.Helper()
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d", res.Request.Method, res.Request.URL.Path, res.StatusCode, want)
	}
}

// wantFields checks that an error names exactly the fields given.
func wantFields(t *testing.T, e apiErrorJSON, fields ...string) {
	t.Helper()
	var got []string
	for f := range e.Error.Fields {
		got = append(got, f)
	}
	slices.Sort(got)
	slices.Sort(fields)
	if !slices.Equal(got, fields) {
		t.Errorf("field errors %v, want exactly %v", e.Error.Fields, fields)
	}
}

func TestAPISignup(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const password = "correct horse battery"

	for _, role := range []accounts.Role{accounts.RoleDeveloper, accounts.RoleProvider} {
		t.Run(string(role)+" signs up, logs in and is known to /api/me", func(t *testing.T) {
			email := "new-" + string(role) + "@example.com"
			var u accounts.User
			res := e.call(t, "", http.MethodPost, "/api/auth/signup",
				map[string]string{"email": " New-" + string(role) + "@Example.COM ", "password": password, "role": string(role)}, &u)
			wantStatus(t, res, http.StatusCreated)
			if u.ID == "" || u.AccountID == "" || u.Email != email || u.Role != role {
				t.Fatalf("signed up %+v, want %s as %s with ids", u, email, role)
			}

			token := e.token(t, email, password)
			var me struct {
				User      accounts.User `json:"user"`
				AccountID string        `json:"account_id"`
			}
			wantStatus(t, e.call(t, token, http.MethodGet, "/api/me", nil, &me), http.StatusOK)
			if me.User.ID != u.ID || me.User.Email != email || me.User.Role != role || me.AccountID != u.AccountID {
				t.Errorf("/api/me = %+v, want user %s of account %s", me, u.ID, u.AccountID)
			}
		})
	}

	for _, role := range []string{"admin", "finance"} {
		t.Run(role+" is granted, not chosen", func(t *testing.T) {
			email := "wants-" + role + "@example.com"
			var out apiErrorJSON
			res := e.call(t, "", http.MethodPost, "/api/auth/signup",
				map[string]string{"email": email, "password": password, "role": role}, &out)
			wantStatus(t, res, http.StatusUnprocessableEntity)
			wantFields(t, out, "role")
			if n := countRows(t, e, `SELECT count(*) FROM users WHERE email = $1`, email); n != 0 {
				t.Errorf("%d users %s written", n, email)
			}
		})
	}

	t.Run("taken email", func(t *testing.T) {
		before := countRows(t, e, `SELECT count(*) FROM users`)
		var out apiErrorJSON
		res := e.call(t, "", http.MethodPost, "/api/auth/signup",
			map[string]string{"email": "Developer@Example.com", "password": password, "role": "developer"}, &out)
		wantStatus(t, res, http.StatusConflict)
		if out.Error.Code != "conflict" || out.Error.Fields["email"] == "" {
			t.Errorf("error %+v, want conflict on email", out.Error)
		}
		if after := countRows(t, e, `SELECT count(*) FROM users`); after != before {
			t.Errorf("users %d -> %d", before, after)
		}
	})

	t.Run("bad email and short password", func(t *testing.T) {
		var out apiErrorJSON
		res := e.call(t, "", http.MethodPost, "/api/auth/signup",
			map[string]string{"email": "not-an-email", "password": "short", "role": "developer"}, &out)
		wantStatus(t, res, http.StatusUnprocessableEntity)
		wantFields(t, out, "email", "password")
	})
}

func countRows(t *testing.T, e *env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAPILogoutRevokesToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	token := e.token(t, "developer@example.com", demo.Password)
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/me", nil, nil), http.StatusOK)

	wantStatus(t, e.call(t, token, http.MethodPost, "/api/auth/logout", nil, nil), http.StatusNoContent)

	var out apiErrorJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/me", nil, &out), http.StatusUnauthorized)
	if out.Error.Code != "unauthorized" {
		t.Errorf("error code %q, want unauthorized", out.Error.Code)
	}
	wantStatus(t, e.call(t, token, http.MethodPost, "/api/auth/logout", nil, nil), http.StatusUnauthorized)
	if n := countRows(t, e, `SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE u.email = 'developer@example.com' AND s.revoked_at IS NOT NULL`); n != 1 {
		t.Errorf("%d revoked sessions, want 1", n)
	}
}

func TestAPILoginRateLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	login := func(password string) (*http.Response, apiErrorJSON) {
		var out apiErrorJSON
		res := e.call(t, "", http.MethodPost, "/api/auth/login",
			map[string]string{"email": "developer@example.com", "password": password}, &out)
		return res, out
	}
	for i := 1; i <= 5; i++ {
		res, out := login("wrong password")
		if res.StatusCode != http.StatusUnauthorized || out.Error.Code != "unauthorized" {
			t.Fatalf("attempt %d: status %d %+v, want 401", i, res.StatusCode, out.Error)
		}
	}
	res, out := login("wrong password")
	if res.StatusCode != http.StatusTooManyRequests || out.Error.Code != "rate_limited" {
		t.Fatalf("attempt 6: status %d %+v, want 429 rate_limited", res.StatusCode, out.Error)
	}
	if got := res.Header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q, want 60", got)
	}
	// The right password does not get past the limit either.
	if res, _ := login(demo.Password); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("right password after the limit: status %d, want 429", res.StatusCode)
	}
}

func TestAPIOfferings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	list := func(t *testing.T, query string) offeringListJSON {
		t.Helper()
		var out offeringListJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings"+query, nil, &out), http.StatusOK)
		if out.Count != len(out.Offerings) {
			t.Fatalf("count %d, but %d offerings", out.Count, len(out.Offerings))
		}
		return out
	}
	all := list(t, "").Offerings

	t.Run("demo data fills every tier", func(t *testing.T) {
		tiers := map[string]int{}
		for _, o := range all {
			tiers[o.Tier]++
			if _, ok := catalog.GPUBySKU(o.GPU); !ok || o.ID == "" || o.GPUCount < 1 || o.GPUCount > 8 || o.Model == "" {
				t.Errorf("offering %+v lacks id, gpu, gpu_count or model", o)
			}
			if _, ok := catalog.RegionByCode(o.Region); !ok {
				t.Errorf("offering %s: region %q", o.ID, o.Region)
			}
			if o.Status != "active" {
				t.Errorf("offering %s is %s", o.ID, o.Status)
			}
		}
		for _, tier := range catalog.Tiers {
			if tiers[string(tier)] == 0 {
				t.Errorf("no %s offering in %v", tier, tiers)
			}
		}
		if len(tiers) != len(catalog.Tiers) {
			t.Errorf("tiers %v", tiers)
		}
	})

	filters := []struct {
		query string
		keep  func(offeringJSON) bool
	}{
		{"?tier=realtime", func(o offeringJSON) bool { return o.Tier == "realtime" }},
		{"?tier=batch", func(o offeringJSON) bool { return o.Tier == "batch" }},
		{"?model=deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", func(o offeringJSON) bool { return o.Model == "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B" }},
		{"?region=eu", func(o offeringJSON) bool { return o.Region == "eu" }},
		{"?max_price=0.05", func(o offeringJSON) bool { return o.BlendedAsk <= 50_000 }},
		{"?max_p99_ms=100", func(o offeringJSON) bool { return o.TTFTP99Ms != nil && *o.TTFTP99Ms <= 100 }},
		{"?tier=standard&region=eu", func(o offeringJSON) bool { return o.Tier == "standard" && o.Region == "eu" }},
	}
	for _, f := range filters {
		t.Run("filter "+f.query, func(t *testing.T) {
			got := list(t, f.query).Offerings
			want := 0
			for _, o := range all {
				if f.keep(o) {
					want++
				}
			}
			if len(got) == 0 || len(got) >= len(all) || len(got) != want {
				t.Errorf("%d offerings, want %d of %d", len(got), want, len(all))
			}
			for _, o := range got {
				if !f.keep(o) {
					t.Errorf("offering %+v does not match", o)
				}
			}
		})
	}

	sorts := []struct {
		sort string
		key  func(offeringJSON) float64 // ascending
	}{
		{"price", func(o offeringJSON) float64 { return float64(o.AskInput + o.AskOutput) }},
		{"latency", func(o offeringJSON) float64 { return *o.TTFTP99Ms }},
		{"throughput", func(o offeringJSON) float64 { return -*o.TokensPerSec }},
		{"carbon", func(o offeringJSON) float64 { return o.Footprint.GCO2e }},
	}
	for _, s := range sorts {
		t.Run("sort="+s.sort, func(t *testing.T) {
			got := list(t, "?sort="+s.sort).Offerings
			if len(got) != len(all) {
				t.Fatalf("%d offerings, want %d", len(got), len(all))
			}
			for _, o := range got {
				if o.TTFTP99Ms == nil || o.TokensPerSec == nil || o.Footprint == nil {
					t.Fatalf("demo offering %s lacks figures: %+v", o.ID, o)
				}
			}
			for i := 1; i < len(got); i++ {
				if s.key(got[i-1]) > s.key(got[i]) {
					t.Errorf("%s: offering %d (%s, %v) before %d (%s, %v)", s.sort, i-1, got[i-1].ID, s.key(got[i-1]), i, got[i].ID, s.key(got[i]))
				}
			}
			if s.key(got[0]) == s.key(got[len(got)-1]) {
				t.Errorf("%s: every offering has the same figure", s.sort)
			}
		})
	}

	t.Run("bad filters", func(t *testing.T) {
		var out apiErrorJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings?tier=gold&max_price=abc", nil, &out), http.StatusUnprocessableEntity)
		wantFields(t, out, "tier", "max_price")
		out = apiErrorJSON{}
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings?region=xx&max_p99_ms=-5&sort=fastest", nil, &out), http.StatusUnprocessableEntity)
		wantFields(t, out, "region", "max_p99_ms", "sort")
	})
}

func TestAPIProviderOfferings(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := e.token(t, "provider@example.com", demo.Password)
	other := e.token(t, "northwind@example.com", demo.Password)
	offerings := func(t *testing.T) int { return countRows(t, e, `SELECT count(*) FROM offerings`) }
	publicIDs := func(t *testing.T) []string {
		var out offeringListJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings", nil, &out), http.StatusOK)
		var ids []string
		for _, o := range out.Offerings {
			ids = append(ids, o.ID)
		}
		return ids
	}

	// Values as JSON numbers.
	var rig offeringJSON
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", rigJSON(), &rig), http.StatusCreated)
	if rig.ID == "" || rig.Tier != "realtime" || rig.Status != "active" || rig.GPUCount != 4 || rig.AskInput.Decimal() != "0.12" || rig.AskOutput.Decimal() != "0.24" ||
		rig.FiguresBasis != "claimed" {
		t.Fatalf("created %+v, want an active realtime rig (claimed P99 45 ms)", rig)
	}
	// Pending until the platform's probes qualify it: not in the public catalog, and its provider told why.
	if rig.RigState != "pending" || rig.RigReason != "Pending: waiting for your agent to connect" {
		t.Fatalf("a new rig is %q, %q; want pending, waiting for its agent", rig.RigState, rig.RigReason)
	}
	if slices.Contains(publicIDs(t), rig.ID) {
		t.Errorf("new rig %s is in the catalog before its probes", rig.ID)
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+rig.ID, nil, nil), http.StatusNotFound)
	e.qualify(t, rig.ID)
	if !slices.Contains(publicIDs(t), rig.ID) {
		t.Errorf("qualified rig %s is not in the catalog", rig.ID)
	}

	t.Run("values as strings", func(t *testing.T) {
		body := map[string]any{"gpu": "rtx-4090", "gpu_count": "2", "region": "no", "model": "Qwen/Qwen2.5-7B-Instruct",
			"ask_input_usd_per_mtok": "0.149", "ask_output_usd_per_mtok": "0.298", "claimed_ttft_p99_ms": "300",
			"claimed_tokens_per_second": "1500.5"}
		var o offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", body, &o), http.StatusCreated)
		if o.Tier != "standard" || o.GPUCount != 2 || o.AskInput.Decimal() != "0.149" || o.AskOutput.Decimal() != "0.298" ||
			o.BlendedAsk.Decimal() != "0.2235" || o.TokensPerSec == nil || *o.TokensPerSec != 1500.5 {
			t.Errorf("created %+v, want a standard rig (claimed P99 300 ms) asking 0.149 and 0.298", o)
		}
	})

	t.Run("no claimed P99 lists in batch", func(t *testing.T) {
		body := rigJSON()
		delete(body, "claimed_ttft_p50_ms")
		delete(body, "claimed_ttft_p99_ms")
		body["ask_input_usd_per_mtok"], body["ask_output_usd_per_mtok"] = "0.08", "0.16" // batch's prices
		var o offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", body, &o), http.StatusCreated)
		if o.Tier != "batch" {
			t.Errorf("tier %q, want batch", o.Tier)
		}
	})

	t.Run("invalid listing names every bad field and writes nothing", func(t *testing.T) {
		before := offerings(t)
		body := rigJSON()
		body["gpu"], body["gpu_count"], body["region"], body["ask_input_usd_per_mtok"] = "gtx-280", 9, "xx", "abc"
		var out apiErrorJSON
		wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", body, &out), http.StatusUnprocessableEntity)
		wantFields(t, out, "gpu", "gpu_count", "region", "ask_input_usd_per_mtok")
		if after := offerings(t); after != before {
			t.Errorf("offerings %d -> %d", before, after)
		}
	})

	t.Run("another provider's rig does not exist for them", func(t *testing.T) {
		path := "/api/provider/offerings/" + rig.ID
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, path, nil},
			{http.MethodPut, path, rigJSON()},
			{http.MethodDelete, path, nil},
			{http.MethodPost, path + "/pause", nil},
			{http.MethodPost, path + "/resume", nil},
		} {
			var out apiErrorJSON
			res := e.call(t, other, r.method, r.path, r.body, &out)
			if res.StatusCode != http.StatusNotFound || out.Error.Code != "not_found" {
				t.Errorf("%s %s as Northwind: status %d %+v, want 404", r.method, r.path, res.StatusCode, out.Error)
			}
		}
		var o offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodGet, path, nil, &o), http.StatusOK)
		if o.Status != "active" || o.GPUCount != 4 || o.AskInput.Decimal() != "0.12" {
			t.Errorf("after Northwind's calls the rig is %+v", o)
		}
	})

	t.Run("owner edits", func(t *testing.T) {
		body := rigJSON()
		body["claimed_ttft_p99_ms"], body["ask_input_usd_per_mtok"] = 120, "0.1"
		var o offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodPut, "/api/provider/offerings/"+rig.ID, body, &o), http.StatusOK)
		if o.ID != rig.ID || o.Tier != "standard" || o.AskInput.Decimal() != "0.10" || o.AskOutput.Decimal() != "0.24" {
			t.Errorf("edited %+v, want standard asking 0.10 and 0.24", o)
		}
	})

	t.Run("owner pauses and resumes", func(t *testing.T) {
		var o offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings/"+rig.ID+"/pause", nil, &o), http.StatusOK)
		if o.Status != "paused" {
			t.Fatalf("status %q, want paused", o.Status)
		}
		if slices.Contains(publicIDs(t), rig.ID) {
			t.Errorf("paused rig %s is still in the catalog", rig.ID)
		}
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+rig.ID, nil, nil), http.StatusNotFound)

		o = offeringJSON{}
		wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings/"+rig.ID+"/resume", nil, &o), http.StatusOK)
		if o.Status != "active" {
			t.Fatalf("status %q, want active", o.Status)
		}
		if !slices.Contains(publicIDs(t), rig.ID) {
			t.Errorf("resumed rig %s is not in the catalog", rig.ID)
		}
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+rig.ID, nil, nil), http.StatusOK)
	})

	t.Run("owner delists", func(t *testing.T) {
		path := "/api/provider/offerings/" + rig.ID
		res := e.call(t, owner, http.MethodDelete, path, nil, nil)
		wantStatus(t, res, http.StatusNoContent)
		wantStatus(t, e.call(t, owner, http.MethodGet, path, nil, nil), http.StatusNotFound)
		wantStatus(t, e.call(t, owner, http.MethodPost, path+"/resume", nil, nil), http.StatusNotFound)
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+rig.ID, nil, nil), http.StatusNotFound)
		var own offeringListJSON
		wantStatus(t, e.call(t, owner, http.MethodGet, "/api/provider/offerings", nil, &own), http.StatusOK)
		for _, o := range own.Offerings {
			if o.ID == rig.ID {
				t.Errorf("delisted rig %s is still in the provider's list", rig.ID)
			}
		}
		if slices.Contains(publicIDs(t), rig.ID) {
			t.Errorf("delisted rig %s is still in the catalog", rig.ID)
		}
		// The row stays, for history.
		if n := countRows(t, e, `SELECT count(*) FROM offerings WHERE id = $1 AND status = 'delisted'`, rig.ID); n != 1 {
			t.Errorf("%d delisted rows for %s, want 1", n, rig.ID)
		}
	})

	t.Run("malformed id", func(t *testing.T) {
		for _, r := range []struct{ token, method, path string }{
			{owner, http.MethodGet, "/api/provider/offerings/not-a-uuid"},
			{owner, http.MethodPut, "/api/provider/offerings/not-a-uuid"},
			{owner, http.MethodDelete, "/api/provider/offerings/not-a-uuid"},
			{owner, http.MethodPost, "/api/provider/offerings/not-a-uuid/pause"},
			{"", http.MethodGet, "/api/offerings/not-a-uuid"},
		} {
			var body any
			if r.method == http.MethodPut {
				body = rigJSON()
			}
			var out apiErrorJSON
			res := e.call(t, r.token, r.method, r.path, body, &out)
			if res.StatusCode != http.StatusNotFound || out.Error.Code != "not_found" {
				t.Errorf("%s %s: status %d %+v, want 404", r.method, r.path, res.StatusCode, out.Error)
			}
		}
	})
}

func TestAPICalculator(t *testing.T) {
	t.Parallel()
	e := setup(t)
	type answer struct {
		USDPerMTok float64        `json:"usd_per_million_tokens"`
		USDPerHour float64        `json:"usd_per_hour"`
		Footprint  *footprintJSON `json:"footprint_estimate"`
		Cheapest   *offeringJSON  `json:"cheapest_offering"`
	}
	const base = "/api/calculator?usd_per_gpu_hour=0.25&gpu_count=4&tokens_per_second=1994.82"
	wantUSD := 0.25 * 4 * 1e6 / (3600 * 1994.82) // the benchmark's formula

	t.Run("price per million tokens", func(t *testing.T) {
		var a answer
		wantStatus(t, e.call(t, "", http.MethodGet, base, nil, &a), http.StatusOK)
		if math.Abs(a.USDPerMTok-wantUSD) > 1e-9 || math.Abs(a.USDPerMTok-0.13925) > 5e-6 {
			t.Errorf("usd_per_million_tokens %v, want %v", a.USDPerMTok, wantUSD)
		}
		if a.USDPerHour != 1 {
			t.Errorf("usd_per_hour %v, want 1", a.USDPerHour)
		}
		if a.Footprint != nil || a.Cheapest != nil {
			t.Errorf("unasked footprint or offering: %+v", a)
		}
	})

	t.Run("footprint for a GPU and region", func(t *testing.T) {
		var a answer
		wantStatus(t, e.call(t, "", http.MethodGet, base+"&gpu=rtx-4090&region=eu", nil, &a), http.StatusOK)
		wantKWh := 450.0 * 4 / 1994.82 * 1e6 / 3.6e6 // RTX 4090 board power 450 W
		if a.Footprint == nil || math.Abs(a.Footprint.KWh-wantKWh) > 1e-9 || math.Abs(a.Footprint.GCO2e-wantKWh*242) > 1e-9 {
			t.Errorf("footprint %+v, want %v kWh and %v g (EU grid 242 g/kWh)", a.Footprint, wantKWh, wantKWh*242)
		}
	})

	t.Run("cheapest offering within a P99", func(t *testing.T) {
		var all offeringListJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings", nil, &all), http.StatusOK)
		cheapest := money.MicroUSD(math.MaxInt64)
		for _, o := range all.Offerings {
			if o.TTFTP99Ms != nil && *o.TTFTP99Ms <= 55 && o.AskInput+o.AskOutput < cheapest {
				cheapest = o.AskInput + o.AskOutput
			}
		}
		var a answer
		wantStatus(t, e.call(t, "", http.MethodGet, base+"&p99_ms=55", nil, &a), http.StatusOK)
		if a.Cheapest == nil || a.Cheapest.TTFTP99Ms == nil || *a.Cheapest.TTFTP99Ms > 55 || a.Cheapest.AskInput+a.Cheapest.AskOutput != cheapest {
			t.Errorf("cheapest %+v, want one with P99 <= 55 ms asking %s in and out together", a.Cheapest, cheapest)
		}
	})

	t.Run("missing parameter", func(t *testing.T) {
		var out apiErrorJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/calculator?usd_per_gpu_hour=0.25&gpu_count=4", nil, &out), http.StatusUnprocessableEntity)
		wantFields(t, out, "tokens_per_second")
		out = apiErrorJSON{}
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/calculator?usd_per_gpu_hour=x&gpu_count=9&tokens_per_second=100&gpu=gtx&region=xx", nil, &out), http.StatusUnprocessableEntity)
		wantFields(t, out, "usd_per_gpu_hour", "gpu_count", "gpu", "region")
	})
}

func TestCSRFLoginAndLogout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := browserClient(t)
	token := csrfFromPage(t, b, e.srv.URL+"/login")
	creds := url.Values{"email": {"provider@example.com"}, "password": {demo.Password}}

	wantStatus(t, postForm(t, b, e.srv.URL+"/login", creds), http.StatusForbidden)
	wrong := url.Values{"_csrf": {"not-the-token"}}
	for k, v := range creds {
		wrong[k] = v
	}
	wantStatus(t, postForm(t, b, e.srv.URL+"/login", wrong), http.StatusForbidden)
	if n := countRows(t, e, `SELECT count(*) FROM sessions`); n != 0 {
		t.Fatalf("%d sessions opened by refused forms", n)
	}

	creds.Set("_csrf", token)
	res := postForm(t, b, e.srv.URL+"/login", creds)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/home" {
		t.Errorf("redirect to %q, want /home", loc)
	}
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == sessionCookieName {
			session = c
		}
	}
	if session == nil || session.Value == "" {
		t.Fatalf("no session cookie in %v", res.Header["Set-Cookie"])
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Path != "/" {
		t.Errorf("session cookie %s: want HttpOnly, SameSite=Lax, Path=/", session.String())
	}

	doc := getPage(t, b, e.srv.URL+"/provider/rigs")
	if who := doc.Find(`[data-testid="whoami"]`).Text(); !strings.Contains(who, "provider@example.com") {
		t.Errorf("whoami %q", who)
	}
	logoutToken, _ := doc.Find(`form[action="/logout"] input[name="_csrf"]`).Attr("value")
	if logoutToken != token {
		t.Errorf("logout form token %q, want the page's %q", logoutToken, token)
	}
	wantStatus(t, postForm(t, b, e.srv.URL+"/logout", url.Values{}), http.StatusForbidden)
	res = postForm(t, b, e.srv.URL+"/logout", url.Values{"_csrf": {logoutToken}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/?flash=logged-out" {
		t.Errorf("redirect to %q", loc)
	}

	// The old cookie, replayed, is refused: the session is revoked on the server, not only
	// forgotten by the browser.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/provider/rigs", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: session.Value})
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/login?next=%2Fprovider%2Frigs" {
		t.Errorf("redirect to %q, want the login page", loc)
	}
	if n := countRows(t, e, `SELECT count(*) FROM sessions WHERE revoked_at IS NOT NULL`); n != 1 {
		t.Errorf("%d revoked sessions, want 1", n)
	}
}

func TestOpsEndpoints(t *testing.T) {
	t.Parallel()
	e := setup(t)

	var health map[string]string
	wantStatus(t, e.call(t, "", http.MethodGet, "/healthz", nil, &health), http.StatusOK)
	if health["status"] != "ok" {
		t.Errorf("/healthz %v", health)
	}

	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/readyz", nil, &ready), http.StatusOK)
	if ready.Status != "ready" || ready.Checks["postgres"] != "ok" {
		t.Errorf("/readyz %+v", ready)
	}

	var list offeringListJSON
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings", nil, &list), http.StatusOK)
	id := list.Offerings[0].ID
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+id, nil, nil), http.StatusOK)

	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testMetricsToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	wantStatus(t, res, http.StatusOK)
	raw, _ := io.ReadAll(res.Body)
	metrics := string(raw)
	for _, route := range []string{"/api/offerings", "/api/offerings/:id"} {
		line := regexp.MustCompile(`(?m)^gpumarket_http_requests_total\{[^}]*route="` + regexp.QuoteMeta(route) + `"[^}]*status="200"[^}]*\} [1-9]`)
		if !line.MatchString(metrics) {
			t.Errorf("/metrics has no gpumarket_http_requests_total for route=%q", route)
		}
	}
	if strings.Contains(metrics, id) {
		t.Errorf("/metrics names the offering id %s: routes must be patterns", id)
	}
}

// A login link may say where to go after logging in, but only to a page of this site: a
// browser drops tabs and newlines from a URL and reads \ as /, so "/\t/evil.example" would
// leave it.
func TestLoginNextStaysOnSite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := browserClient(t)
	for next, want := range map[string]string{
		"/provider/rigs?tab=paused": "/provider/rigs?tab=paused",
		"https://evil.example/":     "",
		"//evil.example/":           "",
		"/\\evil.example/":          "",
		"/\t/evil.example/":         "",
		"/\n/evil.example/":         "",
		"/\r/evil.example/":         "",
	} {
		doc := getPage(t, b, e.srv.URL+"/login?next="+url.QueryEscape(next))
		if got, _ := doc.Find(`input[name="next"]`).Attr("value"); got != want {
			t.Errorf("next=%q: the form carries %q, want %q", next, got, want)
		}
	}

	token := csrfFromPage(t, b, e.srv.URL+"/login")
	res := postForm(t, b, e.srv.URL+"/login", url.Values{"_csrf": {token}, "email": {"provider@example.com"},
		"password": {demo.Password}, "next": {"/\t/evil.example/"}})
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/home" {
		t.Errorf("after login with an off-site next: redirect to %q, want the provider's home", loc)
	}
}
