package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/webhooks"
)

// hookRequests is a webhook endpoint of a test's: it answers 200 and keeps each request.
type hookRequests struct {
	*httptest.Server
	mu  sync.Mutex
	got []hookRequest
}

type hookRequest struct {
	header http.Header
	body   []byte
}

func newHookRequests(t *testing.T) *hookRequests {
	h := &hookRequests{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, hookRequest{header: r.Header.Clone(), body: body})
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookRequests) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// A customer adds an endpoint through /api/webhooks; finance issues its invoice; the endpoint
// gets invoice.issued, signed with the secret it was shown once, with the invoice's number and
// total; the log shows the delivery, and a replay sends the same message again.
func TestWebhookOfAnIssuedInvoiceReachesTheCustomer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.closeLastMonth(t)
	acme := e.invoiceOf(t, m, "developer@example.com")
	hooks := newHookRequests(t)
	token := e.token(t, "developer@example.com", demo.Password)
	var created struct {
		Endpoint webhooks.Endpoint `json:"endpoint"`
		Secret   string            `json:"secret"`
	}
	wantStatus(t, e.call(t, token, http.MethodPost, "/api/webhooks",
		map[string]any{"url": hooks.URL, "event_types": []string{"invoice.issued"}}, &created), http.StatusCreated)
	if !strings.HasPrefix(created.Secret, "whsec_") || created.Endpoint.SecretHint != created.Secret[:10] {
		t.Fatalf("created %+v: want the secret once, and its start as the hint", created)
	}
	var list struct {
		Endpoints  []map[string]any     `json:"endpoints"`
		EventTypes []webhooks.EventType `json:"event_types"`
	}
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/webhooks", nil, &list), http.StatusOK)
	if len(list.Endpoints) != 1 || list.Endpoints[0]["secret"] != nil || len(list.EventTypes) != len(webhooks.EventTypesFor(false)) || list.EventTypes[0].Name != "invoice.issued" {
		t.Fatalf("endpoints %+v, types %+v: want one without its secret, and the customer's types", list.Endpoints, list.EventTypes)
	}

	e.approveInvoices(t, m, acme.ID)
	acme = e.invoiceOf(t, m, "developer@example.com")
	if _, err := e.webhooks.DeliverDue(ctx); err != nil {
		t.Fatal(err)
	}
	got := hooks.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want the invoice's", len(got))
	}
	verifier, err := standardwebhooks.NewWebhook(created.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.Verify(got[0].body, got[0].header); err != nil {
		t.Fatalf("signature: %v", err)
	}
	var msg struct {
		Type string `json:"type"`
		Data struct {
			InvoiceID  string `json:"invoice_id"`
			Number     string `json:"number"`
			TotalCents int64  `json:"total_cents"`
			TotalUSD   string `json:"total_usd"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "invoice.issued" || msg.Data.InvoiceID != acme.ID || msg.Data.Number != acme.Number ||
		msg.Data.TotalCents != int64(acme.Total) || msg.Data.TotalUSD != acme.Total.Decimal() {
		t.Fatalf("message %+v: want invoice %s %s of %s", msg, acme.ID, acme.Number, acme.Total)
	}

	var deliveries struct {
		Deliveries []webhooks.Delivery `json:"deliveries"`
	}
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/webhooks/deliveries", nil, &deliveries), http.StatusOK)
	d := deliveries.Deliveries
	if len(d) != 1 || d[0].Status != webhooks.StatusDelivered || len(d[0].Attempts) != 1 || *d[0].Attempts[0].StatusCode != 200 {
		t.Fatalf("deliveries %+v: want one delivered at the first attempt", d)
	}
	// Another customer sees none of it.
	studio := e.token(t, "studio@example.com", demo.Password)
	wantStatus(t, e.call(t, studio, http.MethodGet, "/api/webhooks/deliveries/"+d[0].ID, nil, nil), http.StatusNotFound)

	wantStatus(t, e.call(t, token, http.MethodPost, "/api/webhooks/deliveries/"+d[0].ID+"/replay", nil, nil), http.StatusAccepted)
	if _, err := e.webhooks.DeliverDue(ctx); err != nil {
		t.Fatal(err)
	}
	got = hooks.requests()
	if len(got) != 2 || got[1].header.Get("webhook-id") != got[0].header.Get("webhook-id") || string(got[1].body) != string(got[0].body) {
		t.Fatalf("%d requests: want the same message again", len(got))
	}
}

// A provider adds an endpoint on the Webhooks page: the secret is shown on the answer and never
// again; the page lists the endpoint, a test event's delivery with its answer, and disabling it.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	hooks := newHookRequests(t)
	b, _ := loginBrowser(t, e, "northwind@example.com")
	page := e.srv.URL + "/settings/webhooks"
	doc := getPage(t, b, page)
	if doc.Find(testID("no-endpoints")).Length() != 1 || doc.Find(testID("event-payout.paid")).Length() != 1 ||
		doc.Find(testID("event-invoice.issued")).Length() != 0 {
		t.Fatal("a provider's empty page: want no endpoints and the provider's event types")
	}
	csrf, _ := doc.Find(`input[name="_csrf"]`).First().Attr("value")

	// A refused URL keeps what was typed and ticked.
	res, err := b.PostForm(page, url.Values{"_csrf": {csrf}, "url": {"ftp://example.com"}, "event_types": {"rig.offline"}})
	if err != nil {
		t.Fatal(err)
	}
	refused := readDoc(t, res, http.StatusUnprocessableEntity)
	if refused.Find(testID("error-url")).Length() != 1 || !refused.Find(testID("event-rig.offline")).Is(":checked") {
		t.Fatal("a refused URL: want its error beside it and the ticked type kept")
	}

	res, err = b.PostForm(page, url.Values{"_csrf": {csrf}, "url": {hooks.URL}, "description": {"pager"}, "event_types": {"rig.offline"}})
	if err != nil {
		t.Fatal(err)
	}
	added := readDoc(t, res, http.StatusOK)
	secret := strings.TrimSpace(added.Find(testID("created-secret")).Text())
	if !strings.HasPrefix(secret, "whsec_") || added.Find(testID("shown-once")).Length() != 1 {
		t.Fatalf("the answer to the form shows %q: want the secret, once", secret)
	}
	doc = getPage(t, b, page)
	if strings.Contains(doc.Text(), secret) || doc.Find(testID("endpoint")).Length() != 1 ||
		strings.TrimSpace(doc.Find(testID("endpoint-events")).Text()) != "rig.offline" {
		t.Fatal("the page after: want the endpoint listed without its secret")
	}
	id, _ := doc.Find(testID("endpoint")).Attr("data-endpoint")
	wantStatus(t, postForm(t, b, page+"/"+id+"/test", url.Values{"_csrf": {csrf}}), http.StatusSeeOther)
	if _, err := e.webhooks.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	doc = getPage(t, b, page+"?flash=webhook-test-sent")
	if len(hooks.requests()) != 1 || doc.Find(testID("delivery")).AttrOr("data-status", "") != "delivered" ||
		strings.TrimSpace(doc.Find(testID("delivery-last")).Text()) != "200" {
		t.Fatalf("after a test event: %d requests, delivery %q answered %q; want it delivered and its answer shown", len(hooks.requests()),
			doc.Find(testID("delivery")).AttrOr("data-status", ""), doc.Find(testID("delivery-last")).Text())
	}
	wantStatus(t, postForm(t, b, page+"/"+id+"/disable", url.Values{"_csrf": {csrf}}), http.StatusSeeOther)
	if doc = getPage(t, b, page); doc.Find(testID("endpoint")).AttrOr("data-status", "") != "disabled" {
		t.Fatal("the endpoint is not shown disabled")
	}
}

func readDoc(t *testing.T, res *http.Response, want int) *goquery.Document {
	t.Helper()
	defer res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d", res.Request.Method, res.Request.URL.Path, res.StatusCode, want)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
