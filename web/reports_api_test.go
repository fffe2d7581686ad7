package web_test

import (
	"context"
	"math"
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/demo"
)

// savingsJSON is GET /api/reports/savings.
type savingsJSON struct {
	AccountID string `json:"account_id"`
	Group     string `json:"group"`
	Rows      []struct {
		Period        string `json:"period"`
		Tier          string `json:"tier"`
		Requests      int64  `json:"requests"`
		Spend         int64  `json:"spend_usd"`
		Baseline      int64  `json:"baseline_usd"`
		Savings       int64  `json:"savings_usd"`
		MethodVersion string `json:"method_version"`
	} `json:"rows"`
	Totals struct {
		Requests int64  `json:"requests"`
		Spend    int64  `json:"spend_usd"`
		Baseline int64  `json:"baseline_usd"`
		Savings  int64  `json:"savings_usd"`
		Pct      string `json:"savings_percent"`
		Invoice  string `json:"invoice_spend_usd"`
	} `json:"totals"`
	Reference struct {
		Source string `json:"source"`
		PerMT  string `json:"usd_per_million_tokens"`
	} `json:"reference"`
	MethodVersion string `json:"method_version"`
	Unit          string `json:"unit"`
}

// carbonJSON is GET /api/reports/carbon.
type carbonJSON struct {
	Rows []struct {
		Tier          string  `json:"tier"`
		Region        string  `json:"region"`
		Requests      int64   `json:"requests"`
		EnergyKWh     float64 `json:"energy_kwh"`
		EstimatedKWh  float64 `json:"energy_estimated_kwh"`
		GCO2e         float64 `json:"g_co2e"`
		BaselineGCO2e float64 `json:"baseline_g_co2e"`
		MethodVersion string  `json:"method_version"`
	} `json:"rows"`
	Totals struct {
		Requests  int64   `json:"requests"`
		EnergyKWh float64 `json:"energy_kwh"`
		GCO2e     float64 `json:"g_co2e"`
	} `json:"totals"`
	Embodied *struct {
		Assumptions []string `json:"assumptions"`
	} `json:"embodied"`
	MethodVersion string `json:"method_version"`
}

