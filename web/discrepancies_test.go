package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/web"
)

// The admin sees what the meter billed below a rig's report, with the excess, on the
// discrepancies page and in its JSON: here a request reported as 10,000,000 + 10,000,000
// tokens and billed 50 + 1, of which the gateway's record never came.
func TestAdminSeesTheMetersFlagsWithTheExcess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	ledger := ledger.NewLedger(e.pool, nil)
	cr := credits.NewCredits(e.pool, ledger, credits.NewStripeCheckout("sk_test_web", stripeMockURL(t)), nil)
	h := web.New(web.Config{Accounts: e.accounts, Catalog: e.catalog, Usage: metering.NewReports(e.pool),
		Payments: web.Payments{Credits: cr, Ledger: ledger, Webhook: credits.NewStripeWebhook(cr, []string{webhookSecret}),
			LocalWebhookSecret: webhookSecret},
		Requests: requestlog.NewRequestLog(e.pool, metering.GatewayReads{}, nil, nil)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.srv = srv

	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	var offering, provider string
	if err := e.pool.QueryRow(ctx, `SELECT id::text, provider_account_id::text FROM offerings ORDER BY id LIMIT 1`).Scan(&offering, &provider); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `
		INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
			input_tokens, output_tokens, reported_input_tokens, reported_output_tokens, ttft_ms, duration_ms, energy_j,
			energy_source, status, price_id, input_price, output_price, ask_input_price, ask_output_price, charge_pico,
			payable_pico, flag, flag_reason, occurred_at, metered_at, stream_seq)
		VALUES ('evt_flagged', 'req_flagged', $1, $2, $3, 'standard', 'm', 50, 1, 10000000, 10000000, 100, 900, 1,
			'estimated', 'ok', 1, 150000, 300000, 60000, 120000, 7800000, 3120000, 'no_gateway_record',
			'no gateway record of the attempt after 2m0s: billed within the ticket''s bounds only', now(), now(), 1)`,
		dev.AccountID, offering, provider); err != nil {
		t.Fatal(err)
	}

	token := e.token(t, "admin@example.com", demo.Password)
	var list struct {
		Discrepancies []requestlog.Discrepancy `json:"discrepancies"`
	}
	if res := e.call(t, token, http.MethodGet, "/api/admin/discrepancies", nil, &list); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	if len(list.Discrepancies) != 1 {
		t.Fatalf("discrepancies %+v, want the flagged request", list.Discrepancies)
	}
	d := list.Discrepancies[0]
	if d.RequestID != "req_flagged" || d.MeterFlag != "no_gateway_record" || d.HTTPStatus != nil || *d.ExcessInput != 9_999_950 ||
		*d.ExcessOutput != 9_999_999 || *d.MeteredOutput != 1 || *d.Charge != 7_800_000 || !strings.Contains(d.Reason, "no gateway record") {
		t.Errorf("discrepancy %+v", d)
	}

	b, _ := loginBrowser(t, e, "admin@example.com")
	doc := getPage(t, b, srv.URL+"/admin/discrepancies")
	row := doc.Find(`[data-testid="discrepancy"]`)
	if row.Length() != 1 || strings.TrimSpace(row.Find(`[data-testid="excess"]`).Text()) != "9999950 / 9999999" ||
		!strings.Contains(row.Text(), "no_gateway_record") || !strings.Contains(row.Text(), "10000000 / 10000000") {
		t.Errorf("the page's row %q", row.Text())
	}
	// The offering is named by its hardware, model and region; its id is in the JSON and in a
	// copyable detail, not in the row's text.
	var gpu, model, region string
	var count int
	if err := e.pool.QueryRow(ctx, `SELECT gpu, gpu_count, model, region FROM offerings WHERE id = $1`, offering).
		Scan(&gpu, &count, &model, &region); err != nil {
		t.Fatal(err)
	}
	cell := row.Find(testID("discrepancy-offering")).Clone()
	if id := cell.Find(testID("id")).Text(); id != offering || d.OfferingID != offering {
		t.Errorf("the offering's id %q on the page, %q in the JSON; want %s", id, d.OfferingID, offering)
	}
	cell.Find("details").Remove()
	if got, want := text(cell), catalog.Label(gpu, count, model, region); got != want || !strings.Contains(got, catalog.RegionName(region)) {
		t.Errorf("the offering is written %q, want %q", got, want)
	}
	if strings.Contains(visibleText(doc), offering) {
		t.Error("the page's visible text shows the offering's id")
	}
}

