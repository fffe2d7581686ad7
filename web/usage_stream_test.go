package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/riglimits"
	"github.com/gpumarket/gpumarket/web"
)

// streamReport is a watcher's report as it stood at one moment.
type streamReport riglimits.Report

func (r streamReport) Report() riglimits.Report { return riglimits.Report(r) }

// TestAdminsSeeTheRigsAtTheirLimitsOnTheUsageStream: the page and its JSON show the limits in force and each rig
// flagged, by provider and offering: one at its pending limit, one shut out for its rate.
func TestAdminsSeeTheRigsAtTheirLimitsOnTheUsageStream(t *testing.T) {
	t.Parallel()
	e := setup(t)
	until := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	report := streamReport{CheckedAt: until.Add(-time.Minute), MaxPendingPerRig: 10_000, MaxRate: 2000, RateWindow: "10s",
		Cooldown: "1m0s", Enforced: true, PendingEvents: 10_012, RigsPending: 3,
		Rigs: []riglimits.RigState{
			{ProviderID: "prov-full", OfferingID: "off-full", Subject: events.UsageSubject("prov-full", "off-full"), Pending: 10_000, AtPendingLimit: true, Rate: 12.5},
			{ProviderID: "prov-fast", OfferingID: "off-fast", Subject: events.UsageSubject("prov-fast", "off-fast"), Pending: 10, Rate: 3100, OverRate: true, ShutOutUntil: &until},
		}}
	h := web.New(web.Config{Accounts: e.accounts, Catalog: e.catalog, Usage: metering.NewReports(e.pool), UsageStream: report})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	watched := &env{srv: srv, pool: e.pool, accounts: e.accounts, catalog: e.catalog}

	b, _ := loginBrowser(t, watched, "admin@example.com")
	res, err := b.Get(srv.URL + "/admin/usage-stream")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusOK)
	doc, err := goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	limits := doc.Find(`[data-testid="stream-limits"]`).Text()
	for _, want := range []string{"10000 usage events waiting to be metered", "2000 events a second, averaged over 10s", "shut out for 1m0s"} {
		if !strings.Contains(limits, want) {
			t.Errorf("the limits read %q, want %q in them", limits, want)
		}
	}
	rows := doc.Find(`[data-testid="stream-rig"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d rigs shown, want 2", rows.Length())
	}
	full, fast := rows.Eq(0), rows.Eq(1)
	if !strings.Contains(full.Text(), "prov-full") || !strings.Contains(full.Text(), "off-full") || !strings.Contains(full.Text(), "10000") ||
		full.Find(`[data-testid="at-limit"]`).Length() != 1 || full.Find(`[data-testid="shut-out"]`).Length() != 0 {
		t.Errorf("first row %q, want prov-full's off-full at its limit of 10000", full.Text())
	}
	if !strings.Contains(fast.Text(), "prov-fast") || !strings.Contains(fast.Text(), "3100.0") ||
		!strings.Contains(fast.Find(`[data-testid="shut-out"]`).Text(), "2026-05-06 07:08:09 UTC") {
		t.Errorf("second row %q, want prov-fast's off-fast at 3100 events/s shut out until 2026-05-06 07:08:09 UTC", fast.Text())
	}

	admin := watched.token(t, "admin@example.com", demo.Password)
	var out struct {
		Watched bool             `json:"watched"`
		Report  riglimits.Report `json:"report"`
	}
	wantStatus(t, watched.call(t, admin, http.MethodGet, "/api/admin/usage-stream", nil, &out), http.StatusOK)
	if !out.Watched || len(out.Report.Rigs) != 2 || out.Report.Rigs[1].ShutOutUntil == nil || !out.Report.Rigs[1].ShutOutUntil.Equal(until) ||
		out.Report.Rigs[0].Pending != 10_000 || out.Report.MaxPendingPerRig != 10_000 {
		t.Errorf("API answered %+v, want the report", out)
	}
	dev := watched.token(t, "developer@example.com", demo.Password)
	wantStatus(t, watched.call(t, dev, http.MethodGet, "/api/admin/usage-stream", nil, nil), http.StatusForbidden)
}

// Where no watcher runs, the page says so rather than showing an empty list as if all were well.
func TestTheUsageStreamPageSaysWhenThisProcessDoesNotWatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, _ := loginBrowser(t, e, "admin@example.com")
	res, err := b.Get(e.srv.URL + "/admin/usage-stream")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusOK)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `data-testid="stream-not-watched"`) || strings.Contains(string(body), `data-testid="no-stream-rigs"`) {
		t.Errorf("the page does not say that this process does not watch the stream:\n%s", body)
	}
}
