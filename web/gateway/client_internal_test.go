package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpumarket/gpumarket/services/rigaddr"
)

// The gateway's own client to the rigs: a name that resolves to the platform's own network is refused where it
// resolves, and a rig's redirect is never followed.
func TestGatewayClientToRigs(t *testing.T) {
	var hits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer internal.Close()
	port := internal.URL[strings.LastIndexByte(internal.URL, ':'):]

	production := New(Config{})
	for _, rawURL := range []string{"http://localhost" + port + "/v1/models", internal.URL + "/v1/models"} {
		_, err := postURL(production.client, rawURL)
		if !errors.Is(err, rigaddr.ErrRefused) {
			t.Errorf("POST %s in production: %v, want a refusal", rawURL, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the loopback server was reached %d times", hits.Load())
	}

	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/metrics", http.StatusFound)
	}))
	defer redirector.Close()
	dev := New(Config{RigPolicy: rigaddr.Policy{Development: true}})
	res, err := postURL(dev.client, redirector.URL+"/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || hits.Load() != 0 {
		t.Fatalf("a redirect answered %d and the target was reached %d times; want the 302 itself and none", res.StatusCode, hits.Load())
	}
}

// postURL posts an empty JSON body to rawURL with c.
func postURL(c *rigClient, rawURL string) (*http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return c.post(context.Background(), u.Scheme, u.Host, u.RequestURI(), http.Header{"Content-Type": {"application/json"}}, []byte("{}"))
}

// failedAnswer tells a rig's failure, to fail over on, from an answer to relay.
func TestFailedAnswer(t *testing.T) {
	stream, whole := &gatewayRequest{stream: true}, &gatewayRequest{}
	cases := []struct {
		req    *gatewayRequest
		status int
		ct     string
		length int64
		fails  bool
	}{
		{whole, 200, "application/json", 100, false},
		{whole, 200, "application/json; charset=utf-8", -1, false},
		{stream, 200, "text/event-stream", -1, false},
		{stream, 200, "application/json", 100, false},
		{whole, 200, "text/event-stream", -1, true},
		{whole, 200, "text/html", 10, true},
		{stream, 200, "text/plain", -1, true},
		{whole, 200, "application/json", maxResponseBytes + 1, true},
		{whole, 302, "text/html", 0, true},
		{whole, 307, "", 0, true},
		{whole, 503, "application/json", 10, true},
		{whole, 401, "application/json", 10, true},
		{whole, 400, "application/json", 10, false},
		{whole, 404, "text/html", 10, true},
		{whole, 429, "application/json", 10, false},
	}
	for _, tc := range cases {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, ContentLength: tc.length}
		if tc.ct != "" {
			resp.Header.Set("Content-Type", tc.ct)
		}
		if why := failedAnswer(tc.req, resp); (why != "") != tc.fails {
			t.Errorf("status %d %q (%d bytes, stream %v): failure %q, want failure %v", tc.status, tc.ct, tc.length, tc.req.stream, why, tc.fails)
		}
	}
}
