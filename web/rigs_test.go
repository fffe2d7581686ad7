package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/fixtures"
)

// rigAt is rigJSON in the standard tier (claimed P99 300 ms) asking these dollars per million input and output
// tokens.
func rigAt(in, out string) map[string]any {
	body := rigJSON()
	body["claimed_ttft_p50_ms"], body["claimed_ttft_p99_ms"] = 150, 300
	body["ask_input_usd_per_mtok"], body["ask_output_usd_per_mtok"] = in, out
	return body
}

// TestAListingIsHeldToItsTiersPriceAndNamesNoAddress: an ask above the standard tier's price for output tokens
// ($0.30) is refused with what to fix, and so is an agent URL: the platform reaches a rig over the connection its
// agent opens, and dials no address. Nothing is saved.
func TestAListingIsHeldToItsTiersPriceAndNamesNoAddress(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := e.token(t, "provider@example.com", demo.Password)
	before := countRows(t, e, `SELECT count(*) FROM offerings`)
	for _, c := range []struct {
		name  string
		edit  func(map[string]any)
		field string
		want  string
	}{
		{"output ask above the price", func(b map[string]any) { b["ask_output_usd_per_mtok"] = "0.40" }, "ask_output_usd_per_mtok",
			"Your ask for output tokens, $0.40 per million, is above the standard tier's price of $0.30: customers would pay less than you are paid. Ask at most $0.30."},
		{"an agent URL", func(b map[string]any) { b["agent_url"] = "http://169.254.169.254" }, "agent_url", "Unknown field."},
	} {
		body := rigAt("0.10", "0.20")
		c.edit(body)
		var out apiErrorJSON
		wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", body, &out), http.StatusUnprocessableEntity)
		if got := out.Error.Fields[c.field]; got != c.want || len(out.Error.Fields) != 1 {
			t.Errorf("%s: field errors %q, want %s: %q", c.name, out.Error.Fields, c.field, c.want)
		}
	}
	if after := countRows(t, e, `SELECT count(*) FROM offerings`); after != before {
		t.Fatalf("offerings %d -> %d", before, after)
	}
}

// TestAPriceCutTakesARigOffTheCatalogAndTellsItsProvider: a rig listed at $0.14 in and $0.28 out in standard is
// above the tier's price once it is cut to $0.12 and $0.25: the public catalog no longer lists it or shows it, and
// its provider's rigs, on the API and the page, say why and what to ask.
func TestAPriceCutTakesARigOffTheCatalogAndTellsItsProvider(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := e.token(t, "provider@example.com", demo.Password)
	var rig offeringJSON
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", rigAt("0.14", "0.28"), &rig), http.StatusCreated)
	listed := func() bool {
		var out offeringListJSON
		wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings", nil, &out), http.StatusOK)
		for _, o := range out.Offerings {
			if o.ID == rig.ID {
				return true
			}
		}
		return false
	}
	e.qualify(t, rig.ID)
	if !listed() || rig.NotRouted != "" {
		t.Fatalf("the new rig: listed %v, not routed because %q", listed(), rig.NotRouted)
	}
	now := time.Now()
	fixtures.Price(t, e.pool, "standard", now, 120000, 250000, fixtures.PriceCreatedAt(now))
	if listed() {
		t.Fatal("the rig above its tier's new price is still in the public catalog")
	}
	var gone apiErrorJSON
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+rig.ID, nil, &gone), http.StatusNotFound)

	want := "Not routed and not in the public catalog. " +
		"Your ask for input tokens, $0.14 per million, is above the standard tier's price of $0.12: customers would pay less than you are paid. Ask at most $0.12. " +
		"Your ask for output tokens, $0.28 per million, is above the standard tier's price of $0.25: customers would pay less than you are paid. Ask at most $0.25."
	var own offeringJSON
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/provider/offerings/"+rig.ID, nil, &own), http.StatusOK)
	if own.NotRouted != want {
		t.Fatalf("not_routed_because = %q\nwant %q", own.NotRouted, want)
	}
	b, _ := loginBrowser(t, e, "provider@example.com")
	doc := getPage(t, b, e.srv.URL+"/provider/rigs")
	row := doc.Find(`[data-testid="offering"][data-offering-id="` + rig.ID + `"]`)
	if got := strings.TrimSpace(row.Next().Find(`[data-testid="not-routed"]`).Text()); got != want {
		t.Fatalf("the rigs page says %q\nwant %q", got, want)
	}
	if n := doc.Find(`[data-testid="not-routed"]`).Length(); n != 1 {
		t.Errorf("%d rigs flagged as not routed, want only the one above the new price", n)
	}
}

