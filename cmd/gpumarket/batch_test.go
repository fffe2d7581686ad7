package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/openai/openai-go/v3"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/batch/s3fake"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// TestBatches is the Batch API end to end with the official SDK: files uploaded, batches checked,
// admitted and run through the gateway at the batch tier on simulated rigs, and their output and
// error files; each line's usage metered at the batch price and charged once.
func TestBatches(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGatewayWith(t, func(p *Platform) {
		p.batchPollEvery = 20 * time.Millisecond
	})
	t.Run("a batch completes: every custom_id answered once, metered at the batch price, the balance down by exactly that", b.testBatchCompletes)
	t.Run("a malformed file fails the batch with per-line errors and charges nothing", b.testBatchMalformed)
	t.Run("a batch the balance cannot cover fails before any charge", b.testBatchRefused)
	t.Run("another account's file and batch are 404", b.testBatchOtherAccount)
	t.Run("files page as OpenAI's: after, limit, order, has_more, first_id, last_id; only the account's own", b.testFilesPages)
	t.Run("cancel mid-batch: the lines that finished are in the output, the rest never sent", b.testBatchCancel)
	t.Run("a new scheduler after a stop mid-batch runs no line twice", b.testBatchRestart)
	t.Run("a worker lost mid-line: its metered line is not sent again, its unsent line is", b.testBatchLostWorker)
	t.Run("at expiry what completed is returned and charged, the rest expires unsent", b.testBatchExpiry)
	t.Run("browser: the batches page uploads a file, follows the batch and downloads its output", b.testBatchesPage)
}

// batchLine is a line of an input file.
func batchLine(customID, url, model string, maxTokens int) string {
	body := map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": "Summarise line " + customID}}}
	raw, _ := json.Marshal(map[string]any{"custom_id": customID, "method": "POST", "url": url, "body": body})
	return string(raw)
}

func chatLines(model string, n, maxTokens int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(batchLine(fmt.Sprintf("req-%d", i), "/v1/chat/completions", model, maxTokens))
		sb.WriteByte('\n')
	}
	return sb.String()
}

