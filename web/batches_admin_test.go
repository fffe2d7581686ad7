package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/web"
)

// The admin's batch queue, as JSON and as a page: a batch waiting to be checked is counted, no
// line is in flight, and only admins see it (the other roles are TestAuthz's too).
func TestAdminBatchQueue(t *testing.T) {
	t.Parallel()
	var svc *batch.Service
	e := setupWith(t, func(cfg *web.Config, _ *pgxpool.Pool) { svc = cfg.Batches })
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st, err := svc.Stage(dev.AccountID, "in.jsonl", strings.NewReader(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := svc.Commit(ctx, st, batch.PurposeBatch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(ctx, batch.CreateInput{AccountID: dev.AccountID, APIKeyID: "k", InputFileID: f.ID,
			Endpoint: "/v1/chat/completions", CompletionWindow: batch.CompletionWindow}); err != nil {
			t.Fatal(err)
		}
	}

	var q struct {
		Batches   map[string]int `json:"batches"`
		Lines     map[string]int `json:"lines"`
		Oldest    *int64         `json:"oldest_pending_age_seconds"`
		LastHour  *int64         `json:"lines_last_hour"`
		PerMinute *float64       `json:"lines_per_minute"`
		Offerings []any          `json:"offerings"`
	}
	admin := e.token(t, "admin@example.com", demo.Password)
	wantStatus(t, e.call(t, admin, http.MethodGet, "/api/admin/batches", nil, &q), http.StatusOK)
	if q.Batches["validating"] != 2 || q.Batches["in_progress"] != 0 || len(q.Batches) != 4 {
		t.Fatalf("batches by status %v, want 2 validating of the four open statuses", q.Batches)
	}
	if q.Lines["pending"] != 0 || q.Lines["running"] != 0 || len(q.Lines) != 4 || q.Oldest != nil ||
		q.LastHour == nil || *q.LastHour != 0 || q.PerMinute == nil || q.Offerings == nil || len(q.Offerings) != 0 {
		t.Fatalf("queue %+v, want no lines yet", q)
	}
	for _, who := range []string{"developer@example.com", "finance@example.com", "provider@example.com"} {
		wantStatus(t, e.call(t, e.token(t, who, demo.Password), http.MethodGet, "/api/admin/batches", nil, nil), http.StatusForbidden)
	}

	ab, _ := loginBrowser(t, e, "admin@example.com")
	page := getPage(t, ab, e.srv.URL+"/admin/batches")
	if got := page.Find(`[data-testid="batches-validating"]`).Text(); got != "2" {
		t.Fatalf("validating batches on the page: %q", got)
	}
	if got := page.Find(`[data-testid="oldest-pending"]`).Text(); got != "none pending" {
		t.Fatalf("oldest pending: %q", got)
	}
	if page.Find(`[data-testid="no-batch-offerings"]`).Length() != 1 {
		t.Fatal("the page lists offerings serving batch lines, and none is")
	}
	db, _ := loginBrowser(t, e, "developer@example.com")
	res, err := db.Get(e.srv.URL + "/admin/batches")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	wantStatus(t, res, http.StatusForbidden)
}
