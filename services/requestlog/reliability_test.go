package requestlog

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/fixtures"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/reliability"
)

// attemptRows inserts gateway records as the gateway writes them, for one customer's key.
type attemptRows struct {
	t        *testing.T
	pool     *pgxpool.Pool
	customer string
	key      string
	n        int
}

func newAttemptRows(t *testing.T, pool *pgxpool.Pool, customer string) *attemptRows {
	t.Helper()
	user := newUser(t, pool, customer, "dev-"+customer+"@acme.test")
	hash := sha256.Sum256([]byte(customer))
	key := fixtures.APIKey(t, pool, customer, user, "test", fixtures.KeyHash(hash[:]), fixtures.KeyCreatedAt(testNow))
	return &attemptRows{t: t, pool: pool, customer: customer, key: key}
}

func newOffering(t *testing.T, pool *pgxpool.Pool, provider string) string {
	t.Helper()
	return fixtures.Offering(t, pool, provider, fixtures.WithCreatedAt(testNow))
}

// attempt is one record's facts that the reliability record reads.
type attempt struct {
	status     GatewayStatus
	httpStatus int
	streamed   bool
	ttft       time.Duration // 0: none
	duration   time.Duration
	output     int64 // -1: no usage came by
	relayed    int64 // output bytes relayed; chunks are as many
	at         time.Time
}

func (a *attemptRows) add(offering string, x attempt, times int) {
	a.t.Helper()
	var rs []GatewayRequest
	for range times {
		a.n++
		r := GatewayRequest{RequestID: fmt.Sprintf("req_%s_%06d", a.key[:8], a.n),
			AccountID: a.customer, APIKeyID: a.key, OfferingID: offering, Tier: "standard", Model: "m",
			HTTPStatus: x.httpStatus, Status: x.status, TTFT: x.ttft, Duration: x.duration, At: x.at,
			Streamed: x.streamed, RelayedOutputBytes: x.relayed, RelayedOutputChunks: x.relayed}
		if x.output >= 0 {
			r.Usage = &admission.TokenCount{Input: 10, Output: x.output}
		}
		rs = append(rs, r)
	}
	l := NewRequestLog(a.pool, nil, nil, nil)
	if err := l.insert(context.Background(), rs); err != nil {
		a.t.Fatal(err)
	}
}