func (b *gatewayBundle) upload(t *testing.T, client *openai.Client, content string) *openai.FileObject {
	t.Helper()
	f, err := client.Files.New(b.ctx, openai.FileNewParams{File: openai.File(strings.NewReader(content), "input.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.ID, "file-") || f.Bytes != int64(len(content)) || f.Filename != "input.jsonl" || f.Purpose != "batch" {
		t.Fatalf("uploaded file %+v", f)
	}
	return f
}

func (b *gatewayBundle) createBatch(t *testing.T, client *openai.Client, fileID string) *openai.Batch {
	t.Helper()
	bt, err := client.Batches.New(b.ctx, openai.BatchNewParams{InputFileID: fileID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"job": t.Name()}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(bt.ID, "batch_") || bt.Status != openai.BatchStatusValidating || bt.Metadata["job"] != t.Name() {
		t.Fatalf("created batch %+v", bt)
	}
	return bt
}

// pollBatch polls until the batch reaches one of the statuses.
func (b *gatewayBundle) pollBatch(t *testing.T, client *openai.Client, id string, statuses ...openai.BatchStatus) *openai.Batch {
	t.Helper()
	var bt *openai.Batch
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		if bt, err = client.Batches.Get(b.ctx, id); err != nil {
			t.Fatal(err)
		}
		for _, s := range statuses {
			if bt.Status == s {
				return bt
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s is %s, waited for %v", id, bt.Status, statuses)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outputLine is a line of an output or error file.
type outputLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct{ Code, Message string } `json:"error"`
}

func (b *gatewayBundle) download(t *testing.T, client *openai.Client, fileID string) []outputLine {
	t.Helper()
	res, err := client.Files.Content(b.ctx, fileID)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []outputLine
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l outputLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// batchUsage waits until every answered line's request is metered, and returns the charges by
// request id, checking each is the batch tier's price of its tokens.
func (b *gatewayBundle) batchUsage(t *testing.T, requestIDs []string) money.Pico {
	t.Helper()
	var total money.Pico
	for _, id := range requestIDs {
		m := b.metered(t, id)
		if m.tier != string(catalog.TierBatch) {
			t.Fatalf("request %s metered at tier %s, want batch", id, m.tier)
		}
		if want := b.price(t, "batch", m.input, m.output); m.charge != want || m.output == 0 {
			t.Fatalf("request %s charged %s for %d+%d tokens, want %s at the batch price", id, m.charge, m.input, m.output, want)
		}
		total += m.charge
	}
	return total
}

func (b *gatewayBundle) usageRows(t *testing.T, accountID string) int {
	t.Helper()
	var n int
	if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FROM usage_events WHERE account_id = $1`, accountID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func gpumarketFigures(t *testing.T, bt *openai.Batch) (cost, estimate string) {
	t.Helper()
	var f struct {
		Cost     string `json:"cost_usd"`
		Estimate string `json:"estimate_usd"`
	}
	if err := json.Unmarshal([]byte(bt.JSON.ExtraFields["gpumarket"].Raw()), &f); err != nil {
		t.Fatalf("gpumarket figures of %s: %v", bt.ID, err)
	}
	return f.Cost, f.Estimate
}

func (b *gatewayBundle) testBatchCompletes(t *testing.T) {
	const model, lines = "bt-completes", 30
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	dev, _, secret := b.developer(t, "batch-completes", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	before := b.balance(t, dev.AccountID)
	api := &apiClient{t: t, base: b.p.URL()}
	hooks := newHookReceiver(t)
	api.do(api.login(dev.Email), http.MethodPost, "/api/webhooks",
		map[string]any{"url": hooks.URL, "event_types": []string{"batch.completed"}}, nil, http.StatusCreated)

	f := b.upload(t, client, chatLines(model, lines, 16))
	got, err := client.Files.Get(b.ctx, f.ID)
	if err != nil || got.ID != f.ID || got.Bytes != f.Bytes {
		t.Fatalf("GET file: %+v %v", got, err)
	}
	bt := b.createBatch(t, client, f.ID)
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusCompleted, openai.BatchStatusFailed)
	if bt.Status != openai.BatchStatusCompleted || bt.RequestCounts.Total != lines || bt.RequestCounts.Completed != lines ||
		bt.RequestCounts.Failed != 0 || bt.OutputFileID == "" || bt.ErrorFileID != "" || bt.InProgressAt == 0 ||
		bt.FinalizingAt == 0 || bt.CompletedAt == 0 || bt.ExpiresAt != bt.CreatedAt+24*3600 {
		t.Fatalf("completed batch %s: counts %+v, output %q, error %q, errors %+v", bt.Status, bt.RequestCounts, bt.OutputFileID, bt.ErrorFileID, bt.Errors)
	}
	out := b.download(t, client, bt.OutputFileID)
	seen := map[string]int{}
	var ids []string
	for _, l := range out {
		seen[l.CustomID]++
		if l.Response == nil || l.Response.StatusCode != 200 || l.Error != nil || !strings.HasPrefix(l.Response.RequestID, "req_") {
			t.Fatalf("output line %+v", l)
		}
		var cc openai.ChatCompletion
		if err := json.Unmarshal(l.Response.Body, &cc); err != nil || cc.Usage.CompletionTokens == 0 || len(cc.Choices) != 1 {
			t.Fatalf("line %s body %s: %v", l.CustomID, l.Response.Body, err)
		}
		ids = append(ids, l.Response.RequestID)
	}
	for i := range lines {
		if n := seen[fmt.Sprintf("req-%d", i)]; n != 1 {
			t.Fatalf("custom_id req-%d answered %d times", i, n)
		}
	}
	if len(out) != lines {
		t.Fatalf("%d output lines, want %d", len(out), lines)
	}
	charged := b.batchUsage(t, ids)
	if n := b.usageRows(t, dev.AccountID); n != lines {
		t.Fatalf("%d usage rows for the account, want one per line: %d", n, lines)
	}
	b.eventually(t, "the balance reflects the batch", func() bool { return b.balance(t, dev.AccountID) == before-charged })
	// The developer's endpoint is told the batch completed, with its counts and output file.
	b.eventually(t, "the webhook of the batch's completion arrives", func() bool { return len(hooks.bodies()) > 0 })
	var completed struct {
		Type string `json:"type"`
		Data struct {
			BatchID       string `json:"batch_id"`
			Status        string `json:"status"`
			OutputFileID  string `json:"output_file_id"`
			RequestCounts struct {
				Total, Completed, Failed int
			} `json:"request_counts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(hooks.bodies()[0], &completed); err != nil {
		t.Fatal(err)
	}
	if d := completed.Data; completed.Type != "batch.completed" || d.BatchID != bt.ID || d.Status != "completed" ||
		d.OutputFileID != bt.OutputFileID || d.RequestCounts.Total != lines || d.RequestCounts.Completed != lines {
		t.Fatalf("webhook %+v: want batch.completed of %s with %d lines", completed, bt.ID, lines)
	}
	// The developer's usage lists each line with its batch.
	var usage struct {
		Requests []struct {
			RequestID string `json:"request_id"`
			BatchID   string `json:"batch_id"`
		} `json:"requests"`
	}
	api.do(api.login(dev.Email), http.MethodGet, "/api/usage?limit=100", nil, &usage, http.StatusOK)
	inBatch := 0
	for _, u := range usage.Requests {
		if u.BatchID != bt.ID {
			t.Errorf("usage row %s names batch %q, want %s", u.RequestID, u.BatchID, bt.ID)
		}
		inBatch++
	}
	if inBatch != lines {
		t.Errorf("%d usage rows on /api/usage, want the batch's %d", inBatch, lines)
	}
	bt, err = client.Batches.Get(b.ctx, bt.ID)
	if err != nil {
		t.Fatal(err)
	}
	cost, estimate := gpumarketFigures(t, bt)
	if cost != charged.Decimal(12) {
		t.Fatalf("batch cost %s, metered %s", cost, charged.Decimal(12))
	}
	// The estimate is the bound the gateway puts on each line: its body's bytes plus 512 input
	// tokens, its max_tokens output tokens.
	est, err := money.ParseUSD(estimate)
	if err != nil || est <= charged {
		t.Fatalf("estimate %s (%v) is not above the cost %s", estimate, err, charged)
	}
	t.Logf("%d lines: charged %s, estimate %s, balance %s -> %s", lines, charged, estimate, before, before-charged)

	page, err := client.Batches.List(b.ctx, openai.BatchListParams{Limit: openai.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != bt.ID {
		t.Fatalf("list batches: %+v %v", page, err)
	}
	if _, err := client.Files.Delete(b.ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	_, err = client.Files.Get(b.ctx, f.ID)
	apiError(t, err, 404, "invalid_request_error", "")
}

func (b *gatewayBundle) testBatchMalformed(t *testing.T) {
	const model = "bt-malformed"
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	dev, _, secret := b.developer(t, "batch-malformed", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	before := b.balance(t, dev.AccountID)
	content := strings.Join([]string{
		batchLine("ok-1", "/v1/chat/completions", model, 8),
		`{"custom_id": "broken", "method": "POST", "url": "/v1/chat/completions", "body": {`,
		batchLine("ok-1", "/v1/chat/completions", model, 8),
		batchLine("wrong-url", "/v1/images/generations", model, 8),
		batchLine("other-endpoint", "/v1/embeddings", model, 8),
		batchLine("unknown-model", "/v1/chat/completions", "no-such-model", 8),
	}, "\n") + "\n"
	f := b.upload(t, client, content)
	bt := b.createBatch(t, client, f.ID)
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusFailed, openai.BatchStatusCompleted)
	want := []struct {
		code  string
		line  int64
		param string
	}{{"invalid_json_line", 2, ""}, {"duplicate_custom_id", 3, "custom_id"}, {"invalid_url", 4, "url"},
		{"mismatched_endpoint", 5, "url"}, {"model_not_found", 6, "body.model"}}
	if bt.Status != openai.BatchStatusFailed || bt.FailedAt == 0 || len(bt.Errors.Data) != len(want) || bt.RequestCounts.Total != 0 {
		t.Fatalf("batch %s, errors %+v, counts %+v", bt.Status, bt.Errors.Data, bt.RequestCounts)
	}
	for i, w := range want {
		e := bt.Errors.Data[i]
		if e.Code != w.code || e.Line != w.line || e.Param != w.param || e.Message == "" {
			t.Fatalf("error %d: %+v, want %+v", i, e, w)
		}
	}
	if n := b.usageRows(t, dev.AccountID); n != 0 {
		t.Fatalf("%d usage rows for a batch that failed validation", n)
	}
	if after := b.balance(t, dev.AccountID); after != before {
		t.Fatalf("balance %s -> %s for a batch that failed validation", before, after)
	}
}

func (b *gatewayBundle) testBatchRefused(t *testing.T) {
	const model = "bt-refused"
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	// 3 lines bounded by 100,000 output tokens each cost up to 3 x 100,000 x $0.16/M = $0.048 at the batch price.
	credit := money.PicoPerUSD / 100
	dev, _, secret := b.developer(t, "batch-refused", credit, accounts.NewKeyInput{})
	client := b.client(secret)
	bt := b.createBatch(t, client, b.upload(t, client, chatLines(model, 3, 100_000)).ID)
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusFailed, openai.BatchStatusCompleted)
	if bt.Status != openai.BatchStatusFailed || len(bt.Errors.Data) != 1 || bt.Errors.Data[0].Code != "insufficient_quota" {
		t.Fatalf("batch %s errors %+v", bt.Status, bt.Errors.Data)
	}
	if _, estimate := gpumarketFigures(t, bt); estimate == "" || !strings.HasPrefix(estimate, "0.048") {
		t.Fatalf("estimate %s", estimate)
	}
	if n := b.usageRows(t, dev.AccountID); n != 0 || b.balance(t, dev.AccountID) != credit {
		t.Fatalf("%d usage rows, balance %s for a refused batch", n, b.balance(t, dev.AccountID))
	}
}

func (b *gatewayBundle) testBatchOtherAccount(t *testing.T) {
	const model = "bt-other"
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	_, _, ownerSecret := b.developer(t, "batch-owner", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	_, _, otherSecret := b.developer(t, "batch-other", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	owner, other := b.client(ownerSecret), b.client(otherSecret)
	f := b.upload(t, owner, chatLines(model, 2, 8))
	bt := b.createBatch(t, owner, f.ID)

	_, err := other.Files.Get(b.ctx, f.ID)
	apiError(t, err, 404, "invalid_request_error", "")
	_, err = other.Files.Content(b.ctx, f.ID)
	apiError(t, err, 404, "invalid_request_error", "")
	_, err = other.Files.Delete(b.ctx, f.ID)
	apiError(t, err, 404, "invalid_request_error", "")
	_, err = other.Batches.New(b.ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	apiError(t, err, 404, "invalid_request_error", "")
	_, err = other.Batches.Get(b.ctx, bt.ID)
	apiError(t, err, 404, "invalid_request_error", "")
	_, err = other.Batches.Cancel(b.ctx, bt.ID)
	apiError(t, err, 404, "invalid_request_error", "")
	list, err := other.Files.List(b.ctx, openai.FileListParams{})
	if err != nil || len(list.Data) != 0 {
		t.Fatalf("the other account lists %d files (%v)", len(list.Data), err)
	}
	b.pollBatch(t, owner, bt.ID, openai.BatchStatusCompleted)
}

func (b *gatewayBundle) testFilesPages(t *testing.T) {
	const model = "bt-pages"
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	_, _, ownerSecret := b.developer(t, "files-owner", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	_, _, otherSecret := b.developer(t, "files-other", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	owner, other := b.client(ownerSecret), b.client(otherSecret)
	var ids []string // oldest first
	for i := range 3 {
		ids = append(ids, b.upload(t, owner, chatLines(model, i+1, 8)).ID)
	}
	theirs := b.upload(t, other, chatLines(model, 1, 8)).ID

	// The default order is newest first.
	page, err := owner.Files.List(b.ctx, openai.FileListParams{Limit: openai.Int(2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileIDs(page.Data); !page.HasMore || fmt.Sprint(got) != fmt.Sprint([]string{ids[2], ids[1]}) {
		t.Fatalf("first page %v has_more %v, want [%s %s] and more", got, page.HasMore, ids[2], ids[1])
	}
	if first, last := page.JSON.ExtraFields["first_id"].Raw(), page.JSON.ExtraFields["last_id"].Raw(); first != `"`+ids[2]+`"` || last != `"`+ids[1]+`"` {
		t.Fatalf("first_id %s last_id %s", first, last)
	}
	page, err = owner.Files.List(b.ctx, openai.FileListParams{Limit: openai.Int(2), After: openai.String(ids[1])})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileIDs(page.Data); page.HasMore || fmt.Sprint(got) != fmt.Sprint([]string{ids[0]}) {
		t.Fatalf("second page %v has_more %v, want [%s] and no more", got, page.HasMore, ids[0])
	}

	// Oldest first, and the SDK's own pager following after= from page to page.
	var all []string
	iter := owner.Files.ListAutoPaging(b.ctx, openai.FileListParams{Limit: openai.Int(1), Order: openai.FileListParamsOrderAsc})
	for iter.Next() {
		all = append(all, iter.Current().ID)
	}
	if err := iter.Err(); err != nil || fmt.Sprint(all) != fmt.Sprint(ids) {
		t.Fatalf("paged oldest first one at a time: %v (%v), want %v", all, err, ids)
	}
	page, err = owner.Files.List(b.ctx, openai.FileListParams{})
	if err != nil || page.HasMore || len(page.Data) != 3 {
		t.Fatalf("default page: %v has_more %v (%v)", fileIDs(page.Data), page.HasMore, err)
	}

	// The other account sees its one file; an after naming the owner's file is not found.
	page, err = other.Files.List(b.ctx, openai.FileListParams{})
	if err != nil || fmt.Sprint(fileIDs(page.Data)) != fmt.Sprint([]string{theirs}) || page.HasMore {
		t.Fatalf("the other account lists %v has_more %v (%v), want only [%s]", fileIDs(page.Data), page.HasMore, err, theirs)
	}
	_, err = other.Files.List(b.ctx, openai.FileListParams{After: openai.String(ids[1])})
	apiError(t, err, 404, "invalid_request_error", "")
}

func fileIDs(files []openai.FileObject) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, f.ID)
	}
	return out
}

// slowRig lists a batch-tier offering on a rig with a benchmark profile's latency, so that a
// batch's lines take long enough to act mid-batch.
func (b *gatewayBundle) slowRig(t *testing.T, model string) catalog.Offering {
	t.Helper()
	profile, ok := simulation.Lookup("meta-llama/Meta-Llama-3-8B-Instruct", "rtx-4090", 4)
	if !ok {
		profile = simulation.Profiles()[0]
	}
	return b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000, profile: profile})
}

// batchQueue is the admin's GET /api/admin/batches.
type batchQueue struct {
	Batches   map[string]int   `json:"batches"`
	Lines     map[string]int64 `json:"lines"`
	Oldest    *int64           `json:"oldest_pending_age_seconds"`
	LastHour  int64            `json:"lines_last_hour"`
	PerMinute float64          `json:"lines_per_minute"`
	Offerings []struct {
		OfferingID string `json:"offering_id"`
		Model      string `json:"model"`
		Tier       string `json:"tier"`
		InFlight   int    `json:"batch_lines_in_flight"`
		Capacity   int    `json:"capacity"`
	} `json:"offerings"`
}

func (b *gatewayBundle) adminBatchQueue(t *testing.T) batchQueue {
	t.Helper()
	var login struct {
		Token string `json:"token"`
	}
	res, err := http.Post(b.p.URL()+"/api/auth/login", "application/json",
		strings.NewReader(`{"email": "admin@example.com", "password": "`+demo.Password+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&login)
	res.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, b.p.URL()+"/api/admin/batches", nil)
	req.Header.Set("Authorization", "Bearer "+login.Token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var q batchQueue
	if err := json.NewDecoder(res.Body).Decode(&q); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/admin/batches: %d %v", res.StatusCode, err)
	}
	return q
}

// lineCounts are a batch's lines by status and their attempts.
func (b *gatewayBundle) lineCounts(t *testing.T, batchID string) (done, pending, attempts int) {
	t.Helper()
	if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'pending'),
		coalesce(sum(attempts), 0) FROM batch_lines WHERE batch_id = $1`, batchID).Scan(&done, &pending, &attempts); err != nil {
		t.Fatal(err)
	}
	return done, pending, attempts
}

func (b *gatewayBundle) testBatchCancel(t *testing.T) {
	const model, lines = "bt-cancel", 60
	o := b.slowRig(t, model)
	dev, _, secret := b.developer(t, "batch-cancel", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	bt := b.createBatch(t, client, b.upload(t, client, chatLines(model, lines, 64)).ID)
	b.eventually(t, "some lines are done", func() bool { done, _, _ := b.lineCounts(t, bt.ID); return done >= 2 })

	// Mid-batch the admin's queue shows it: its lines, and the slow rig serving up to the
	// scheduler's 4 workers' lines against the 64 its heartbeat reports.
	var q batchQueue
	b.eventually(t, "the admin sees a batch line in flight", func() bool {
		q = b.adminBatchQueue(t)
		return len(q.Offerings) == 1 && q.Offerings[0].InFlight > 0
	})
	if off := q.Offerings[0]; off.OfferingID != o.ID || off.Model != model || off.Tier != "batch" || off.InFlight > 4 || off.Capacity != 64 {
		t.Fatalf("offering serving batch lines %+v, want %s with 1 to 4 in flight of 64", off, o.ID)
	}
	if q.Batches["in_progress"] != 1 || q.Lines["done"] < 2 || q.Lines["pending"]+q.Lines["running"]+q.Lines["done"]+q.Lines["failed"] != lines ||
		q.Oldest == nil || *q.Oldest < 0 || q.LastHour < q.Lines["done"] || q.PerMinute != float64(q.LastHour)/60 {
		t.Fatalf("queue mid-batch %+v", q)
	}
	t.Logf("queue mid-batch: lines %v, %d ended in the hour, oldest pending %d s, %d in flight of %d",
		q.Lines, q.LastHour, *q.Oldest, q.Offerings[0].InFlight, q.Offerings[0].Capacity)
	c, err := client.Batches.Cancel(b.ctx, bt.ID)
	if err != nil || (c.Status != openai.BatchStatusCancelling && c.Status != openai.BatchStatusCancelled) || c.CancellingAt == 0 {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusCancelled)
	done, pending, attempts := b.lineCounts(t, bt.ID)
	if bt.RequestCounts.Completed != int64(done) || done >= lines || pending == 0 || attempts != done || bt.CancelledAt == 0 {
		t.Fatalf("cancelled batch: counts %+v, %d done, %d pending, %d attempts", bt.RequestCounts, done, pending, attempts)
	}
	out := b.download(t, client, bt.OutputFileID)
	var ids []string
	for _, l := range out {
		ids = append(ids, l.Response.RequestID)
	}
	if len(out) != done {
		t.Fatalf("%d output lines, %d done", len(out), done)
	}
	charged := b.batchUsage(t, ids)
	time.Sleep(200 * time.Millisecond) // nothing more arrives: no line is sent after the cancel
	if n := b.usageRows(t, dev.AccountID); n != done {
		t.Fatalf("%d usage rows, %d lines done", n, done)
	}
	t.Logf("cancelled after %d of %d lines, charged %s", done, lines, charged)
}

func (b *gatewayBundle) testBatchRestart(t *testing.T) {
	const model, lines = "bt-restart", 40
	b.slowRig(t, model)
	dev, _, secret := b.developer(t, "batch-restart", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	bt := b.createBatch(t, client, b.upload(t, client, chatLines(model, lines, 24)).ID)
	b.eventually(t, "some lines are done", func() bool { done, _, _ := b.lineCounts(t, bt.ID); return done >= 3 })
	b.p.batchScheduler.Close() // the lines in flight finish and are recorded
	doneAtStop, pendingAtStop, _ := b.lineCounts(t, bt.ID)
	var running int
	if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FROM batch_lines WHERE batch_id = $1 AND status = 'running'`, bt.ID).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 0 || pendingAtStop == 0 {
		t.Fatalf("after the stop: %d running, %d pending", running, pendingAtStop)
	}
	time.Sleep(100 * time.Millisecond)
	if done, _, _ := b.lineCounts(t, bt.ID); done != doneAtStop {
		t.Fatalf("lines ran after the scheduler stopped: %d -> %d", doneAtStop, done)
	}
	next := b.p.newBatchScheduler()
	next.Start(context.WithoutCancel(b.ctx))
	b.p.batchScheduler = next
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusCompleted)
	done, _, attempts := b.lineCounts(t, bt.ID)
	if done != lines || attempts != lines || bt.RequestCounts.Completed != lines {
		t.Fatalf("after the restart: %d done, %d attempts, counts %+v", done, attempts, bt.RequestCounts)
	}
	out := b.download(t, client, bt.OutputFileID)
	seen := map[string]bool{}
	var ids []string
	for _, l := range out {
		if seen[l.CustomID] {
			t.Fatalf("custom_id %s answered twice", l.CustomID)
		}
		seen[l.CustomID] = true
		ids = append(ids, l.Response.RequestID)
	}
	b.batchUsage(t, ids)
	if n := b.usageRows(t, dev.AccountID); n != lines || len(out) != lines {
		t.Fatalf("%d usage rows and %d output lines, want %d of each", n, len(out), lines)
	}
	t.Logf("stopped with %d of %d done; the new scheduler ran the other %d once each", doneAtStop, lines, lines-doneAtStop)
}

// restartScheduler starts a new scheduler in place of the platform's, which must be closed.
func (b *gatewayBundle) restartScheduler() {
	next := b.p.newBatchScheduler()
	next.Start(context.WithoutCancel(b.ctx))
	b.p.batchScheduler = next
}

func (b *gatewayBundle) testBatchLostWorker(t *testing.T) {
	const model, lines = "bt-lost", 12
	b.slowRig(t, model)
	dev, _, secret := b.developer(t, "batch-lost", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	bt := b.createBatch(t, client, b.upload(t, client, chatLines(model, lines, 16)).ID)
	b.eventually(t, "some lines are done", func() bool { done, _, _ := b.lineCounts(t, bt.ID); return done >= 2 })
	b.p.batchScheduler.Close()
	// Make it as if a worker had died twice: once after its line was answered and metered but
	// before the answer was recorded, once right after claiming a line.
	var answeredLine int
	var answeredReq string
	var unsentLine int
	if err := b.p.pool.QueryRow(b.ctx, `SELECT line, request_id FROM batch_lines WHERE batch_id = $1 AND status = 'done'
		ORDER BY line LIMIT 1`, bt.ID).Scan(&answeredLine, &answeredReq); err != nil {
		t.Fatal(err)
	}
	b.metered(t, answeredReq)
	if err := b.p.pool.QueryRow(b.ctx, `SELECT line FROM batch_lines WHERE batch_id = $1 AND status = 'pending'
		ORDER BY line LIMIT 1`, bt.ID).Scan(&unsentLine); err != nil {
		t.Fatal(err)
	}
	if _, err := b.p.pool.Exec(b.ctx, `UPDATE batch_lines SET status = 'running', claimed_at = now() - interval '1 hour',
		request_id = NULL, status_code = NULL, response = NULL WHERE batch_id = $1 AND line = $2`, bt.ID, answeredLine); err != nil {
		t.Fatal(err)
	}
	if _, err := b.p.pool.Exec(b.ctx, `UPDATE batch_lines SET status = 'running', attempts = attempts + 1,
		claimed_at = now() - interval '1 hour' WHERE batch_id = $1 AND line = $2`, bt.ID, unsentLine); err != nil {
		t.Fatal(err)
	}
	b.p.batchLease = time.Minute
	b.restartScheduler()
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusCompleted)
	if bt.RequestCounts.Completed != lines-1 || bt.RequestCounts.Failed != 1 || bt.ErrorFileID == "" {
		t.Fatalf("counts %+v, error file %q", bt.RequestCounts, bt.ErrorFileID)
	}
	errs := b.download(t, client, bt.ErrorFileID)
	if len(errs) != 1 || errs[0].Error == nil || errs[0].Error.Code != "batch_line_interrupted" {
		t.Fatalf("error file %+v", errs)
	}
	var status, reqID string
	var attempts int
	if err := b.p.pool.QueryRow(b.ctx, `SELECT status, request_id FROM batch_lines WHERE batch_id = $1 AND line = $2`,
		bt.ID, answeredLine).Scan(&status, &reqID); err != nil || status != "failed" || reqID != answeredReq {
		t.Fatalf("the metered line: %s %s (%v), want failed with %s", status, reqID, err, answeredReq)
	}
	if err := b.p.pool.QueryRow(b.ctx, `SELECT status, attempts FROM batch_lines WHERE batch_id = $1 AND line = $2`,
		bt.ID, unsentLine).Scan(&status, &attempts); err != nil || status != "done" || attempts != 2 {
		t.Fatalf("the unsent line: %s after %d attempts (%v), want done after 2", status, attempts, err)
	}
	var ids []string
	for _, l := range b.download(t, client, bt.OutputFileID) {
		ids = append(ids, l.Response.RequestID)
	}
	charged := b.batchUsage(t, append(ids, answeredReq))
	if n := b.usageRows(t, dev.AccountID); n != lines {
		t.Fatalf("%d usage rows, want one per line: %d", n, lines)
	}
	bt, err := client.Batches.Get(b.ctx, bt.ID) // the cost, now that every line is metered
	if err != nil {
		t.Fatal(err)
	}
	cost, _ := gpumarketFigures(t, bt)
	if cost != charged.Decimal(12) {
		t.Fatalf("batch cost %s, metered %s", cost, charged.Decimal(12))
	}
}

func (b *gatewayBundle) testBatchExpiry(t *testing.T) {
	const model, lines = "bt-expiry", 40
	b.slowRig(t, model)
	dev, _, secret := b.developer(t, "batch-expiry", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	bt := b.createBatch(t, client, b.upload(t, client, chatLines(model, lines, 24)).ID)
	b.eventually(t, "some lines are done", func() bool { done, _, _ := b.lineCounts(t, bt.ID); return done >= 2 })
	if _, err := b.p.pool.Exec(b.ctx, `UPDATE batches SET expires_at = now() - interval '1 second' WHERE id = $1`, bt.ID); err != nil {
		t.Fatal(err)
	}
	bt = b.pollBatch(t, client, bt.ID, openai.BatchStatusExpired, openai.BatchStatusCompleted)
	done, _, attempts := b.lineCounts(t, bt.ID)
	if bt.Status != openai.BatchStatusExpired || bt.ExpiredAt == 0 || done == lines || attempts != done ||
		bt.RequestCounts.Completed != int64(done) || bt.RequestCounts.Failed != int64(lines-done) {
		t.Fatalf("batch %s: counts %+v, %d done, %d attempts", bt.Status, bt.RequestCounts, done, attempts)
	}
	out, errs := b.download(t, client, bt.OutputFileID), b.download(t, client, bt.ErrorFileID)
	for _, e := range errs {
		if e.Error == nil || e.Error.Code != "batch_expired" || e.Response != nil {
			t.Fatalf("error line %+v", e)
		}
	}
	if len(out) != done || len(errs) != lines-done {
		t.Fatalf("%d output and %d error lines, %d done of %d", len(out), len(errs), done, lines)
	}
	var ids []string
	for _, l := range out {
		ids = append(ids, l.Response.RequestID)
	}
	b.batchUsage(t, ids)
	if n := b.usageRows(t, dev.AccountID); n != done {
		t.Fatalf("%d usage rows, %d lines done", n, done)
	}
}

func (b *gatewayBundle) testBatchesPage(t *testing.T) {
	const model, lines = "bt-page", 5
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	dev, key, _ := b.developer(t, "batch-page", 20*money.PicoPerUSD, accounts.NewKeyInput{Name: "page key"})
	input := filepath.Join(t.TempDir(), "page.jsonl")
	if err := os.WriteFile(input, []byte(chatLines(model, lines, 8)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 3*journeyTimeout) // the batch runs while the tab waits
	t.Cleanup(cancel)
	tab := newJourneyTab(t, ctx, b.p.URL())
	tab.open("/login", http.StatusOK)
	tab.do("fill the login form", journeyFill("#email", dev.Email), journeyFill("#password", demo.Password))
	tab.navigate("log in", journeyClick(byTestID("login-submit")))
	tab.open("/batches", http.StatusOK)
	if n := tab.count(byTestID("no-batches")); n != 1 {
		t.Fatalf("a new account's batches page lists batches")
	}
	tab.do("choose the file and the key", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{input}, chromedp.NodeReady),
		chromedp.SetValue(chromedp.CSS("#key"), key.ID, chromedp.NodeReady))
	if res := tab.navigate("start the batch", journeyClick(byTestID("batch-submit"))); res == nil || res.StatusCode != http.StatusOK {
		t.Fatalf("starting the batch: %+v", res)
	}
	id := tab.attr(byTestID("batch"), "data-batch")
	if !strings.HasPrefix(id, "batch_") {
		t.Fatalf("the page lists batch %q", id)
	}
	// As long as pollBatch waits: on a loaded machine five lines can take longer than
	// eventually's 20 s.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		tab.open("/batches", http.StatusOK)
		if tab.attr(byTestID("batch"), "data-status") == "completed" {
			break
		}
		if time.Now().After(deadline) {
			tab.logPage()
			t.Fatal("the page never showed the batch completed")
		}
	}
	if got := tab.text(byTestID("batch-progress")); !strings.Contains(got, fmt.Sprintf("%d done, 0 failed of %d", lines, lines)) {
		t.Fatalf("progress reads %q", got)
	}
	// The output, downloaded as the page links it, under the browser's session.
	href := tab.attr(byTestID("batch-output"), "href")
	body := tab.eval("download the output", fmt.Sprintf(`(() => { const x = new XMLHttpRequest(); x.open("GET", %q, false); x.send();
		return x.status + "\n" + x.responseText })()`, href))
	status, content, _ := strings.Cut(body, "\n")
	seen := map[string]bool{}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(content), "\n") {
		var l outputLine
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Response == nil || l.Response.StatusCode != 200 || seen[l.CustomID] {
			t.Fatalf("downloaded output line %q: %v", line, err)
		}
		seen[l.CustomID] = true
		ids = append(ids, l.Response.RequestID)
	}
	if status != "200" || len(seen) != lines {
		t.Fatalf("download: status %s, %d lines", status, len(seen))
	}
	charged := b.batchUsage(t, ids)
	tab.open("/batches", http.StatusOK)
	if got, want := tab.text(byTestID("batch-cost")), money.FormatPrecisePico(charged); got != want {
		t.Fatalf("the page shows a cost of %s, the meter charged %s", got, want)
	}
	// The usage page lists each line's request with the batch it served.
	tab.open("/usage", http.StatusOK)
	for _, reqID := range ids {
		row := fmt.Sprintf(`%s[data-request-id=%q]`, byTestID("request"), reqID)
		if got := tab.text(row + " " + byTestID("batch-id")); got != id {
			t.Fatalf("the usage page shows request %s of batch %q, want %s", reqID, got, id)
		}
	}
}

// TestBatchesOnS3 runs a small batch on a platform whose batch files are on an S3-compatible
// store (s3fake in this process): the input, output and nothing else are objects of the bucket,
// and the data directory holds no file of its own.
func TestBatchesOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	endpoint := s3fake.Start(t, "gpumarket-batches")
	b := setupGatewayConfig(t, func(c *Config) {
		c.BatchS3 = batch.S3Config{Endpoint: endpoint, Bucket: "gpumarket-batches", Prefix: "batch-files/",
			AccessKey: "test-access", SecretKey: "test-secret", Region: "us-east-1"}
	}, func(p *Platform) { p.batchPollEvery = 20 * time.Millisecond })
	const model, lines = "bt-s3", 4
	b.list(t, rigSpec{model: model, ask: 60_000, p99: 2000})
	_, _, secret := b.developer(t, "batch-s3", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)

	f := b.upload(t, client, chatLines(model, lines, 16))
	bt := b.pollBatch(t, client, b.createBatch(t, client, f.ID).ID, openai.BatchStatusCompleted, openai.BatchStatusFailed)
	if bt.Status != openai.BatchStatusCompleted || bt.RequestCounts.Completed != lines || bt.OutputFileID == "" {
		t.Fatalf("batch %s: counts %+v, output %q, errors %+v", bt.Status, bt.RequestCounts, bt.OutputFileID, bt.Errors)
	}
	var ids []string
	for _, l := range b.download(t, client, bt.OutputFileID) {
		if l.Response == nil || l.Response.StatusCode != http.StatusOK {
			t.Fatalf("output line %+v", l)
		}
		ids = append(ids, l.CustomID)
	}
	if strings.Join(ids, ",") != "req-0,req-1,req-2,req-3" {
		t.Fatalf("output custom ids %v", ids)
	}

	host, _, err := batch.S3Endpoint(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := minio.New(host, &minio.Options{Creds: credentials.NewStaticV4("test-access", "test-secret", ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for o := range s3.ListObjects(b.ctx, "gpumarket-batches", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if want := "batch-files/" + f.ID + ",batch-files/" + bt.OutputFileID; strings.Join(keys, ",") != want {
		t.Fatalf("objects %v, want %s", keys, want)
	}
	if list, err := os.ReadDir(filepath.Join(b.p.cfg.DataDir, "batch-files")); err == nil && len(list) > 0 {
		t.Fatalf("files kept in the data directory too: %d", len(list))
	}
}

// hookReceiver is a webhook endpoint of a test's: it answers 200 and keeps each body.
type hookReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got [][]byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, body)
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) bodies() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.got...)
}
