package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/web"
)

// The progress of long work (docs/progress.md): each page's block and the fragment its script
// polls, from known states on a clock the test sets.

// testClock is a clock a test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// setupClocked is setup with every page's, the batches' and the payouts' clock on clock.
func setupClocked(t *testing.T, clock *testClock) (*env, *batch.Service) {
	t.Helper()
	var svc *batch.Service
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		cfg.Now = clock.Now
		svc = batch.NewService(batch.Config{Pool: pool, Storage: batch.LocalDir{Dir: t.TempDir()}, Now: clock.Now})
		cfg.Batches = svc
		// The payouts read on the clock too; these tests pay nothing.
		cfg.Payments.Payouts = payouts.NewService(payouts.Config{Pool: pool, Ledger: cfg.Payments.Ledger,
			Statements: cfg.Invoicing, Now: clock.Now})
	})
	return e, svc
}

// progressBlock is what a progress block says, as a test reads it.
type progressBlock struct {
	src, percent, bar, status, count, rate, left, note string
}

func readProgress(t *testing.T, s *goquery.Selection) progressBlock {
	t.Helper()
	if s.Length() != 1 {
		t.Fatalf("%d progress blocks, want 1", s.Length())
	}
	return progressBlock{src: s.AttrOr("data-progress-src", ""), percent: s.AttrOr("data-percent", ""),
		bar:    s.Find(`progress`).AttrOr("value", ""),
		status: text(s.Find(`[data-testid="progress-status"]`)), count: text(s.Find(`[data-testid="progress-count"]`)),
		rate: text(s.Find(`[data-testid="progress-rate"]`)), left: text(s.Find(`[data-testid="progress-left"]`)),
		note: text(s.Find(`[data-testid="progress-note"]`))}
}

// fragment gets a progress fragment and reads its one block.
func fragment(t *testing.T, client *http.Client, u string) progressBlock {
	t.Helper()
	res, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, http.StatusOK)
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s: Cache-Control %q", u, cc)
	}
	doc, err := goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Find("html head title").Length() != 0 && doc.Find("nav").Length() != 0 {
		t.Errorf("%s answers a whole page, not a fragment", u)
	}
	return readProgress(t, doc.Find(`[aria-live]`))
}

var noscriptContent = regexp.MustCompile(`content="(\d+)"`)

// noscriptRefresh is the reload a page asks for when scripts do not run, "" for none. An HTML
// parser that runs scripts reads <noscript> as text, as a browser that runs them does.
func noscriptRefresh(doc *goquery.Document) string {
	m := noscriptContent.FindStringSubmatch(doc.Find("head noscript").Text())
	if m == nil {
		return ""
	}
	return m[1]
}

// runningBatch makes a batch of the account in progress since ten minutes before now, of total
// lines, the first done of them ended at the times given.
func runningBatch(t *testing.T, e *env, svc *batch.Service, accountID string, now time.Time, total int, ended []time.Time) string {
	t.Helper()
	ctx := context.Background()
	st, err := svc.Stage(accountID, "in.jsonl", strings.NewReader(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Commit(ctx, st, batch.PurposeBatch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Create(ctx, batch.CreateInput{AccountID: accountID, APIKeyID: "k", InputFileID: f.ID,
		Endpoint: "/v1/chat/completions", CompletionWindow: batch.CompletionWindow})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE batches SET status = 'in_progress', in_progress_at = $2 WHERE id = $1`,
		b.ID, now.Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO batch_lines (batch_id, line, custom_id, body_offset, body_length, status)
		SELECT $1, n, 'line-' || n, 0, 1, 'pending' FROM generate_series(1, $2) n`, b.ID, total); err != nil {
		t.Fatal(err)
	}
	for i, at := range ended {
		endLine(t, e, b.ID, i+1, at)
	}
	return b.ID
}

// endLine answers a batch's line at at.
func endLine(t *testing.T, e *env, batchID string, line int, at time.Time) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), `UPDATE batch_lines SET status = 'done', attempts = 1, finished_at = $3
		WHERE batch_id = $1 AND line = $2`, batchID, line, at); err != nil {
		t.Fatal(err)
	}
}

func TestBatchProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := &testClock{now: now}
	e, svc := setupClocked(t, clock)
	dev, err := e.accounts.UserByEmail(context.Background(), "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	// 10 of 40 lines ended within the last five minutes: 2 a minute, so the 30 left take 15.
	var ended []time.Time
	for i := range 10 {
		ended = append(ended, now.Add(-4*time.Minute+time.Duration(i)*20*time.Second))
	}
	id := runningBatch(t, e, svc, dev.AccountID, now, 40, ended)
	client, _ := loginBrowser(t, e, "developer@example.com")
	src := "/batches/" + id + "/progress"
	got := fragment(t, client, e.srv.URL+src)
	want := progressBlock{src: src, percent: "25", bar: "25", status: "in progress", count: "10 done, 0 failed of 40 lines (25 %)",
		rate: "2.0 lines a minute", left: "about 15 min left"}
	if got != want {
		t.Errorf("a batch a quarter done:\n got %+v\nwant %+v", got, want)
	}

	// The page shows the same block, polled, and reloads itself only without scripts.
	doc := getPage(t, client, e.srv.URL+"/batches")
	if page := readProgress(t, doc.Find(`[data-batch="`+id+`"] [data-testid="batch-lines"]`)); page != want {
		t.Errorf("the batch on /batches:\n got %+v\nwant %+v", page, want)
	}
	if r := noscriptRefresh(doc); r != "5" || doc.Find(`script[src="/static/progress.js"]`).Length() != 1 {
		t.Errorf("/batches: refresh %q without scripts, %d progress scripts", r, doc.Find(`script[src="/static/progress.js"]`).Length())
	}
	// And so does the batch's own page.
	doc = getPage(t, client, e.srv.URL+"/batches/"+id)
	if page := readProgress(t, doc.Find(`[data-testid="batch-lines"]`)); page != want {
		t.Errorf("the batch's page:\n got %+v\nwant %+v", page, want)
	}
	if r := noscriptRefresh(doc); r != "5" || doc.Find(`[data-testid="batch-cancel"]`).Length() != 1 {
		t.Errorf("the batch's page: refresh %q without scripts, %d cancel buttons", r, doc.Find(`[data-testid="batch-cancel"]`).Length())
	}

	// Two minutes later with nothing more ended the pace is lower: of the 10, the 6 that ended
	// after 11:57 are within the last five minutes, 1.2 a minute, and the 30 left take 25.
	clock.set(now.Add(2 * time.Minute))
	if got := fragment(t, client, e.srv.URL+src); got.rate != "1.2 lines a minute" || got.left != "about 25 min left" {
		t.Errorf("a batch that slowed: %+v", got)
	}

	// Too little has ended to tell: it says so, and gives no figure.
	young := runningBatch(t, e, svc, dev.AccountID, now, 40, []time.Time{now.Add(-time.Minute), now.Add(-30 * time.Second)})
	clock.set(now)
	if got := fragment(t, client, e.srv.URL+"/batches/"+young+"/progress"); got.left != "estimating…" || got.rate != "" || got.percent != "5" {
		t.Errorf("a batch with two lines ended: %+v", got)
	}

	// Finished: done, and no address to poll.
	for line := 11; line <= 40; line++ {
		endLine(t, e, id, line, now)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE batches SET status = 'completed', completed_at = $2 WHERE id = $1`, id, now); err != nil {
		t.Fatal(err)
	}
	want = progressBlock{percent: "100", bar: "100", status: "completed", count: "40 done, 0 failed of 40 lines (100 %)", left: "done"}
	if got := fragment(t, client, e.srv.URL+src); got != want {
		t.Errorf("a finished batch:\n got %+v\nwant %+v", got, want)
	}
	doc = getPage(t, client, e.srv.URL+"/batches/"+id)
	if page := readProgress(t, doc.Find(`[data-testid="batch-lines"]`)); page != want || noscriptRefresh(doc) != "" {
		t.Errorf("a finished batch's page:\n got %+v, refresh %q\nwant %+v", page, noscriptRefresh(doc), want)
	}

	// Another customer's batch does not exist for this one.
	other, _ := loginBrowser(t, e, "studio@example.com")
	for _, u := range []string{src, "/batches/" + id} {
		res, err := other.Get(e.srv.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		wantStatus(t, res, http.StatusNotFound)
	}

	// The admin's queue: the young batch's 2 of 40 lines are all that is in progress.
	ab, _ := loginBrowser(t, e, "admin@example.com")
	got = fragment(t, ab, e.srv.URL+"/admin/batches/progress")
	if got.src != "/admin/batches/progress" || got.count != "2 of 40 lines done (5 %)" || got.left != "estimating…" {
		t.Errorf("the admin's queue: %+v", got)
	}
	if page := readProgress(t, getPage(t, ab, e.srv.URL+"/admin/batches").Find(`[data-testid="queue-progress"]`)); page != got {
		t.Errorf("the queue's page shows %+v, its fragment %+v", page, got)
	}
}

func TestCloseProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := &testClock{now: now}
	e, _ := setupClocked(t, clock)
	ctx := context.Background()
	// A close of February under way in another process, which holds the period's lock
	// (invoicing's close lock, "GPMC", and the period as YYYYMM): 10 of its 40 accounts done,
	// all of them in the last four minutes (2.5 a minute: the 30 left take 12), with a mark
	// before the window.
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(0x47504d43), int32(202602)); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, int32(0x47504d43), int32(202602)) }()
	marks := `[{"at": "2026-03-10T11:50:00Z", "done": 0}, {"at": "2026-03-10T11:56:00Z", "done": 0},
		{"at": "2026-03-10T11:58:00Z", "done": 5}, {"at": "2026-03-10T11:59:00Z", "done": 10}]`
	if _, err := e.pool.Exec(ctx, `INSERT INTO invoice_closes (period, status, started_at, runs, customers_total, customers_done,
		providers_total, providers_done, progress_marks) VALUES ('2026-02-01', 'running', $1, 1, 30, 10, 10, 0, $2)`,
		now.Add(-10*time.Minute), marks); err != nil {
		t.Fatal(err)
	}
	client, _ := loginBrowser(t, e, "finance@example.com")
	src := "/finance/close/progress?period=2026-02"
	want := progressBlock{src: src, percent: "25", bar: "25", status: "running", count: "10 of 40 accounts done (25 %)",
		rate: "2.5 accounts a minute", left: "about 12 min left", note: "customers 10 of 30, providers 0 of 10"}
	if got := fragment(t, client, e.srv.URL+src); got != want {
		t.Errorf("a close a quarter done:\n got %+v\nwant %+v", got, want)
	}
	doc := getPage(t, client, e.srv.URL+"/finance/close?period=2026-02")
	if page := readProgress(t, doc.Find(`[data-testid="close-progress-bar"]`)); page != want {
		t.Errorf("the close's page:\n got %+v\nwant %+v", page, want)
	}
	if r := noscriptRefresh(doc); r != "2" {
		t.Errorf("the close's page reloads after %q without scripts", r)
	}

	// Just started: one mark, nothing done yet.
	if _, err := e.pool.Exec(ctx, `UPDATE invoice_closes SET customers_done = 0, started_at = $1,
		progress_marks = jsonb_build_array(jsonb_build_object('at', $1::timestamptz, 'done', 0)) WHERE period = '2026-02-01'`,
		now.Add(-5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := fragment(t, client, e.srv.URL+src); got.left != "estimating…" || got.rate != "" || got.percent != "0" {
		t.Errorf("a close just started: %+v", got)
	}

	// Done: no address to poll.
	if _, err := e.pool.Exec(ctx, `UPDATE invoice_closes SET status = 'done', finished_at = $1, customers_done = 30,
		providers_done = 10 WHERE period = '2026-02-01'`, now); err != nil {
		t.Fatal(err)
	}
	got := fragment(t, client, e.srv.URL+src)
	if got.src != "" || got.status != "done" || got.left != "done" || got.percent != "100" {
		t.Errorf("a close done: %+v", got)
	}
	doc = getPage(t, client, e.srv.URL+"/finance/close?period=2026-02")
	if r := noscriptRefresh(doc); r != "" {
		t.Errorf("a close done reloads after %q", r)
	}
}

func TestPayoutRunProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := &testClock{now: now}
	e, _ := setupClocked(t, clock)
	ctx := context.Background()
	var fjord, northwind string
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT id::text FROM accounts WHERE name = 'Fjord GPU Co-op'),
		(SELECT id::text FROM accounts WHERE name = 'Northwind Compute')`).Scan(&fjord, &northwind); err != nil {
		t.Fatal(err)
	}
	// February's run: four payouts made three minutes ago; three have ended (failed, here:
	// a paid one needs its transfer and ledger posting), one is pending. Three ended in three
	// minutes: one a minute, and the one left takes a minute. January's run ended long ago.
	insert := func(n int, provider, period, status string, created, updated time.Time) {
		t.Helper()
		if _, err := e.pool.Exec(ctx, `INSERT INTO payouts (id, statement_id, statement_number, period, provider_account_id,
			amount_cents, status, attempts, created_at, updated_at) VALUES (gen_random_uuid(), 'st-' || $1::int, 'S-' || $1::int, $2, $3, 1000, $4, 1, $5, $6)`,
			n, period, provider, status, created, updated); err != nil {
			t.Fatal(err)
		}
	}
	insert(1, fjord, "2026-01", "failed", now.Add(-40*24*time.Hour), now.Add(-40*24*time.Hour))
	insert(2, fjord, "2026-02", "failed", now.Add(-3*time.Minute), now.Add(-2*time.Minute))
	insert(3, fjord, "2026-02", "pending", now.Add(-3*time.Minute), now.Add(-3*time.Minute))
	insert(4, northwind, "2026-02", "failed", now.Add(-3*time.Minute), now.Add(-90*time.Second))
	insert(5, northwind, "2026-02", "failed", now.Add(-3*time.Minute), now.Add(-time.Minute))

	fin, _ := loginBrowser(t, e, "finance@example.com")
	src := "/finance/payouts/progress?period=2026-02"
	want := progressBlock{src: src, percent: "75", bar: "75", status: "2026-02: paying", count: "3 of 4 payouts done (75 %)",
		rate: "1.0 payouts a minute", left: "about 1 min left", note: "0 paid, 3 failed, 1 pending"}
	if got := fragment(t, fin, e.srv.URL+src); got != want {
		t.Errorf("finance's run:\n got %+v\nwant %+v", got, want)
	}
	if page := readProgress(t, getPage(t, fin, e.srv.URL+"/finance/payouts").Find(`[data-testid="payout-run"]`)); page != want {
		t.Errorf("finance's payouts page:\n got %+v\nwant %+v", page, want)
	}

	// The provider sees its own payouts only: one ended of two, too few to tell a pace.
	prov, _ := loginBrowser(t, e, "provider@example.com")
	got := fragment(t, prov, e.srv.URL+"/provider/payouts/progress?period=2026-02")
	if got.count != "1 of 2 payouts done (50 %)" || got.note != "0 paid, 1 failed, 1 pending" || got.left != "estimating…" ||
		got.src != "/provider/payouts/progress?period=2026-02" {
		t.Errorf("the provider's run: %+v", got)
	}
	if page := readProgress(t, getPage(t, prov, e.srv.URL+"/provider/payouts").Find(`[data-testid="payout-run"]`)); page != got {
		t.Errorf("the provider's payouts page shows %+v, its fragment %+v", page, got)
	}
	// Northwind's: both ended, nothing under way.
	nw, _ := loginBrowser(t, e, "northwind@example.com")
	got = fragment(t, nw, e.srv.URL+"/provider/payouts/progress?period=2026-02")
	if got.count != "2 of 2 payouts done (100 %)" || got.src != "" || got.left != "done" || got.status != "2026-02: no payout under way" {
		t.Errorf("northwind's run: %+v", got)
	}
	// A period without payouts of the provider's is empty, not another's.
	got = fragment(t, nw, e.srv.URL+"/provider/payouts/progress?period=2026-01")
	if got.count != "0 of 0 payouts done (0 %)" || got.src != "" {
		t.Errorf("northwind's January: %+v", got)
	}
}

