package routing

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// knownCounts is the gateway's record as counted, the same for every window.
type knownCounts map[string]reliability.Counts

func (k knownCounts) Reliability(context.Context, reliability.Window, []string) (map[string]reliability.Counts, error) {
	return k, nil
}

// withRecord gives the router a board holding the counts, as every replica's would after its refresh.
func (b bundle) withRecord(t *testing.T, counts knownCounts) {
	t.Helper()
	board := reliability.NewBoard(reliability.Config{Source: counts, Now: b.clock.Now})
	if err := board.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.r.cfg.Reliability = board
}

func ok(successes, errors, rateLimited int64) reliability.Counts {
	return reliability.Counts{Successes: successes, Errors: errors, RateLimited: rateLimited}
}

// TestPickOrdersByUptimeFirst: with known figures, an offering at 95% uptime or more, or with fewer than 100
// requests in the day, is ordered by ask as ever; one below 95% comes after every one of those, however cheap;
// one below 80% comes last of all. Rate limits count for nothing. Asks are more than 5% apart: no random draw.
func TestPickOrdersByUptimeFirst(t *testing.T) {
	t.Parallel()
	cheapest, cheap := offering("cheapest", "m", st, 100_000), offering("cheap", "m", st, 120_000)
	mid, dear, dearest := offering("mid", "m", st, 150_000), offering("dear", "m", st, 180_000), offering("dearest", "m", st, 210_000)
	cases := []struct {
		name   string
		counts knownCounts
		want   []string
	}{
		{name: "no record: by ask", counts: knownCounts{}, want: []string{"cheapest", "cheap", "mid"}},
		{name: "94% is tried after the others", counts: knownCounts{"cheapest": ok(94, 6, 0)},
			want: []string{"cheap", "mid", "dear"}},
		{name: "exactly 95% is preferred", counts: knownCounts{"cheapest": ok(95, 5, 0), "cheap": ok(949, 51, 0)},
			want: []string{"cheapest", "mid", "dear"}},
		{name: "below the warm-up counts for nothing", counts: knownCounts{"cheapest": ok(0, 99, 0)},
			want: []string{"cheapest", "cheap", "mid"}},
		{name: "rate limits are neither successes nor errors", counts: knownCounts{"cheapest": ok(100, 0, 5000)},
			want: []string{"cheapest", "cheap", "mid"}},
		{name: "degraded among themselves by ask", counts: knownCounts{"cheapest": ok(90, 10, 0), "cheap": ok(81, 19, 0),
			"mid": ok(94, 6, 0), "dear": ok(85, 15, 0)}, want: []string{"dearest", "cheapest", "cheap"}},
		{name: "below 80% only when nothing else is left", counts: knownCounts{"cheapest": ok(79, 21, 0),
			"cheap": ok(90, 10, 0), "mid": ok(50, 50, 0), "dear": ok(100, 0, 0)},
			want: []string{"dear", "dearest", "cheap"}},
		{name: "exactly 80% is degraded, not a fallback", counts: knownCounts{"cheapest": ok(79, 21, 0), "cheap": ok(80, 20, 0),
			"mid": ok(0, 100, 0), "dear": ok(10, 90, 0), "dearest": ok(1, 99, 0)},
			want: []string{"cheap", "cheapest", "mid"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, cheapest, cheap, mid, dear, dearest)
			b.withRecord(t, tc.counts)
			if got := b.pickIDs(t, Request{Model: "m", Tier: st}); !slices.Equal(got, tc.want) {
				t.Fatalf("Pick = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUptimeComesBeforeLoadAndBorrowing: a preferred rig at capacity is tried before a degraded one with room,
// and a fallback batch rig comes after a faster rig lending an idle slot, which comes after every batch rig
// that is not a fallback.
func TestUptimeComesBeforeLoadAndBorrowing(t *testing.T) {
	t.Parallel()
	full, roomy := offering("full", "m", st, 150_000), offering("roomy", "m", st, 100_000)
	b := setup(t, full, roomy)
	b.beat(full, 8, 8)
	b.withRecord(t, knownCounts{"roomy": ok(94, 6, 0)})
	if got := b.pickIDs(t, Request{Model: "m", Tier: st}); !slices.Equal(got, []string{"full", "roomy"}) {
		t.Fatalf("Pick = %v, want the preferred rig at capacity, then the degraded one with room", got)
	}

	slow, slower := claims(offering("slow", "m", ba, 100_000), 3000, 6000), claims(offering("slower", "m", ba, 110_000), 3000, 6000)
	fast := claims(offering("fast", "m", rt, 60_000), 20, 40)
	b = setup(t, slow, slower, fast)
	b.withRecord(t, knownCounts{"slow": ok(70, 30, 0)})
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba}); !slices.Equal(got, []string{"slower", "fast", "slow"}) {
		t.Fatalf("Pick = %v, want the preferred batch rig, the idle realtime one, then the fallback", got)
	}
	b.withRecord(t, knownCounts{"slow": ok(90, 10, 0), "fast": ok(90, 10, 0)})
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba}); !slices.Equal(got, []string{"slower", "slow", "fast"}) {
		t.Fatalf("Pick = %v, want the preferred batch rig, then the degraded ones, the borrowed slot last", got)
	}
	// A pinned request is served by its offering whatever its uptime: it has no other.
	b.withRecord(t, knownCounts{"slow": ok(0, 100, 0)})
	if got := b.pickIDs(t, Request{Model: "m", Tier: ba, Offering: "slow"}); !slices.Equal(got, []string{"slow"}) {
		t.Fatalf("pinned Pick = %v, want the fallback it is pinned to", got)
	}
}

// TestReplicasReadingTheSameRecordAgree: two routers, as two gateway replicas, each with its own board over the
// same record, order alike.
func TestReplicasReadingTheSameRecordAgree(t *testing.T) {
	t.Parallel()
	cheap, mid, dear := offering("cheap", "m", st, 100_000), offering("mid", "m", st, 150_000), offering("dear", "m", st, 200_000)
	record := knownCounts{"cheap": ok(70, 30, 0), "mid": ok(90, 10, 0)}
	one, two := setup(t, cheap, mid, dear), setup(t, cheap, mid, dear)
	one.withRecord(t, record)
	two.withRecord(t, record)
	a, b := one.pickIDs(t, Request{Model: "m"}), two.pickIDs(t, Request{Model: "m"})
	if !slices.Equal(a, []string{"dear", "mid", "cheap"}) || !slices.Equal(a, b) {
		t.Fatalf("replicas picked %v and %v, want both [dear mid cheap]", a, b)
	}
}

// TestReplicasRouteByTheRecordInPostgres: two gateway replicas over one database, each with its own board read
// from the gateway's record, place the offerings alike: 79 successes and 21 failovers in the day make the
// cheapest a fallback, 90 and 10 the next degraded, and the dearest, without a record, is tried first.
func TestReplicasRouteByTheRecordInPostgres(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	ctx := context.Background()
	cheap, mid, dear := b.list(t, "m", 100_000, 300), b.list(t, "m", 150_000, 300), b.list(t, "m", 200_000, 300)
	customer := fixtures.Account(t, b.pool, "Acme")
	user := fixtures.User(t, b.pool, customer, "dev@acme.test", "developer")
	key := fixtures.APIKey(t, b.pool, customer, user, "test")
	log := requestlog.NewRequestLog(b.pool, nil, nil, nil)
	n := 0
	attempts := func(o catalog.Offering, status requestlog.GatewayStatus, httpStatus, times int) {
		for range times {
			n++
			log.Record(requestlog.GatewayRequest{RequestID: fmt.Sprintf("req_%d", n), AccountID: customer, APIKeyID: key,
				OfferingID: o.ID, Tier: st, Model: "m", HTTPStatus: httpStatus, Status: status, Duration: time.Second,
				At: b.clock.Now().Add(-time.Hour)})
		}
	}
	attempts(cheap, requestlog.GatewayOK, 200, 79)
	attempts(cheap, requestlog.GatewayFailedOver, 502, 21)
	attempts(mid, requestlog.GatewayOK, 200, 90)
	attempts(mid, requestlog.GatewayFailedOver, 503, 10)
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	replica := func() []string {
		board := reliability.NewBoard(reliability.Config{Source: requestlog.NewRequestLog(b.pool, nil, nil, nil), Now: b.clock.Now})
		if err := board.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		r := New(Config{Pool: b.pool, Now: b.clock.Now, Rand: rand.New(rand.NewPCG(3, 4)), Reliability: board,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		rb := bundle{r: r, clock: b.clock}
		for _, o := range []catalog.Offering{cheap, mid, dear} {
			rb.beat(o, 0, 8)
		}
		return rb.pickIDs(t, Request{Model: "m", Tier: st})
	}
	want := []string{dear.ID, mid.ID, cheap.ID}
	if one, two := replica(), replica(); !slices.Equal(one, want) || !slices.Equal(two, want) {
		t.Fatalf("replicas picked %v and %v, want dear, mid, cheap: %v", one, two, want)
	}
}
