package core

import (
	"net"

	"github.com/labstack/echo/v4"
)

// ClientIPExtractor says where a request comes from, for the login and sign-up limits. A
// connection from one of the trusted proxies may name its client in X-Forwarded-For (read
// from the right, past every trusted hop); from anywhere else, or with no proxy configured,
// the connection's own address is the client's, whatever headers it sends. Echo would trust
// loopback, link-local and private addresses by default: here only the configured networks
// are trusted. See docs/web-security.md ("Client addresses").
func ClientIPExtractor(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
