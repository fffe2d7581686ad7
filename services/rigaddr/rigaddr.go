// Package rigaddr decides where the platform may connect to reach a rig's agent. A provider
// chooses its offering's agent URL, so the URL is input from a party the platform does not
// trust: pointed at the platform itself, at a neighbour on its private network or at the
// cloud's metadata service, the gateway would carry customers' requests and route tickets
// there and relay whatever answered. The rules, checked when a listing is saved (CheckURL) and
// again on every connection the gateway opens (Control, which sees the address DNS resolved
// to, so that a name that resolves somewhere else later is caught):
//
//   - The URL is http or https with a host and an optional port, and nothing else: no user
//     information, no path but "/", no query and no fragment. The platform appends the
//     endpoint's path itself, so no suffix can steer a request to another path.
//   - Cloud metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200) and the
//     unspecified addresses are always refused.
//   - Loopback, private (RFC 1918, RFC 4193, shared address space) and link-local addresses,
//     and multicast, are refused unless the platform runs in development mode, where the
//     simulated rigs live on loopback, or the operator allows the network
//     (GPUMARKET_RIG_NETWORKS), for rigs on a private network of the operator's own.
package rigaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// Policy is the platform's rule for rig addresses. The zero value is production's: public
// addresses only.
type Policy struct {
	// Development allows loopback, private and link-local addresses.
	Development bool
	// Allowed are networks the operator allows beyond the public internet.
	Allowed []netip.Prefix
}

// metadata are the cloud metadata services' addresses, refused whatever the policy allows.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// sharedAddressSpace is RFC 6598's carrier-grade NAT range, private in all but name.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// ErrRefused is what every refusal wraps.
var ErrRefused = errors.New("rigaddr: address refused")

// ParseNetworks reads a comma-separated list of CIDR networks ("10.8.0.0/16, fd12::/48").
func ParseNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network such as 10.8.0.0/16: %w", part, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// CheckURL checks an agent URL as a provider gives it and returns it parsed. A host given as
// an IP address is checked here; a name is checked where it resolves, on every connection.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: not a URL", ErrRefused)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: use http:// or https://", ErrRefused)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: name the host, like https://rig1.example.com:8443", ErrRefused)
	case u.User != nil:
		return nil, fmt.Errorf("%w: no user or password in the URL", ErrRefused)
	case u.Path != "" && u.Path != "/", u.RawPath != "":
		return nil, fmt.Errorf("%w: no path: the platform adds /v1/... itself", ErrRefused)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?"):
		return nil, fmt.Errorf("%w: no query", ErrRefused)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("%w: no fragment", ErrRefused)
	}
	if port := u.Port(); port != "" {
		if n, err := netip.ParseAddrPort("0.0.0.0:" + port); err != nil || n.Port() == 0 {
			return nil, fmt.Errorf("%w: the port must be 1 to 65535", ErrRefused)
		}
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := p.CheckIP(ip); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// CheckIP says whether the platform may connect to ip.
func (p Policy) CheckIP(ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	for _, m := range metadata {
		if ip == m {
			return fmt.Errorf("%w: %s is a cloud metadata address", ErrRefused, ip)
		}
	}
	if ip.IsUnspecified() || !ip.IsValid() {
		return fmt.Errorf("%w: %s is no host", ErrRefused, ip)
	}
	internal := ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || sharedAddressSpace.Contains(ip)
	if !internal || p.Development {
		return nil
	}
	for _, n := range p.Allowed {
		if n.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is a loopback, private or link-local address; an operator can allow its network with GPUMARKET_RIG_NETWORKS", ErrRefused, ip)
}

// Control is a net.Dialer's Control hook: it refuses a connection to an address the policy
// does not allow, after DNS has resolved the host, so that a name cannot be made to resolve to
// the platform's own network between the listing's check and the connection.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, splitErr := net.SplitHostPort(address)
		if splitErr != nil {
			return fmt.Errorf("%w: %q", ErrRefused, address)
		}
		addr, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("%w: %q", ErrRefused, address)
		}
		return p.CheckIP(addr)
	}
	return p.CheckIP(ap.Addr())
}
