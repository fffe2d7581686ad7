package stripemock

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
)

// Request is one request the platform sent to the Stripe API, as a Recorder kept it.
type Request struct {
	Method, Path, IdempotencyKey string
	Form                         url.Values // the form body, or the query of a GET
}

// Recorder is an http.Handler that keeps every request it is sent and passes it on, so that
// a test sees both stripe-mock's answer and the parameters the platform gave it. Put it in
// front of Proxy, or in front of a handler that answers some requests as Stripe would (an
// error, a dropped connection) before it hands the rest to Proxy.
type Recorder struct {
	next http.Handler
	mu   sync.Mutex
	got  []Request
}

// Record returns a Recorder that passes requests on to next.
func Record(next http.Handler) *Recorder { return &Recorder{next: next} }

// Proxy forwards every request to the stripe-mock at apiURL.
func Proxy(apiURL string) (http.Handler, error) {
	target, err := url.Parse(apiURL)
	if err != nil {
		return nil, err
	}
	return httputil.NewSingleHostReverseProxy(target), nil
}

// ServeHTTP keeps the request, then passes it on with its body intact.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form, _ := url.ParseQuery(string(body))
	if req.Method == http.MethodGet {
		form = req.URL.Query()
	}
	r.mu.Lock()
	r.got = append(r.got, Request{Method: req.Method, Path: req.URL.Path, IdempotencyKey: req.Header.Get("Idempotency-Key"), Form: form})
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(body))
	r.next.ServeHTTP(w, req)
}

// Requests returns what was sent so far, in order.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.got...)
}

// Count says how many requests of the method went to the path.
func (r *Recorder) Count(method, path string) int {
	n := 0
	for _, q := range r.Requests() {
		if q.Method == method && q.Path == path {
			n++
		}
	}
	return n
}
