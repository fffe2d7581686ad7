package core

import (
	"net"
	"net/http"
	"testing"
)

func TestClientAddressComesFromForwardedForOnlyBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	_, proxies, _ := net.ParseCIDR("10.0.0.0/8")
	trusted := []*net.IPNet{proxies}
	for _, c := range []struct {
		name    string
		trusted []*net.IPNet
		remote  string
		xff     string
		want    string
	}{
		{"no proxy configured: the header is ignored", nil, "203.0.113.1:5000", "198.51.100.9", "203.0.113.1"},
		{"from a trusted proxy", trusted, "10.1.2.3:5000", "198.51.100.9", "198.51.100.9"},
		{"past every trusted hop", trusted, "10.0.0.9:5000", "198.51.100.9, 10.0.0.5", "198.51.100.9"},
		{"what the client wrote before its address is ignored", trusted, "10.0.0.9:5000", "6.6.6.6, 198.51.100.9", "198.51.100.9"},
		{"a private address not configured is not trusted", trusted, "192.168.1.1:5000", "198.51.100.9", "192.168.1.1"},
		{"loopback is not trusted unless configured", trusted, "127.0.0.1:5000", "198.51.100.9", "127.0.0.1"},
		{"an untrusted client's own header", trusted, "203.0.113.1:5000", "10.0.0.1", "203.0.113.1"},
		{"a header that does not parse", trusted, "10.0.0.9:5000", "not-an-address", "10.0.0.9"},
		{"no header from a proxy", trusted, "10.0.0.9:5000", "", "10.0.0.9"},
	} {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = c.remote
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := ClientIPExtractor(c.trusted)(req); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
