package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/webhooks"
)

var testKey = []byte(strings.Repeat("k", 32))

// world is a service on a fresh database with an account and its user.
type world struct {
	pool    *pgxpool.Pool
	svc     *webhooks.Service
	account string
	user    string
}

func setup(t *testing.T) world {
	t.Helper()
	dbtest.SkipShort(t)
	pool := dbtest.New(t)
	account := fixtures.Account(t, pool, "Hook Co")
	user := fixtures.User(t, pool, account, "hooks@example.com", "developer")
	return world{pool: pool, svc: newService(pool, true), account: account, user: user}
}

func newService(pool *pgxpool.Pool, allowPrivate bool) *webhooks.Service {
	return webhooks.New(webhooks.Config{Pool: pool, Key: testKey, AllowPrivate: allowPrivate,
		Schedule: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}, Timeout: 2 * time.Second})
}

// receiver is an endpoint that answers each request with the next of its statuses (the last
// one again once they run out) and keeps what it got.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []received
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		status := r.statuses[min(len(r.got), len(r.statuses))-1]
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte("answer " + http.StatusText(status)))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (w world) endpoint(t *testing.T, url string, types ...string) (webhooks.Endpoint, string) {
	t.Helper()
	e, secret, err := w.svc.CreateEndpoint(context.Background(), w.account, w.user, webhooks.EndpointInput{URL: url, EventTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return e, secret
}

func (w world) emit(t *testing.T, eventType, eventID string, data any) {
	t.Helper()
	err := pgx.BeginFunc(context.Background(), w.pool, func(tx pgx.Tx) error {
		return w.svc.Emit(context.Background(), tx, w.account, eventType, eventID, data)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// settle runs the worker until every delivery of the account is delivered or failed.
func (w world) settle(t *testing.T, svc *webhooks.Service) []webhooks.Delivery {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := svc.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
		list, err := w.svc.Deliveries(context.Background(), w.account, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, d := range list {
			done = done && d.Status != webhooks.StatusPending
		}
		if done {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries still pending: %+v", list)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWebhookSignatureVerifiesWithTheStandardWebhooksLibrary(t *testing.T) {
	w := setup(t)
	r := newReceiver(t, 200)
	_, secret := w.endpoint(t, r.URL)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q: want whsec_ and base64", secret)
	}
	w.emit(t, "invoice.issued", "invoice.issued:1", map[string]any{"invoice_id": "inv-1", "total_usd": "12.34"})
	list := w.settle(t, w.svc)
	if len(list) != 1 || list[0].Status != webhooks.StatusDelivered {
		t.Fatalf("deliveries %+v: want one delivered", list)
	}
	got := r.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.Verify(got[0].body, got[0].header); err != nil {
		t.Fatalf("the library refuses our signature: %v (headers %v)", err, got[0].header)
	}
	// The check can fail: a changed body, or another secret, does not verify.
	if err := verifier.Verify(append([]byte(" "), got[0].body...), got[0].header); err == nil {
		t.Fatal("a changed body verified")
	}
	other, _ := standardwebhooks.NewWebhook("whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err := other.Verify(got[0].body, got[0].header); err == nil {
		t.Fatal("another secret verified")
	}
	if id := got[0].header.Get("webhook-id"); id != list[0].EventID || !strings.HasPrefix(id, "msg_") {
		t.Fatalf("webhook-id %q, want the event's id %q", id, list[0].EventID)
	}
	var m struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &m); err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, m.Timestamp); err != nil || m.Type != "invoice.issued" || m.Data["total_usd"] != "12.34" {
		t.Fatalf("body %s: want the type, an RFC 3339 timestamp and the data", got[0].body)
	}
}

func TestWebhookRetriedAfter500IsDeliveredWithBothAttemptsLogged(t *testing.T) {
	w := setup(t)
	r := newReceiver(t, 500, 200)
	w.endpoint(t, r.URL)
	w.emit(t, "batch.completed", "batch.completed:b1", map[string]string{"batch_id": "b1"})
	list := w.settle(t, w.svc)
	if len(list) != 1 || list[0].Status != webhooks.StatusDelivered {
		t.Fatalf("deliveries %+v: want one delivered", list)
	}
	a := list[0].Attempts
	if len(a) != 2 || *a[0].StatusCode != 500 || *a[1].StatusCode != 200 {
		t.Fatalf("attempts %+v: want 500 then 200", a)
	}
	if a[0].ResponseBody != "answer Internal Server Error" || a[0].Error == "" || a[1].Error != "" {
		t.Fatalf("attempts %+v: want each answer's body and the failure's reason", a)
	}
	got := r.requests()
	if len(got) != 2 || got[0].header.Get("webhook-id") != got[1].header.Get("webhook-id") {
		t.Fatalf("%d requests: want 2 with the same webhook-id", len(got))
	}
}

func TestWebhookFailsOnceTheScheduleRunsOut(t *testing.T) {
	w := setup(t)
	r := newReceiver(t, 503)
	w.endpoint(t, r.URL)
	w.emit(t, "batch.completed", "batch.completed:b2", map[string]string{"batch_id": "b2"})
	list := w.settle(t, w.svc)
	// Two waits in the schedule: three attempts, then failed.
	if len(list) != 1 || list[0].Status != webhooks.StatusFailed || len(list[0].Attempts) != 3 || len(r.requests()) != 3 {
		t.Fatalf("deliveries %+v: want one failed after 3 attempts", list)
	}
}

func TestWebhookRedirectIsNotFollowed(t *testing.T) {
	w := setup(t)
	target := newReceiver(t, 200)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(redirect.Close)
	w.endpoint(t, redirect.URL)
	w.emit(t, "batch.completed", "batch.completed:b3", map[string]string{"batch_id": "b3"})
	list := w.settle(t, w.svc)
	if len(target.requests()) != 0 {
		t.Fatal("the redirect was followed")
	}
	if list[0].Status != webhooks.StatusFailed || *list[0].Attempts[0].StatusCode != http.StatusFound ||
		!strings.Contains(list[0].Attempts[0].Error, "redirects are not followed") {
		t.Fatalf("delivery %+v: want failed attempts that name the redirect", list[0])
	}
}

func TestWebhookPrivateAddressIsRefusedUnlessAllowed(t *testing.T) {
	w := setup(t)
	strict := newService(w.pool, false)
	for _, url := range []string{"http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://10.1.2.3/hook", "https://169.254.169.254/latest",
		"https://localhost/hook", "https://[::1]/hook"} {
		_, _, err := strict.CreateEndpoint(context.Background(), w.account, w.user, webhooks.EndpointInput{URL: url})
		if services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("%s: %v, want refused as invalid", url, err)
		}
	}
	// An endpoint added while allowed (or whose name later resolves to a private address) is
	// refused as it is dialled.
	r := newReceiver(t, 200)
	w.endpoint(t, r.URL)
	w.emit(t, "batch.completed", "batch.completed:b4", map[string]string{"batch_id": "b4"})
	list := w.settle(t, strict)
	if len(r.requests()) != 0 {
		t.Fatal("a private address was reached")
	}
	if list[0].Status != webhooks.StatusFailed || list[0].Attempts[0].StatusCode != nil ||
		!strings.Contains(list[0].Attempts[0].Error, "not a public one") {
		t.Fatalf("delivery %+v: want refused attempts", list[0])
	}
}

func TestWebhookEventEmittedTwiceIsDeliveredOnce(t *testing.T) {
	w := setup(t)
	r := newReceiver(t, 200)
	w.endpoint(t, r.URL)
	w.emit(t, "invoice.issued", "invoice.issued:2", map[string]string{"invoice_id": "2"})
	w.emit(t, "invoice.issued", "invoice.issued:2", map[string]string{"invoice_id": "2"})
	list := w.settle(t, w.svc)
	if len(list) != 1 || len(r.requests()) != 1 {
		t.Fatalf("%d deliveries, %d requests: want 1 and 1", len(list), len(r.requests()))
	}
	// An event emitted in a transaction that rolls back is not sent.
	_ = pgx.BeginFunc(context.Background(), w.pool, func(tx pgx.Tx) error {
		if err := w.svc.Emit(context.Background(), tx, w.account, "invoice.issued", "invoice.issued:3", map[string]string{}); err != nil {
			t.Fatal(err)
		}
		return io.EOF
	})
	if list := w.settle(t, w.svc); len(list) != 1 {
		t.Fatalf("%d deliveries: a rolled-back event was kept", len(list))
	}
}

func TestWebhookSubscriptionsAndDisabledEndpoints(t *testing.T) {
	w := setup(t)
	all, batches, off := newReceiver(t, 200), newReceiver(t, 200), newReceiver(t, 200)
	w.endpoint(t, all.URL)
	w.endpoint(t, batches.URL, "batch.completed")
	e, _ := w.endpoint(t, off.URL)
	if _, err := w.svc.SetEnabled(context.Background(), w.account, e.ID, false); err != nil {
		t.Fatal(err)
	}
	// Another account's endpoint gets nothing of this account's, and cannot be changed by it.
	otherAccount := fixtures.Account(t, w.pool, "Other Co")
	otherUser := fixtures.User(t, w.pool, otherAccount, "other@example.com", "developer")
	other := newReceiver(t, 200)
	oe, _, err := w.svc.CreateEndpoint(context.Background(), otherAccount, otherUser, webhooks.EndpointInput{URL: other.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.DeleteEndpoint(context.Background(), w.account, oe.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("deleting another account's endpoint: %v, want not found", err)
	}
	w.emit(t, "invoice.issued", "invoice.issued:4", map[string]string{})
	w.emit(t, "batch.completed", "batch.completed:b5", map[string]string{})
	w.settle(t, w.svc)
	if len(all.requests()) != 2 || len(batches.requests()) != 1 || len(off.requests()) != 0 || len(other.requests()) != 0 {
		t.Fatalf("requests: all %d, batches %d, disabled %d, other account %d; want 2, 1, 0, 0",
			len(all.requests()), len(batches.requests()), len(off.requests()), len(other.requests()))
	}
	if _, _, err := w.svc.CreateEndpoint(context.Background(), w.account, w.user,
		webhooks.EndpointInput{URL: all.URL, EventTypes: []string{"no.such"}}); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("an unknown event type: %v, want invalid", err)
	}
}

func TestWebhookReplaySendsTheSameMessageAgain(t *testing.T) {
	w := setup(t)
	r := newReceiver(t, 200)
	e, _ := w.endpoint(t, r.URL, "batch.completed") // a test event goes whatever the endpoint subscribes to
	id, err := w.svc.SendTest(context.Background(), w.account, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	list := w.settle(t, w.svc)
	if len(list) != 1 || list[0].EventID != id || list[0].EventType != webhooks.TypeTest {
		t.Fatalf("deliveries %+v: want the test event", list)
	}
	// Another account cannot replay it.
	stranger := fixtures.Account(t, w.pool, "Stranger")
	if _, err := w.svc.Replay(context.Background(), stranger, list[0].ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("a stranger's replay: %v, want not found", err)
	}
	d, err := w.svc.Replay(context.Background(), w.account, list[0].ID)
	if err != nil || d.Status != webhooks.StatusPending {
		t.Fatalf("replay: %+v, %v", d, err)
	}
	if _, err := w.svc.Replay(context.Background(), w.account, list[0].ID); services.ErrorCode(err) != services.CodeConflict {
		t.Fatalf("replaying a pending delivery: %v, want conflict", err)
	}
	list = w.settle(t, w.svc)
	got := r.requests()
	if len(got) != 2 || got[1].header.Get("webhook-id") != id || string(got[0].body) != string(got[1].body) {
		t.Fatalf("%d requests: want the same message twice", len(got))
	}
	a := list[0].Attempts
	if len(a) != 2 || a[0].Replay || !a[1].Replay || list[0].Replays != 1 || list[0].Status != webhooks.StatusDelivered {
		t.Fatalf("delivery %+v: want a first attempt and a replay, delivered", list[0])
	}
}
