package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
)

// TestDemoHistoryShowsOnTheUsagePages seeds the demo and its history as `gpumarket dev` does,
// and reads the previous month through the JSON beside the usage pages: the developer's usage
// has a total for every day of it, which add up to what the meter stored, and the demo
// provider's earnings show its rigs' traffic.
func TestDemoHistoryShowsOnTheUsagePages(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 60 days of demo traffic")
	}
	pool, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(), NATSPort: 0,
		Payments:   PaymentsTest,
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_history"},
		Roles: Roles{Web: true, Meter: true}, TicketKey: []byte(strings.Repeat("t", 32)),
		RigKey: []byte(strings.Repeat("r", 32)), Development: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := p.SeedHistory(ctx)
	if err != nil || res.Days < 60 {
		t.Fatalf("history: %+v, %v", res, err)
	}
	go func() { _ = p.Run(ctx) }()

	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month()-1, 1, 0, 0, 0, 0, time.UTC)
	last := first.AddDate(0, 1, -1)
	period := fmt.Sprintf("from=%s&to=%s", first.Format(time.DateOnly), last.Format(time.DateOnly))

	var usage struct {
		Totals struct {
			Days []struct {
				Day      string `json:"day"`
				Requests int64  `json:"requests"`
			} `json:"days"`
			Total struct {
				Requests int64  `json:"requests"`
				CostUSD  string `json:"cost_usd"`
			} `json:"total"`
		} `json:"totals"`
		Requests []json.RawMessage `json:"requests"`
	}
	api := &apiClient{t: t, base: p.URL()}
	api.do(api.login("developer@example.com"), http.MethodGet, "/api/usage?"+period, nil, &usage, http.StatusOK)
	days := map[string]int64{}
	var sum int64
	for _, d := range usage.Totals.Days {
		days[d.Day] += d.Requests
		sum += d.Requests
	}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		if days[d.Format(time.DateOnly)] == 0 {
			t.Errorf("no usage total for %s", d.Format(time.DateOnly))
		}
	}
	var stored int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM usage_events u JOIN users us ON us.account_id = u.account_id
		WHERE us.email = 'developer@example.com' AND u.occurred_at >= $1 AND u.occurred_at < $2`,
		first, last.AddDate(0, 0, 1)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sum != stored || usage.Totals.Total.Requests != stored || len(usage.Requests) == 0 ||
		usage.Totals.Total.CostUSD == "" || usage.Totals.Total.CostUSD == "0.00" {
		t.Errorf("the month's totals: %d requests by day, %d in all at %s; the meter stored %d",
			sum, usage.Totals.Total.Requests, usage.Totals.Total.CostUSD, stored)
	}

	var earnings struct {
		Days  []json.RawMessage `json:"days"`
		Total struct {
			Requests  int64  `json:"requests"`
			EarnedUSD string `json:"earned_usd"`
		} `json:"total"`
	}
	api.do(api.login("provider@example.com"), http.MethodGet, "/api/provider/earnings?"+period, nil, &earnings, http.StatusOK)
	if len(earnings.Days) == 0 || earnings.Total.Requests == 0 || earnings.Total.EarnedUSD == "0.00" {
		t.Errorf("the demo provider's earnings of the month: %+v", earnings)
	}
}