// A developer watches a running batch on /batches: as its lines end, the bar and the figures
// beside it move without the page being loaded again (a value set on the window before
// survives), and once the batch ends the block says so and stops polling.
func TestBatchProgressMovesInTheBrowser(t *testing.T) {
	t.Parallel()
	var svc *batch.Service
	e := setupWith(t, func(cfg *web.Config, _ *pgxpool.Pool) { svc = cfg.Batches })
	dev, err := e.accounts.UserByEmail(context.Background(), "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var ended []time.Time
	for i := range 10 {
		ended = append(ended, now.Add(-4*time.Minute+time.Duration(i)*20*time.Second))
	}
	id := runningBatch(t, e, svc, dev.AccountID, now, 40, ended)

	b := newBrowser(t, e.srv.URL)
	b.open("/login")
	b.do("fill the login form", fill("#email", "developer@example.com"), fill("#password", demo.Password))
	b.navigate("log in", click(testID("login-submit")))
	if st := b.open("/batches"); st != http.StatusOK {
		t.Fatalf("GET /batches: %d", st)
	}
	bar := `document.querySelector('[data-batch="` + id + `"] [data-testid="batch-lines"] progress')`
	if v := browserRun(b, "read the bar", chromedp.Evaluate[float64](bar+`.value`)); v != 25 {
		t.Fatalf("the bar at first: %v, want 25", v)
	}
	b.do("mark the document", chromedp.Evaluate[chromedp.Void](`window.progressMarker = "kept"`))

	// Twenty more lines end: 30 of 40.
	for line := 11; line <= 30; line++ {
		endLine(t, e, id, line, time.Now())
	}
	if v := browserRun(b, "wait for the bar to move", chromedp.Poll[float64](bar+`.value === 75 && `+bar+`.value`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); v != 75 {
		t.Fatalf("the bar after 30 of 40 lines: %v", v)
	}
	if got := b.text(`[data-batch="` + id + `"] ` + testID("progress-count")); got != "30 done, 0 failed of 40 lines (75 %)" {
		t.Errorf("the figures after 30 of 40 lines: %q", got)
	}
	if got := b.text(`[data-batch="` + id + `"] ` + testID("progress-left")); !strings.HasPrefix(got, "about ") && got != "less than a minute left" {
		t.Errorf("the time left after 30 of 40 lines: %q", got)
	}
	if m := browserRun(b, "read the mark", chromedp.Evaluate[string](`window.progressMarker || ""`)); m != "kept" {
		t.Fatalf("the document was loaded again: the window's mark is %q", m)
	}

	// The batch ends: the block says done and drops the address it polled.
	for line := 31; line <= 40; line++ {
		endLine(t, e, id, line, time.Now())
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE batches SET status = 'completed', completed_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	block := `document.querySelector('[data-batch="` + id + `"] [data-testid="batch-lines"]')`
	browserRun(b, "wait for the batch to end", chromedp.Poll[bool](block+`.getAttribute("data-progress-src") === null && `+
		block+`.querySelector('[data-testid="progress-left"]').textContent === "done"`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
	if m := browserRun(b, "read the mark", chromedp.Evaluate[string](`window.progressMarker || ""`)); m != "kept" {
		t.Fatalf("the document was loaded again at the end: the window's mark is %q", m)
	}
}
