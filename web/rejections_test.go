package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/metering"
)

// Finance sees refused usage events counted per rig and reason, beside the samples kept
// whole: on the page and in its JSON.
func TestFinanceSeesRejectionsPerRig(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	var provider, providerName, offering string
	if err := e.pool.QueryRow(ctx, `SELECT o.provider_account_id::text, a.name, o.id::text FROM offerings o
		JOIN accounts a ON a.id = o.provider_account_id ORDER BY o.id LIMIT 1`).Scan(&provider, &providerName, &offering); err != nil {
		t.Fatal(err)
	}
	subject := events.UsageSubject(provider, offering)
	// A flood of 20,000 forged events over two hours, of which 20 were kept whole, and one
	// malformed event of an unknown rig.
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO usage_rejection_counts (hour, provider_id, offering_id, reason, rejected, last_at) VALUES
			(date_trunc('hour', now()) - interval '1 hour', $1, $2, 'ticket_invalid', 12000, now() - interval '1 hour'),
			(date_trunc('hour', now()), $1, $2, 'ticket_invalid', 8000, now()),
			(date_trunc('hour', now()), 'p', 'o', 'malformed', 1, now())`, []any{provider, offering}},
		{`INSERT INTO usage_rejections (stream_seq, subject, event_id, reason, detail, raw, received_at)
			SELECT i, $1, 'evt_' || i, 'ticket_invalid', 'ticket: bad signature', convert_to('{"id":"evt_' || i || '"}', 'UTF8'), now()
			FROM generate_series(1, 20) AS i`, []any{subject}},
		{`INSERT INTO usage_rejections (stream_seq, subject, event_id, reason, detail, raw, received_at)
			VALUES (21, 'usage.p.o', '', 'malformed', 'not JSON', '\x7b', now())`, nil},
	} {
		if _, err := e.pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}

	token := e.token(t, "finance@example.com", demo.Password)
	var report metering.RejectionReport
	if res := e.call(t, token, http.MethodGet, "/api/finance/usage-rejections", nil, &report); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	if len(report.ByRig) != 2 || report.ByRig[0].ProviderID != provider || report.ByRig[0].ProviderName != providerName ||
		report.ByRig[0].OfferingID != offering || report.ByRig[0].Count != 20_000 || report.ByRig[0].Samples != 20 ||
		report.ByRig[1].Count != 1 || report.ByRig[1].Samples != 1 {
		t.Errorf("per rig %+v", report.ByRig)
	}
	if len(report.ByReason) != 2 || report.ByReason[0] != (metering.ReasonCount{Reason: "ticket_invalid", Count: 20_000}) {
		t.Errorf("per reason %+v", report.ByReason)
	}
	if len(report.Samples) != 21 {
		t.Errorf("%d samples, want 21", len(report.Samples))
	}

	b, _ := loginBrowser(t, e, "finance@example.com")
	doc := getPage(t, b, e.srv.URL+"/finance/usage-rejections")
	rigs := doc.Find(`[data-testid="rig-rejections"]`)
	if rigs.Length() != 2 || strings.TrimSpace(rigs.First().Find(`[data-testid="rig-rejected"]`).Text()) != "20000" ||
		!strings.Contains(rigs.First().Text(), providerName) {
		t.Errorf("per-rig rows %q", rigs.Text())
	}
	if n := doc.Find(`[data-testid="rejection"]`).Length(); n != 21 {
		t.Errorf("%d sample rows, want 21", n)
	}
}
