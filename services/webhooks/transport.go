package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// errPrivateAddress is an endpoint whose address is loopback, private, link-local or otherwise
// not on the public internet, while the platform does not allow those.
var errPrivateAddress = errors.New("the endpoint's address is not a public one")

// newClient is the client attempts are sent with: no proxy from the environment, no redirect
// followed (the 3xx is the answer), and, unless allowPrivate, a dialler that refuses every
// address not on the public internet. The address is checked as it is dialled, after the name
// is resolved, so that a name that resolves to a private address is refused however it resolves.
func newClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !publicAddr(ap.Addr()) {
				return fmt.Errorf("%w: %s", errPrivateAddress, address)
			}
			return nil
		}
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sharedAddressSpace is carrier-grade NAT's range (RFC 6598): not the public internet either.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports whether an address is one on the public internet.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!sharedAddressSpace.Contains(a)
}

// resolvesPublic reports whether every address host resolves to is public: checked when an
// endpoint is added, so that its owner learns at once, and again as each attempt dials.
func resolvesPublic(ctx context.Context, host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return publicAddr(a)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return true // a name that does not resolve now may later; each attempt checks as it dials
	}
	for _, a := range addrs {
		if !publicAddr(a) {
			return false
		}
	}
	return true
}
