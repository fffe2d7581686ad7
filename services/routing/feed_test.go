package routing

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/metering"
)

// TestTheMetersFeedReachesTheFiguresOncePerRequest: what the meter publishes after a commit (metering.Feed) shows
// in the figures of the offerings it names, on every router subscribed; a request this gateway observed itself
// keeps the gateway's measurement and counts once, and so does a request the feed carries twice.
func TestTheMetersFeedReachesTheFiguresOncePerRequest(t *testing.T) {
	t.Parallel()
	nc := startNATS(t)
	clk := newClock()
	r := New(Config{Catalog: &fakeCatalog{prices: defaultPrices()}, NATS: nc, Now: clk.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	feed := metering.NewFeed(nc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := clk.Now()
	commit := func(us ...metering.Usage) {
		t.Helper()
		res := metering.BatchResult{Stored: len(us), Usages: us}
		for range us {
			res.Occurred = append(res.Occurred, now.Add(-time.Second))
		}
		feed.OnCommit(res, now)
	}
	usage := func(offering, request string, ttftMs float64) metering.Usage {
		return metering.Usage{OfferingID: offering, RequestID: request, TTFTMillis: ttftMs, DurationMillis: 1000,
			InputTokens: 100, OutputTokens: 400, Status: metering.StatusOK}
	}

	// The gateway saw r1 itself, at 100 ms.
	r.Observe("a", Observation{RequestID: "r1", At: now, TTFT: 100 * time.Millisecond, Duration: time.Second,
		InputTokens: 100, OutputTokens: 400, Status: metering.StatusOK})
	if err := nc.Publish(metering.FeedSubject, []byte(`{"offerings":[{"offering_id":"a","request_id":["x"]}]}`)); err != nil {
		t.Fatal(err) // malformed: ignored
	}
	commit(usage("a", "r1", 500), usage("a", "r2", 300), usage("b", "r3", 50))
	eventually(t, "the metered requests in the figures", func() bool {
		return r.Figures("a").Requests == 2 && r.Figures("b").Requests == 1
	})
	if f := r.Figures("a"); f.TTFTP50Ms != 100 || f.TTFTP99Ms != 300 || f.TokensPerSec != 500 {
		t.Errorf("offering a: %+v; want r1 at the gateway's 100 ms, r2 at the meter's 300 ms, 500 tokens/s", f)
	}
	if f := r.Figures("b"); f.TTFTP50Ms != 50 {
		t.Errorf("offering b: %+v; want the metered request at 50 ms", f)
	}

	// The same requests again, as another meter's copies, and one request more: once r4 is in, the copies before it
	// were handled.
	commit(usage("a", "r1", 900), usage("a", "r2", 900), usage("a", "r4", 200))
	eventually(t, "the request after the copies", func() bool { return r.Figures("a").Requests >= 3 })
	if f := r.Figures("a"); f.Requests != 3 || f.TTFTP99Ms != 300 {
		t.Errorf("offering a: %+v; want r1, r2 and r4 once each, none at 900 ms", f)
	}
}