// TestARigsOwnFiguresFarBetterThanTheGatewaysAreFlagged: the 4x RTX 4090 14B demo rig, measured at 448 ms P99 by
// the gateway, reports 20 ms of itself over 500 requests. Admins find it on the rig reports page and API; its
// provider sees the flag on its rigs; the public catalog shows both figures side by side.
func TestARigsOwnFiguresFarBetterThanTheGatewaysAreFlagged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var id string
	if err := e.pool.QueryRow(context.Background(), `UPDATE offerings SET measured_requests = 500, measured_ttft_p99_ms = 448.04,
			reported_requests = 500, reported_ttft_p50_ms = 10, reported_ttft_p99_ms = 20, reported_tokens_per_sec = 1900
		WHERE seed_key = 'benchmark:deepseek-ai/DeepSeek-R1-Distill-Qwen-14B:4xrtx-4090' RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	why := "The rig reports a P99 time to first token of 20.0 ms, under half the 448.0 ms the gateway measured."

	admin := e.token(t, "admin@example.com", demo.Password)
	var reports struct {
		Rigs []struct {
			ID  string `json:"id"`
			Why string `json:"report_divergence"`
		} `json:"rigs"`
		Count int `json:"count"`
	}
	wantStatus(t, e.call(t, admin, http.MethodGet, "/api/admin/rig-reports", nil, &reports), http.StatusOK)
	if reports.Count != 1 || len(reports.Rigs) != 1 || reports.Rigs[0].ID != id || reports.Rigs[0].Why != why {
		t.Fatalf("rig reports %+v, want the one rig with %q", reports, why)
	}
	ab, _ := loginBrowser(t, e, "admin@example.com")
	page := getPage(t, ab, e.srv.URL+"/admin/rig-reports")
	if rows := page.Find(`[data-testid="rig-report"]`); rows.Length() != 1 || !strings.Contains(rows.Text(), id) ||
		!strings.Contains(rows.Text(), why) || !strings.Contains(rows.Text(), "P99 20.0 ms, 1900 tokens/s over 500 requests") {
		t.Fatalf("rig reports page rows: %q", rows.Text())
	}

	pb, _ := loginBrowser(t, e, "provider@example.com")
	rigs := getPage(t, pb, e.srv.URL+"/provider/rigs")
	row := rigs.Find(`[data-testid="offering"][data-offering-id="` + id + `"]`)
	if got := strings.TrimSpace(row.Next().Find(`[data-testid="divergence"]`).Text()); !strings.HasPrefix(got, why) {
		t.Fatalf("the provider's rigs page says %q, want it to start %q", got, why)
	}
	if got := strings.TrimSpace(row.Find(`[data-testid="reported"]`).Text()); got != "P99 20.0 ms, 1900 tokens/s over 500 requests" {
		t.Errorf("the rig's own figures on its row: %q", got)
	}

	var public struct {
		MeasuredP99 *float64 `json:"measured_ttft_p99_ms"`
		ReportedP99 *float64 `json:"reported_ttft_p99_ms"`
		Reported    int64    `json:"reported_requests"`
		Why         string   `json:"report_divergence"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+id, nil, &public), http.StatusOK)
	if public.MeasuredP99 == nil || *public.MeasuredP99 != 448.04 || public.ReportedP99 == nil || *public.ReportedP99 != 20 ||
		public.Reported != 500 || public.Why != "" {
		t.Fatalf("public offering %+v", public)
	}
}

