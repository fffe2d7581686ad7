package web_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/web"
)

// TestCatalogAndPerformanceShowTheSameRecord: the gateway's record of a provider's offering, 97 successes, 3
// errors and 5 rate limits in the last day and 100 streamed successes in the last half hour, shows in the public
// catalog, its API and the provider's performance page as the same figures: 97.00% uptime over 100 requests,
// 5 rate limited, and the percentiles ranked by hand. An offering without traffic says so.
func TestCatalogAndPerformanceShowTheSameRecord(t *testing.T) {
	t.Parallel()
	var board *reliability.Board
	var at atomic.Pointer[time.Time] // the board's clock once the test sets it
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		board = reliability.NewBoard(reliability.Config{Source: requestlog.NewRequestLog(pool, nil, nil, nil), Now: func() time.Time {
			if p := at.Load(); p != nil {
				return *p
			}
			return time.Now()
		}})
		cfg.Reliability = board
	})
	ctx := context.Background()
	fjord, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	listed, err := e.catalog.List(ctx, catalog.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	var rig, quiet string
	for _, o := range listed {
		switch {
		case o.ProviderAccountID == fjord.AccountID && rig == "":
			rig = o.ID
		case o.ProviderAccountID != fjord.AccountID && quiet == "":
			quiet = o.ID
		}
	}
	if rig == "" || quiet == "" {
		t.Fatalf("no listed offering of Fjord's (%q) and of another (%q)", rig, quiet)
	}
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	key := fixtures.APIKey(t, e.pool, dev.AccountID, dev.ID, "record", fixtures.KeyPrefix("gm_rec"), fixtures.KeyHash([]byte{1, 2}))
	// The records, as the gateway writes them: the 97 successes are 100 streamed ones less 3, their first tokens
	// at 10, 20, ..., 970 ms, each with 1 + i output tokens over the half second after it (2i tokens per second).
	w := reliability.WindowAt(time.Now())
	log := requestlog.NewRequestLog(e.pool, nil, nil, nil)
	n := 0
	record := func(status requestlog.GatewayStatus, httpStatus int, ttft time.Duration, output int64, at time.Time) {
		n++
		r := requestlog.GatewayRequest{RequestID: fmt.Sprintf("rec_%04d", n), AccountID: dev.AccountID, APIKeyID: key,
			OfferingID: rig, Tier: catalog.TierStandard, Model: "m", HTTPStatus: httpStatus, Status: status, TTFT: ttft,
			Duration: ttft + 500*time.Millisecond, At: at, Streamed: ttft > 0, RelayedOutputBytes: 4 * output,
			RelayedOutputChunks: output}
		if output > 0 {
			r.Usage = &admission.TokenCount{Input: 20, Output: output}
		}
		log.Record(r)
	}
	for i := 1; i <= 97; i++ {
		record(requestlog.GatewayOK, 200, time.Duration(10*i)*time.Millisecond, int64(1+i), w.To.Add(-time.Duration(i)*time.Second))
	}
	for range 3 {
		record(requestlog.GatewayFailedOver, 502, 0, 0, w.To.Add(-time.Hour))
	}
	for range 5 {
		record(requestlog.GatewayError, 429, 0, 0, w.To.Add(-time.Hour))
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := board.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	// The catalog: uptime past the warm-up; 97 samples of first tokens are short of it.
	doc := getPage(t, http.DefaultClient, e.srv.URL+"/catalog")
	cell := doc.Find(`[data-testid="offering"][data-offering-id="` + rig + `"] [data-testid="reliability"]`)
	if got := text(cell.Find(testID("rel-uptime"))); got != "97.00%" {
		t.Errorf("catalog uptime = %q, want 97.00%%", got)
	}
	if got := text(cell.Find(testID("rel-uptime-basis"))); got != "over 100 requests in the last day, 5 rate limited" {
		t.Errorf("catalog uptime basis = %q", got)
	}
	if got := text(cell.Find(testID("rel-ttft-basis"))); got != "not enough traffic yet: 97 of 100 streamed requests in the last 30 minutes" {
		t.Errorf("catalog first tokens = %q, want not enough traffic yet", got)
	}
	quietCell := doc.Find(`[data-testid="offering"][data-offering-id="` + quiet + `"] [data-testid="reliability"]`)
	if got := text(quietCell.Find(testID("rel-uptime-basis"))); got != "not enough traffic yet: 0 of 100 requests in the last day" ||
		quietCell.Find(testID("rel-uptime")).Length() != 0 {
		t.Errorf("an offering without traffic: %q", got)
	}

	// Three more streamed successes, at 980, 990 and 1,000 ms, bring the half hour to the warm-up in the
	// next window.
	for i := 98; i <= 100; i++ {
		record(requestlog.GatewayOK, 200, time.Duration(10*i)*time.Millisecond, int64(1+i), w.To.Add(time.Duration(i-97)*time.Second))
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	later := w.To.Add(reliability.RefreshEvery + 10*time.Second)
	at.Store(&later)
	if err := board.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	var one struct {
		Reliability reliability.Record `json:"reliability"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+rig, nil, &one), http.StatusOK)
	r := one.Reliability
	wantTTFT := reliability.Percentiles{P50: 500, P90: 900, P99: 990}
	wantTPS := reliability.Percentiles{P50: 100, P90: 180, P99: 198}
	if r.Requests != 103 || r.Successes != 100 || r.Errors != 3 || r.RateLimited != 5 || r.UptimePercent == nil ||
		fmt.Sprintf("%.2f", *r.UptimePercent) != "97.09" || r.TTFTRequests != 100 || r.TTFTMs == nil || *r.TTFTMs != wantTTFT ||
		r.TPSRequests != 100 || r.OutputTokensPerSec == nil || *r.OutputTokensPerSec != wantTPS {
		t.Fatalf("API record = %+v (ttft %+v, tps %+v); want 100 of 103 (97.09%%), 5 rate limited, first tokens %+v, throughput %+v",
			r, r.TTFTMs, r.OutputTokensPerSec, wantTTFT, wantTPS)
	}

	doc = getPage(t, http.DefaultClient, e.srv.URL+"/catalog")
	cell = doc.Find(`[data-testid="offering"][data-offering-id="` + rig + `"] [data-testid="reliability"]`)
	if got := text(cell.Find(testID("rel-ttft"))); got != "P50 500.0 ms · P90 900.0 ms · P99 990.0 ms" {
		t.Errorf("catalog first tokens = %q", got)
	}
	if got := text(cell.Find(testID("rel-tps"))); got != "P50 100.0 · P90 180.0 · P99 198.0 tokens/s" {
		t.Errorf("catalog throughput = %q", got)
	}

	// The provider's performance page and API: the same record, the same words.
	client, _ := loginBrowser(t, e, "provider@example.com")
	perf := getPage(t, client, e.srv.URL+"/provider/performance?days=1")
	own := perf.Find(`[data-testid="performance-rig"][data-offering="` + rig + `"] [data-testid="reliability"]`)
	if own.Length() != 1 || text(own) != text(cell) || !strings.Contains(text(own), "97.09%") {
		t.Errorf("performance page shows %q, the catalog %q", text(own), text(cell))
	}
	var view struct {
		Offerings []struct {
			OfferingID  string             `json:"offering_id"`
			Reliability reliability.Record `json:"reliability"`
		} `json:"offerings"`
	}
	wantStatus(t, e.call(t, e.token(t, "provider@example.com", demo.Password), http.MethodGet,
		"/api/provider/performance?days=1", nil, &view), http.StatusOK)
	found := false
	for _, o := range view.Offerings {
		if o.OfferingID == rig {
			found = true
			if !reflect.DeepEqual(o.Reliability, r) {
				t.Errorf("performance API record %+v, the catalog's %+v", o.Reliability, r)
			}
		}
	}
	if !found {
		t.Errorf("the performance API has no row for %s", rig)
	}
}