// TestReliabilityCountsTheGatewaysRecord: the record of an offering, from rows as the gateway writes them, comes
// out as counted by hand. 97 successes, 3 errors (a 502 failed over, a refused ticket failed over, a stream that
// broke off) and 5 rate limits (429s relayed and failed over) are 97.00% uptime over 100 requests with 5 rate
// limited; cancellations, the customer's own bad requests, the platform's probes, attempts older than a day and
// attempts after the window's end count for nothing. The latency figures are the streamed successes of the last
// half hour, ranked by hand.
func TestReliabilityCountsTheGatewaysRecord(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	provider := newOrg(t, pool, "Fjord")
	a, b := newOffering(t, pool, provider), newOffering(t, pool, provider)
	customer := newAttemptRows(t, pool, newOrg(t, pool, "Acme"))
	probes := newAttemptRows(t, pool, newOrg(t, pool, "GPUMarket probes"))
	w := reliability.WindowAt(testNow)
	hourAgo, twoHoursAgo := w.To.Add(-time.Hour), w.To.Add(-2*time.Hour)
	whole := attempt{status: GatewayOK, httpStatus: 200, duration: 2 * time.Second, output: 50, relayed: 200, at: hourAgo}

	// Offering a: 97 successes, of which 40 streamed in the half hour with first tokens at 10, 20, ..., 400 ms
	// and 1 + 10 i output tokens over the second after it: 10 i tokens per second.
	customer.add(a, whole, 57)
	for i := 1; i <= 40; i++ {
		ttft := time.Duration(10*i) * time.Millisecond
		customer.add(a, attempt{status: GatewayOK, httpStatus: 200, streamed: true, ttft: ttft, duration: ttft + time.Second,
			output: int64(1 + 10*i), relayed: 1000, at: w.To.Add(-time.Duration(i) * time.Second)}, 1)
	}
	customer.add(a, attempt{status: GatewayFailedOver, httpStatus: 502, duration: time.Second, output: -1, at: twoHoursAgo}, 1)
	customer.add(a, attempt{status: GatewayFailedOver, httpStatus: 401, duration: time.Second, output: -1, at: twoHoursAgo}, 1)
	customer.add(a, attempt{status: GatewayError, httpStatus: 200, streamed: true, ttft: 50 * time.Millisecond,
		duration: time.Second, output: -1, relayed: 30, at: w.To.Add(-time.Minute)}, 1)
	customer.add(a, attempt{status: GatewayError, httpStatus: 429, duration: time.Millisecond, output: -1, at: hourAgo}, 3)
	customer.add(a, attempt{status: GatewayFailedOver, httpStatus: 429, duration: time.Millisecond, output: -1, at: hourAgo}, 2)
	customer.add(a, attempt{status: GatewayCanceled, httpStatus: 499, duration: time.Second, output: -1, at: hourAgo}, 4)
	customer.add(a, attempt{status: GatewayError, httpStatus: 400, duration: time.Millisecond, output: -1, at: hourAgo}, 6)
	probes.add(a, attempt{status: GatewayFailedOver, httpStatus: 503, streamed: true, duration: time.Second, output: -1, at: hourAgo}, 20)
	customer.add(a, attempt{status: GatewayFailedOver, httpStatus: 503, duration: time.Second, output: -1,
		at: w.DayFrom.Add(-time.Second)}, 7)
	customer.add(a, attempt{status: GatewayFailedOver, httpStatus: 503, duration: time.Second, output: -1, at: w.To}, 8)

	// Offering b: a streamed success whose answer claims 10,000 output tokens where the gateway relayed 50
	// bytes in 50 chunks: at most 50 + 50 + 8 = 108 tokens, 107 after the first, over one second. A one-token
	// answer has a first token and no throughput. A streamed success of 31 minutes ago is not in the half hour.
	customer.add(b, attempt{status: GatewayOK, httpStatus: 200, streamed: true, ttft: 80 * time.Millisecond,
		duration: 1080 * time.Millisecond, output: 10_000, relayed: 50, at: w.To.Add(-time.Minute)}, 1)
	customer.add(b, attempt{status: GatewayOK, httpStatus: 200, streamed: true, ttft: 30 * time.Millisecond,
		duration: 30 * time.Millisecond, output: 1, relayed: 5, at: w.To.Add(-time.Minute)}, 1)
	customer.add(b, attempt{status: GatewayOK, httpStatus: 200, streamed: true, ttft: 5 * time.Millisecond,
		duration: time.Second, output: 100, relayed: 400, at: w.To.Add(-31 * time.Minute)}, 1)

	l := NewRequestLog(pool, nil, nil, nil)
	got, err := l.Reliability(ctx, w, []string{probes.customer})
	if err != nil {
		t.Fatal(err)
	}
	ga := got[a]
	if ga.Successes != 97 || ga.Errors != 3 || ga.RateLimited != 5 || ga.Canceled != 4 || ga.Refused != 6 {
		t.Fatalf("offering a = %+v; want 97 successes, 3 errors, 5 rate limited, 4 canceled, 6 refused", ga)
	}
	if u, ok := ga.Uptime(); !ok || u != 97 {
		t.Fatalf("uptime = %v, %v; want 97.00%%", u, ok)
	}
	if r := reliability.RecordOf(ga, w); r.Requests != 100 || r.UptimePercent == nil || *r.UptimePercent != 97 ||
		r.RateLimited != 5 || r.Standing != "preferred" {
		t.Fatalf("record = %+v; want 97.00%% over 100 requests, 5 rate limited, preferred", r)
	}
	want := reliability.Percentiles{P50: 200, P90: 360, P99: 400}
	if ga.TTFTSamples != 40 || ga.TTFTMs == nil || *ga.TTFTMs != want {
		t.Fatalf("time to first token = %d samples, %+v; want 40, %+v", ga.TTFTSamples, ga.TTFTMs, want)
	}
	if ga.TPSSamples != 40 || ga.TPS == nil || *ga.TPS != want {
		t.Fatalf("throughput = %d samples, %+v; want 40, %+v tokens per second", ga.TPSSamples, ga.TPS, want)
	}
	gb := got[b]
	if gb.Successes != 3 || gb.TTFTSamples != 2 || gb.TTFTMs == nil || *gb.TTFTMs != (reliability.Percentiles{P50: 30, P90: 80, P99: 80}) {
		t.Fatalf("offering b = %+v, ttft %+v; want 3 successes, 2 first tokens ranked 30, 80, 80 ms", gb, gb.TTFTMs)
	}
	if gb.TPSSamples != 1 || gb.TPS == nil || *gb.TPS != (reliability.Percentiles{P50: 107, P90: 107, P99: 107}) {
		t.Fatalf("offering b's throughput = %d samples, %+v; want 1 at 107 tokens per second", gb.TPSSamples, gb.TPS)
	}
	if _, ok := gb.Uptime(); ok {
		t.Fatal("offering b has an uptime on 3 requests; want none below the warm-up")
	}

	// Without the probes excluded, their 20 failures count.
	all, err := l.Reliability(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if all[a].Errors != 23 {
		t.Fatalf("errors with the probes = %d, want 23", all[a].Errors)
	}
}

// TestReliabilityReadsOnlyTheDaysRows: with a month of records, the query finds the day's through the index on
// the records' time rather than reading the table.
func TestReliabilityReadsOnlyTheDaysRows(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	provider := newOrg(t, pool, "Fjord")
	offering := newOffering(t, pool, provider)
	customer := newAttemptRows(t, pool, newOrg(t, pool, "Acme"))
	if _, err := pool.Exec(ctx, `
		INSERT INTO gateway_requests (request_id, account_id, api_key_id, offering_id, tier, model, http_status, status,
			duration_ms, at)
		SELECT 'old_' || i, $1, $2, $3, 'standard', 'm', 200, 'ok', 1000, $4::timestamptz - i * interval '30 seconds'
		FROM generate_series(1, 90000) i`, customer.customer, customer.key, offering, testNow); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE gateway_requests`); err != nil {
		t.Fatal(err)
	}
	w := reliability.WindowAt(testNow)
	var plan string
	rows, err := pool.Query(ctx, "EXPLAIN "+reliabilityQuery, w.DayFrom, w.RecentFrom, w.To, []string{}, 8)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan = strings.Join(lines, "\n")
	if !strings.Contains(plan, "gateway_requests_at_idx") {
		t.Fatalf("plan = %q; want a scan of gateway_requests_at_idx", plan)
	}
	got, err := NewRequestLog(pool, nil, nil, nil).Reliability(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One every 30 seconds, the window ending 5 s before a whole minute: the day holds 2,880 of them.
	if got[offering].Successes != 2880 {
		t.Fatalf("successes in the day = %d, want 2880", got[offering].Successes)
	}
}
