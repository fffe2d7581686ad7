package gateway

import (
	"net/http"
	"testing"
)

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
