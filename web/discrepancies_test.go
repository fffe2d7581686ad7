package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
