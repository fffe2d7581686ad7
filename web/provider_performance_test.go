package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/performance"
)

// A provider sees its own rigs' figures from the rollups, and no other provider's.
func TestProviderPerformance(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	fjord, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.catalog.ListOwn(ctx, fjord.AccountID)
	if err != nil || len(own) == 0 {
		t.Fatalf("Fjord's rigs: %v, %v", own, err)
	}
	rigID := own[0].ID
	// One hour of this rig an hour ago: 1,000,000 tokens, 2 kWh (half measured), $0.75 owed, busy 1,800,000 ms.
	var customer string
	if err := e.pool.QueryRow(ctx, `SELECT account_id FROM users WHERE email = 'developer@example.com'`).Scan(&customer); err != nil {
		t.Fatal(err)
	}
	view := func(token string) map[string]performance.Offering {
		var out struct {
			Offerings []performance.Offering `json:"offerings"`
		}
		wantStatus(t, e.call(t, token, http.MethodGet, "/api/provider/performance?days=1", nil, &out), http.StatusOK)
		m := map[string]performance.Offering{}
		for _, o := range out.Offerings {
			m[o.OfferingID] = o
		}
		return m
	}
	token := e.token(t, "provider@example.com", demo.Password)
	// The demo's history may have rolled up traffic of its own in the window: the hour inserted adds to it.
	was := view(token)[rigID]
	hour := time.Now().UTC().Add(-time.Hour).Truncate(time.Hour)
	if _, err := e.pool.Exec(ctx, `INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price,
		ask_output_price, provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
		uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, busy_ms)
		VALUES ($1, $2, $3, 'standard', 'perf-test', 999, 1, 1, $4, 40, 400000, 600000, 0, 0, 0, 900000000000, 750000000000,
			7200000, 3600000, 1800000)`, hour, customer, rigID, fjord.AccountID); err != nil {
		t.Fatal(err)
	}
	mine := view(token)
	got, ok := mine[rigID]
	if !ok || len(mine) != len(own) {
		t.Fatalf("the view holds %d rigs, want Fjord's %d", len(mine), len(own))
	}
	if got.Requests-was.Requests != 40 || got.InputTokens-was.InputTokens != 400_000 || got.OutputTokens-was.OutputTokens != 600_000 ||
		got.BusyMs-was.BusyMs != 1_800_000 || got.Earned != was.Earned.AddPico(750_000_000_000) {
		t.Errorf("rig %s: %+v after %+v, want the hour inserted added", rigID, got, was)
	}
	if d := got.EnergyKWh - was.EnergyKWh; d < 2-1e-9 || d > 2+1e-9 {
		t.Errorf("energy grew by %v kWh, want 2", d)
	}
	if was.Requests == 0 && (*got.KWhPerMTok != 2 || *got.MeasuredEnergyShare != 0.5 || *got.EarnedPerKWh != 375_000_000_000) {
		t.Errorf("energy %v kWh/Mtok, measured share %v, per kWh %v; want 2, 0.5, $0.375", *got.KWhPerMTok, *got.MeasuredEnergyShare, *got.EarnedPerKWh)
	}
	t.Logf("demo traffic in the window before: %d requests", was.Requests)
	north := view(e.token(t, "northwind@example.com", demo.Password))
	if _, leaked := north[rigID]; leaked {
		t.Error("another provider sees Fjord's rig")
	}

	var bad apiErrorJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/provider/performance?days=365", nil, &bad), http.StatusUnprocessableEntity)
	wantFields(t, bad, "days")

	client, _ := loginBrowser(t, e, "provider@example.com")
	doc := getPage(t, client, e.srv.URL+"/provider/performance?days=1")
	row := doc.Find(`[data-testid="performance-rig"][data-offering="` + rigID + `"]`)
	if row.Length() != 1 || strings.TrimSpace(row.Find(testID("perf-earned")).Text()) != got.Earned.String() {
		t.Errorf("the page's row for %s: earned %q, want %s", rigID, row.Find(testID("perf-earned")).Text(), got.Earned)
	}
	if doc.Find(testID("nav-performance")).Length() != 1 {
		t.Error("no Performance link in the provider's nav")
	}
}
