package routing

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/metering"
)

// TestTheMetersFeedReachesTheReportedFiguresOncePerRequest: what the meter publishes after a commit
// (metering.Feed) shows in the reported figures of the offerings it names, on every router subscribed, once per
// request however often the feed carries it; the measured figures, the gateways' own, do not move.
func TestTheMetersFeedReachesTheReportedFiguresOncePerRequest(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	clk := newClock()
	r := New(Config{Catalog: &fakeCatalog{book: defaultPrices()}, NATS: nc, Now: clk.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	feed := metering.NewFeed(nc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := clk.Now()
	commit := func(us ...usage.Usage) {
		t.Helper()
		res := metering.BatchResult{Stored: len(us), Usages: us}
		for range us {
			res.Occurred = append(res.Occurred, now.Add(-time.Second))
		}
		feed.OnCommit(res, now)
	}
	usageOf := func(offering, request string, ttftMs float64) usage.Usage {
		return usage.Usage{OfferingID: offering, RequestID: request, TTFTMillis: ttftMs, DurationMillis: 1000,
			InputTokens: 100, OutputTokens: 400, Status: usage.StatusOK}
	}

	// The gateway saw r1 itself, at 100 ms.
	r.Observe("a", Observation{RequestID: "r1", At: now, TTFT: 100 * time.Millisecond, Streamed: true, Duration: time.Second,
		InputTokens: 100, OutputTokens: 400, Status: usage.StatusOK})
	if err := nc.Publish(events.MeteredSubject, []byte(`{"offerings":[{"offering_id":"a","request_id":["x"]}]}`)); err != nil {
		t.Fatal(err) // malformed: ignored
	}
	commit(usageOf("a", "r1", 10), usageOf("a", "r2", 30), usageOf("b", "r3", 50))
	eventually(t, "the metered requests in the reported figures", func() bool {
		return r.ReportedFigures("a").Requests == 2 && r.ReportedFigures("b").Requests == 1
	})
	if f := r.ReportedFigures("a"); f.TTFTP50Ms != 10 || f.TTFTP99Ms != 30 || f.TokensPerSec != 1000 {
		t.Errorf("offering a reported: %+v; want r1 at 10 ms, r2 at 30 ms, 1,000 tokens over the same second", f)
	}
	if f := r.Figures("a"); f.Requests != 1 || f.TTFTP99Ms != 100 {
		t.Errorf("offering a measured: %+v; want the gateway's r1 alone, at 100 ms", f)
	}
	if f := r.Figures("b"); f.Requests != 0 {
		t.Errorf("offering b measured: %+v; the rig's report reached the measured window", f)
	}

	// The same requests again, as another meter's copies, and one request more: once r4 is in, the copies before it
	// were handled.
	commit(usageOf("a", "r1", 900), usageOf("a", "r2", 900), usageOf("a", "r4", 20))
	eventually(t, "the request after the copies", func() bool { return r.ReportedFigures("a").Requests >= 3 })
	if f := r.ReportedFigures("a"); f.Requests != 3 || f.TTFTP99Ms != 30 {
		t.Errorf("offering a reported: %+v; want r1, r2 and r4 once each, none at 900 ms", f)
	}
}