// flagRequest writes a usage row the meter flagged (billed without the gateway's record of the
// attempt) for a request of the demo developer's account on the first offering: a discrepancy.
func flagRequest(t *testing.T, pool *pgxpool.Pool, requestID string, seq int) {
	t.Helper()
	ctx := context.Background()
	var account, offering, provider string
	if err := pool.QueryRow(ctx, `SELECT account_id::text FROM users WHERE email = 'developer@example.com'`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT id::text, provider_account_id::text FROM offerings ORDER BY id LIMIT 1`).Scan(&offering, &provider); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
			input_tokens, output_tokens, reported_input_tokens, reported_output_tokens, ttft_ms, duration_ms, energy_j,
			energy_source, status, price_id, input_price, output_price, ask_input_price, ask_output_price, charge_pico,
			payable_pico, flag, flag_reason, occurred_at, metered_at, stream_seq)
		VALUES ('evt_' || $1, $1, $2, $3, $4, 'standard', 'm', 50, 1, 50, 1, 100, 900, 1,
			'estimated', 'ok', 1, 150000, 300000, 60000, 120000, 7800000, 3120000, 'no_gateway_record',
			'no gateway record of the attempt after 2m0s: billed within the ticket''s bounds only', now(), now(), $5)`,
		requestID, account, offering, provider, seq); err != nil {
		t.Fatal(err)
	}
}