// TestTheProviderSeesEachRigsStateAndWhy: a new rig is pending, waiting for its agent; as the gateways write
// down its heartbeats and probes, its provider's rigs page and API say how many probes passed, and once three
// in a row have, since when it is active.
func TestTheProviderSeesEachRigsStateAndWhy(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner := e.token(t, "provider@example.com", demo.Password)
	var rig offeringJSON
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/provider/offerings", rigAt("0.10", "0.20"), &rig), http.StatusCreated)
	b := browserClient(t)
	token := csrfFromPage(t, b, e.srv.URL+"/login")
	wantStatus(t, postForm(t, b, e.srv.URL+"/login", url.Values{"_csrf": {token}, "email": {"provider@example.com"},
		"password": {demo.Password}}), http.StatusSeeOther)
	shows := func(state, reason string) {
		t.Helper()
		cell := getPage(t, b, e.srv.URL+"/provider/rigs").Find(`tr[data-offering-id="` + rig.ID + `"] [data-testid="rig-state"]`)
		if got, _ := cell.Attr("data-rig-state"); got != state || strings.TrimSpace(cell.Text()) != reason {
			t.Errorf("the rigs page shows %q, %q; want %q, %q", got, strings.TrimSpace(cell.Text()), state, reason)
		}
		var api offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodGet, "/api/provider/offerings/"+rig.ID, nil, &api), http.StatusOK)
		if api.RigState != state || api.RigReason != reason {
			t.Errorf("the API shows %q, %q; want %q, %q", api.RigState, api.RigReason, state, reason)
		}
	}
	shows("pending", "Pending: waiting for your agent to connect")

	now := time.Now().UTC()
	if err := e.catalog.RecordHeartbeats(ctx, map[string]catalog.Heard{rig.ID: {At: now}}); err != nil {
		t.Fatal(err)
	}
	shows("pending", "Pending: 0 of 3 probes passed")

	// What the agent said of its engine's APIs is written down with its heartbeat, and shown to its provider;
	// a name that is no API is not kept, and a later heartbeat replaces the list.
	apis := func(brief, want string, wantNative ...string) {
		t.Helper()
		cell := getPage(t, b, e.srv.URL+"/provider/rigs").Find(`tr[data-offering-id="` + rig.ID + `"] [data-testid="rig-apis"]`)
		if got, title := strings.TrimSpace(cell.Text()), cell.AttrOr("title", ""); got != brief || title != want {
			t.Errorf("the rigs page says %q (%q) of the APIs; want %q (%q)", got, title, brief, want)
		}
		var api offeringJSON
		wantStatus(t, e.call(t, owner, http.MethodGet, "/api/provider/offerings/"+rig.ID, nil, &api), http.StatusOK)
		if api.APIsServed != want || !slices.Equal(api.NativeAPIs, wantNative) {
			t.Errorf("the API says %q, %q; want %q, %q", api.APIsServed, api.NativeAPIs, want, wantNative)
		}
	}
	apis("Messages, Responses: translated",
		"Anthropic Messages and OpenAI Responses: translated to chat completions (its engine serves neither natively).")
	if err := e.catalog.RecordHeartbeats(ctx, map[string]catalog.Heard{rig.ID: {At: now.Add(time.Millisecond),
		Native: []string{"responses", "telnet", "messages"}}}); err != nil {
		t.Fatal(err)
	}
	apis("Messages, Responses: native", "Anthropic Messages and OpenAI Responses: passed to its engine, which serves both natively.",
		"messages", "responses")
	if err := e.catalog.RecordHeartbeats(ctx, map[string]catalog.Heard{rig.ID: {At: now.Add(2 * time.Millisecond),
		Native: []string{"responses"}}}); err != nil {
		t.Fatal(err)
	}
	apis("Responses: native; Messages: translated",
		"OpenAI Responses: passed to its engine natively; Anthropic Messages: translated to chat completions.", "responses")
	probe := func(passed bool, problem string) {
		t.Helper()
		if _, err := e.catalog.RecordProbe(ctx, rig.ID, catalog.ProbeResult{At: now, Passed: passed, Problem: problem,
			TTFTMs: 180, TokensPerSec: 95}); err != nil {
			t.Fatal(err)
		}
	}
	probe(false, `its answer named the model "other", not the listed "Qwen/Qwen2.5-7B-Instruct"`)
	shows("pending", `Pending: 0 of 3 probes passed; the last one failed: its answer named the model "other", not the listed "Qwen/Qwen2.5-7B-Instruct"`)
	probe(true, "")
	probe(true, "")
	shows("pending", "Pending: 2 of 3 probes passed")
	probe(true, "")
	shows("active", "Active since "+now.Format("15:04 UTC"))
}