func TestReportsAPI(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	dev := w.token(t, "developer@example.com", demo.Password)
	var pin, pout int64
	if err := w.pool.QueryRow(context.Background(), `SELECT input_micro_usd_per_mtok, output_micro_usd_per_mtok FROM prices
		WHERE tier = 'realtime' AND effective_from <= now() ORDER BY effective_from DESC LIMIT 1`).Scan(&pin, &pout); err != nil {
		t.Fatal(err)
	}
	// acme's recent requests: 1000 in and 500 out on standard, 12 in and 3 out on standard, and a
	// realtime request that is its own baseline.
	spend := int64(bigCharge) + 3_400_007 + 200_000_000
	baseline := (1000*pin + 500*pout) + (12*pin + 3*pout) + 3_400_007

	t.Run("savings", func(t *testing.T) {
		var got savingsJSON
		wantStatus(t, w.call(t, dev, http.MethodGet, "/api/reports/savings", nil, &got), http.StatusOK)
		if got.AccountID != w.acme || got.Group != "day" || len(got.Rows) != 3 || got.MethodVersion != carbon.MethodVersion ||
			got.Unit == "" || got.Reference.Source != "benchmark paper's assumption, AIBC 2025" || got.Reference.PerMT != "0.185" {
			t.Fatalf("savings = %+v", got)
		}
		if got.Totals.Spend != spend || got.Totals.Baseline != baseline || got.Totals.Savings != baseline-spend || got.Totals.Requests != 3 {
			t.Errorf("totals = %+v, want spend %d baseline %d", got.Totals, spend, baseline)
		}
		for _, r := range got.Rows {
			if r.MethodVersion != carbon.MethodVersion || r.Savings != r.Baseline-r.Spend {
				t.Errorf("row %+v", r)
			}
		}
		var month savingsJSON
		wantStatus(t, w.call(t, dev, http.MethodGet, "/api/reports/savings?group=month&from="+date(w.day0)+"&to="+date(w.day1), nil, &month), http.StatusOK)
		if month.Group != "month" || month.Totals.Invoice == "" {
			t.Errorf("month report = %+v", month)
		}
	})

	t.Run("carbon", func(t *testing.T) {
		var got carbonJSON
		wantStatus(t, w.call(t, dev, http.MethodGet, "/api/reports/carbon?group=month&from="+date(w.day0)+"&to="+date(w.day1), nil, &got), http.StatusOK)
		// Each request's rig estimated 10 J, in the EU-27 (242 g/kWh).
		if got.Totals.Requests != 3 || math.Abs(got.Totals.EnergyKWh-30/3.6e6) > 1e-15 || got.MethodVersion != carbon.MethodVersion ||
			got.Embodied == nil || len(got.Embodied.Assumptions) == 0 || len(got.Rows) == 0 {
			t.Fatalf("carbon = %+v", got)
		}
		for _, r := range got.Rows {
			if r.Region != "eu" || r.MethodVersion != carbon.MethodVersion || r.EstimatedKWh != r.EnergyKWh || r.GCO2e <= 0 || r.BaselineGCO2e <= 0 {
				t.Errorf("row %+v", r)
			}
		}
	})

	t.Run("usage rows carry energy, carbon and the baseline", func(t *testing.T) {
		var got struct {
			Requests []struct {
				RequestID    string  `json:"request_id"`
				Tier         string  `json:"tier"`
				EnergyJ      float64 `json:"energy_j"`
				EnergySource string  `json:"energy_source"`
				Region       string  `json:"region"`
				GCO2e        float64 `json:"gco2e"`
				Baseline     int64   `json:"baseline_cost"`
			} `json:"requests"`
		}
		wantStatus(t, w.call(t, dev, http.MethodGet, "/api/usage", nil, &got), http.StatusOK)
		want := map[string]int64{w.recent[0]: 12*pin + 3*pout, w.recent[1]: 3_400_007, w.recent[2]: 1000*pin + 500*pout}
		if len(got.Requests) != 3 {
			t.Fatalf("requests = %+v", got.Requests)
		}
		for _, r := range got.Requests {
			// The demo lists enterprise cards in a data centre (PUE 1.3), consumer ones at home.
			pue := 1.0
			if r.Tier == "realtime" {
				pue = 1.3
			}
			if r.Baseline != want[r.RequestID] || r.EnergyJ != 10 || r.EnergySource != "estimated" || r.Region != "eu" ||
				math.Abs(r.GCO2e-10/3.6e6*242*pue) > 1e-12 {
				t.Errorf("request %+v, want baseline %d and %.9f g", r, want[r.RequestID], 10/3.6e6*242*pue)
			}
		}
	})

	t.Run("another developer sees only its own", func(t *testing.T) {
		other := w.token(t, "other-dev@example.com", demo.Password)
		var got savingsJSON
		wantStatus(t, w.call(t, other, http.MethodGet, "/api/reports/savings", nil, &got), http.StatusOK)
		if got.AccountID != w.otherDev || got.Totals.Spend != 1_500_000 || got.Totals.Requests != 1 {
			t.Errorf("other's savings = %+v", got)
		}
		wantStatus(t, w.call(t, "", http.MethodGet, "/api/reports/carbon", nil, nil), http.StatusUnauthorized)
	})

	t.Run("bad queries are a 400 naming the field", func(t *testing.T) {
		for _, path := range []string{"/api/reports/savings", "/api/reports/carbon"} {
			for query, fields := range map[string][]string{
				"?group=week":                    {"group"},
				"?from=2026-13-01":               {"from"},
				"?from=2026-11-10&to=2026-11-09": {"to"},
				"?from=x&to=y&group=hour":        {"from", "to", "group"},
			} {
				var out apiErrorJSON
				res := w.call(t, dev, http.MethodGet, path+query, nil, &out)
				if res.StatusCode != http.StatusBadRequest {
					t.Errorf("%s%s: status %d, want 400", path, query, res.StatusCode)
					continue
				}
				wantFields(t, out, fields...)
			}
		}
	})
}