// An admin marks a discrepancy resolved with a note from its row's form: it leaves the open
// list (the default) for the resolved one, which shows who resolved it, when and the note; the
// audit log records it; the admin home counts only the open ones. A note is required, a
// resolution is final, and only a flagged request has one. Finance reads both lists without
// the form.
func TestAdminResolvesADiscrepancyWithANote(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		cfg.Requests = requestlog.NewRequestLog(pool, metering.GatewayReads{}, nil, nil)
	})
	ctx := context.Background()
	flagRequest(t, e.pool, "req_skewed", 1)
	flagRequest(t, e.pool, "req_unknown", 2)

	b, _ := loginBrowser(t, e, "admin@example.com")
	if got := homeText(getPage(t, b, e.srv.URL+"/home"), "task-discrepancies-count"); got != "2" {
		t.Errorf("the admin home counts %s open discrepancies, want 2", got)
	}
	doc := getPage(t, b, e.srv.URL+"/admin/discrepancies")
	if n := doc.Find(testID("discrepancy")).Length(); n != 2 {
		t.Fatalf("%d open discrepancies listed, want 2", n)
	}
	if doc.Find(testID("state-open")).AttrOr("aria-current", "") != "page" || doc.Find(testID("state-resolved")).AttrOr("href", "") !=
		"/admin/discrepancies?state=resolved" {
		t.Errorf("the filter: %q", text(doc.Find(testID("discrepancy-states"))))
	}
	row := doc.Find(`[data-testid="discrepancy"][data-request="req_skewed"]`)
	form := row.Find(testID("resolve-form"))
	if form.Length() != 1 || form.AttrOr("action", "") != "/admin/discrepancies/resolve" {
		t.Fatalf("the open row has no form to resolve it: %q", text(row))
	}
	csrf := form.Find(`input[name="_csrf"]`).AttrOr("value", "")
	values := url.Values{"request_id": {"req_skewed"}, "note": {"  "}}
	wantStatus(t, postForm(t, b, e.srv.URL+"/admin/discrepancies/resolve", values), http.StatusForbidden) // no CSRF token
	values.Set("_csrf", csrf)
	res, body := postPage(t, b, e.srv.URL+"/admin/discrepancies/resolve", values)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-note"`) {
		t.Errorf("a resolution without a note: %d, want 422 naming the note", res.StatusCode)
	}
	values.Set("note", "The rig's clock was skewed; the bill is right.")
	res = postForm(t, b, e.srv.URL+"/admin/discrepancies/resolve", values)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/admin/discrepancies?flash=discrepancy-resolved" {
		t.Errorf("the resolution redirects to %q", loc)
	}

	doc = getPage(t, b, e.srv.URL+"/admin/discrepancies")
	if rows := doc.Find(testID("discrepancy")); rows.Length() != 1 || rows.AttrOr("data-request", "") != "req_unknown" {
		t.Errorf("the open list after the resolution: %q", text(rows))
	}
	doc = getPage(t, b, e.srv.URL+"/admin/discrepancies?state=resolved")
	rows := doc.Find(testID("discrepancy"))
	if rows.Length() != 1 || rows.AttrOr("data-request", "") != "req_skewed" || rows.Find(testID("resolve-form")).Length() != 0 {
		t.Fatalf("the resolved list: %q", text(rows))
	}
	if got := text(rows.Find(testID("resolved"))); !strings.HasPrefix(got, "Resolved by admin@example.com at ") {
		t.Errorf("the resolved row says %q", got)
	}
	if got := text(rows.Find(testID("resolution-note"))); got != "The rig's clock was skewed; the bill is right." {
		t.Errorf("the note reads %q", got)
	}
	if doc.Find(testID("state-resolved")).AttrOr("aria-current", "") != "page" {
		t.Error("the filter does not show Resolved as the list shown")
	}
	if got := homeText(getPage(t, b, e.srv.URL+"/home"), "task-discrepancies-count"); got != "1" {
		t.Errorf("the admin home counts %s open discrepancies after one is resolved, want 1", got)
	}

	admin, err := e.accounts.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := e.audit.List(ctx, audit.Filter{SubjectKind: "request", SubjectID: "req_skewed"})
	if err != nil || len(entries.Entries) != 1 {
		t.Fatalf("the audit log of the request: %+v, %v", entries.Entries, err)
	}
	if en := entries.Entries[0]; en.Action != audit.ActionResolveDiscrepancy || en.ActorID != admin.ID ||
		!strings.Contains(en.Summary, "The rig's clock was skewed") || !strings.Contains(string(en.After), `"resolved": true`) {
		t.Errorf("the audit entry: %+v (after %s)", en, en.After)
	}

	// The API: the lists by state, a second resolution refused, a request not flagged not found.
	token := e.token(t, "admin@example.com", demo.Password)
	for state, want := range map[string]int{"": 1, "open": 1, "resolved": 1, "all": 2} {
		var list struct {
			Discrepancies []requestlog.Discrepancy `json:"discrepancies"`
		}
		wantStatus(t, e.call(t, token, http.MethodGet, "/api/admin/discrepancies?state="+state, nil, &list), http.StatusOK)
		if len(list.Discrepancies) != want {
			t.Errorf("state %q: %d discrepancies, want %d", state, len(list.Discrepancies), want)
		}
		for _, d := range list.Discrepancies {
			if resolved := d.Resolution != nil; resolved != (d.RequestID == "req_skewed") ||
				(resolved && (d.Resolution.ResolvedBy != "admin@example.com" || d.Resolution.ResolvedByID != admin.ID)) {
				t.Errorf("state %q: %s's resolution %+v", state, d.RequestID, d.Resolution)
			}
		}
	}
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/admin/discrepancies?state=closed", nil, nil), http.StatusUnprocessableEntity)
	wantStatus(t, e.call(t, token, http.MethodPost, "/api/admin/discrepancies/resolve",
		map[string]string{"request_id": "req_skewed", "note": "again"}, nil), http.StatusConflict)
	wantStatus(t, e.call(t, token, http.MethodPost, "/api/admin/discrepancies/resolve",
		map[string]string{"request_id": "req_not_flagged", "note": "nothing"}, nil), http.StatusNotFound)
	var resolved requestlog.DiscrepancyResolution
	wantStatus(t, e.call(t, token, http.MethodPost, "/api/admin/discrepancies/resolve",
		map[string]string{"request_id": "req_unknown", "note": "A retried attempt, billed once."}, &resolved), http.StatusOK)
	if resolved.Note != "A retried attempt, billed once." || resolved.ResolvedBy != "admin@example.com" || resolved.ResolvedAt.IsZero() {
		t.Errorf("the API's resolution: %+v", resolved)
	}
	if got := homeText(getPage(t, b, e.srv.URL+"/home"), "task-discrepancies-count"); got != "0" {
		t.Errorf("the admin home counts %s open discrepancies after both are resolved, want 0", got)
	}

	// Finance reads both lists, with no form to resolve.
	f, _ := loginBrowser(t, e, "finance@example.com")
	doc = getPage(t, f, e.srv.URL+"/finance/discrepancies?state=resolved")
	if n := doc.Find(testID("discrepancy")).Length(); n != 2 || doc.Find(testID("resolve-form")).Length() != 0 ||
		doc.Find(testID("state-open")).AttrOr("href", "") != "/finance/discrepancies?state=open" {
		t.Errorf("finance's resolved list: %d rows, %d forms", n, doc.Find(testID("resolve-form")).Length())
	}
	if n := getPage(t, f, e.srv.URL+"/finance/discrepancies").Find(testID("discrepancy")).Length(); n != 0 {
		t.Errorf("finance's open list: %d rows, want none", n)
	}
}
