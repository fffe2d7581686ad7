// Package webhookstest lets a test see the webhook events a service emits, as a receiver gets
// them: a real webhooks.Service on the test's database delivers to an HTTP server of the test's.
package webhookstest

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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/webhooks"
)

// Receiver is the test's endpoint and the service that delivers to it.
type Receiver struct {
	Service *webhooks.Service
	pool    *pgxpool.Pool
	srv     *httptest.Server
	mu      sync.Mutex
	got     []Event
}

// Event is a request the receiver got: its webhook-id and body.
type Event struct {
	ID   string
	Type string
	Data json.RawMessage
}

// New starts a receiver and a webhooks service on pool that may deliver to it.
func New(t testing.TB, pool *pgxpool.Pool) *Receiver {
	t.Helper()
	r := &Receiver{pool: pool, Service: webhooks.New(webhooks.Config{Pool: pool, Key: []byte(strings.Repeat("t", 32)),
		AllowPrivate: true, Schedule: []time.Duration{}})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m webhooks.Message
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, Event{ID: req.Header.Get("webhook-id"), Type: m.Type, Data: m.Data})
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// Subscribe adds an endpoint of the account, receiving every event type.
func (r *Receiver) Subscribe(t testing.TB, accountID string) {
	t.Helper()
	id, err := services.NewUUID()
	if err != nil {
		t.Fatal(err)
	}
	user := fixtures.User(t, r.pool, accountID, "webhooks-"+id+"@example.com", "developer")
	if _, _, err := r.Service.CreateEndpoint(context.Background(), accountID, user, webhooks.EndpointInput{URL: r.srv.URL}); err != nil {
		t.Fatal(err)
	}
}

// Events delivers what is due and returns every event the receiver got so far, in order.
func (r *Receiver) Events(t testing.TB) []Event {
	t.Helper()
	if _, err := r.Service.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.got...)
}
