package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/web/gateway"
)

// /v1 never reaches the web's router: a logged-in browser's cookies, without a CSRF token, get
// the gateway's 401 for want of an API key, not the pages' CSRF refusal; the same browser's
// form post without its token is still refused. The edge middleware runs on /v1 as on the
// pages: the request id, the security headers, and the metrics by route.
func TestV1IsTheGatewaysWithTheEdgeButNoSessionOrCSRF(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, _ := loginBrowser(t, e, "developer@example.com")

	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var body struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	if res.StatusCode != http.StatusUnauthorized || json.Unmarshal(raw, &body) != nil || body.Error.Code != "invalid_api_key" {
		t.Errorf("a session's cookies on /v1 without a CSRF token: %d %s; want 401 invalid_api_key", res.StatusCode, raw)
	}
	if res.Header.Get("X-Request-Id") == "" || res.Header.Get("X-Frame-Options") != "DENY" ||
		res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("/v1 without the edge's headers: %v", res.Header)
	}
	for _, c := range res.Cookies() {
		if c.Name == "gpumarket_csrf" {
			t.Errorf("/v1 set the pages' CSRF cookie")
		}
	}

	res, _ = postPage(t, b, e.srv.URL+"/keys", url.Values{"name": {"no token"}})
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a page form without its CSRF token: %d, want 403", res.StatusCode)
	}

	res, metrics := get(t, e.srv.URL+"/metrics", map[string]string{"Authorization": "Bearer " + testMetricsToken})
	if res.StatusCode != http.StatusOK ||
		!strings.Contains(metrics, `gpumarket_http_requests_total{method="POST",route="/v1/chat/completions",status="401"} 1`) {
		t.Errorf("the metrics do not count the /v1 call under its route: %d", res.StatusCode)
	}
}

// Without the gateway mounted, /v1 and every path under it is answered 503 in OpenAI's shape,
// and nothing else is touched.
func TestMountWithoutTheGateway(t *testing.T) {
	t.Parallel()
	rest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := gateway.Mount(nil, rest)
	for path, want := range map[string]int{"/v1": 503, "/v1/": 503, "/v1/chat/completions": 503, "/v1/files/x/content": 503,
		"/": http.StatusTeapot, "/v10": http.StatusTeapot, "/v1x": http.StatusTeapot, "/api/v1/x": http.StatusTeapot} {
		rec := &mountRecorder{header: http.Header{}}
		h.ServeHTTP(rec, &http.Request{Method: http.MethodGet, URL: &url.URL{Path: path}, Header: http.Header{}})
		if rec.status != want {
			t.Errorf("%s: %d, want %d", path, rec.status, want)
		}
		if want == 503 && (!strings.Contains(rec.body.String(), `"code":"gateway_not_running"`) ||
			rec.header.Get("Content-Type") != "application/json") {
			t.Errorf("%s: %s; want OpenAI's error shape, code gateway_not_running", path, rec.body.String())
		}
	}
}

type mountRecorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *mountRecorder) Header() http.Header         { return r.header }
func (r *mountRecorder) WriteHeader(status int)      { r.status = status }
func (r *mountRecorder) Write(p []byte) (int, error) { return r.body.Write(p) }
