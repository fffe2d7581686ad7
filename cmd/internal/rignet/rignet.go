// Package rignet gives a test a rig at home: a network namespace of its own whose only route leads to one
// address of the test's machine (the platform's entry points for rigs), whose firewall refuses every connection
// that does not start inside it, and in which the test runs the commands a provider would. A process in it can
// dial out to the platform and nowhere else, and nothing can dial in: what a rig behind a home router or
// carrier-grade NAT has.
//
// It needs root (network namespaces, veth, nf_tables); New skips the test with the reason where they are not
// allowed.
package rignet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// Home is a rig's network namespace, joined to the test's machine by a veth pair on a /30 of its own.
type Home struct {
	// Name is the namespace's name (ip netns).
	Name string
	// PlatformIP is the test machine's end of the link: the one address a process in the namespace can reach.
	// The platform's entry points for rigs must listen on it (or on every address).
	PlatformIP netip.Addr
	// RigIP is the namespace's end of the link.
	RigIP netip.Addr
}

// New makes a rig's home for the test and removes it when the test ends. It skips the test, saying why, when
// the machine does not let it make one (not root, no ip command, no network namespaces or nf_tables).
func New(t testing.TB) *Home {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("rignet: a rig's network namespace needs root (ip netns, veth, nf_tables); run the suite as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("rignet: the ip command (iproute2) is not installed")
	}
	suffix := randomHex(3)
	h := &Home{Name: "gpm-rig-" + suffix}
	hostLink, rigLink := "gpmh"+suffix, "gpmr"+suffix // at most 15 characters
	if out, err := exec.Command("ip", "netns", "add", h.Name).CombinedOutput(); err != nil {
		t.Skipf("rignet: this machine does not allow network namespaces (ip netns add: %v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", hostLink).Run() // takes its peer with it
		_ = exec.Command("ip", "netns", "del", h.Name).Run()
	})
	subnet, err := freeSubnet()
	if err != nil {
		t.Fatal(err)
	}
	h.PlatformIP, h.RigIP = subnet.Addr().Next(), subnet.Addr().Next().Next()
	for _, args := range [][]string{
		{"link", "add", hostLink, "type", "veth", "peer", "name", rigLink},
		{"link", "set", rigLink, "netns", h.Name},
		{"addr", "add", netip.PrefixFrom(h.PlatformIP, 30).String(), "dev", hostLink},
		{"link", "set", hostLink, "up"},
		{"-n", h.Name, "addr", "add", netip.PrefixFrom(h.RigIP, 30).String(), "dev", rigLink},
		{"-n", h.Name, "link", "set", rigLink, "up"},
		{"-n", h.Name, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("rignet: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	// The /30's own route is the namespace's only one: no default route, nothing beyond the platform's address.
	if err := h.closeTheDoor(); err != nil {
		t.Skipf("rignet: cannot set the namespace's firewall (nf_tables): %v", err)
	}
	return h
}

// Command is name run with args inside the namespace (ip netns exec), as the provider would run it at home.
func (h *Home) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Routes is the namespace's routing table, as ip prints it.
func (h *Home) Routes() (string, error) {
	out, err := exec.Command("ip", "-n", h.Name, "route", "show", "table", "all").CombinedOutput()
	return string(out), err
}

// closeTheDoor sets the namespace's firewall: every packet in is dropped unless it belongs to a connection
// opened from inside (or arrives on loopback, where the rig's agent reaches its own inference server).
func (h *Home) closeTheDoor() error {
	ns, err := os.Open("/var/run/netns/" + h.Name)
	if err != nil {
		return err
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return err
	}
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "home_router"})
	drop := nftables.ChainPolicyDrop
	input := c.AddChain(&nftables.Chain{Name: "input", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: []expr.Any{ // iifname "lo" accept
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: []expr.Any{ // ct state established,related accept
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	return c.Flush()
}

// ifname is an interface name as nf_tables compares it: NUL-padded to 16 bytes.
func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}

// freeSubnet picks a /30 in 10.231.0.0/16 that no address of this machine is in.
func freeSubnet() (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, err
	}
	for range 64 {
		var b [2]byte
		_, _ = rand.Read(b[:])
		n := binary.BigEndian.Uint16(b[:]) &^ 3
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 231, byte(n >> 8), byte(n)}), 30)
		taken := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP.To4()); ok && p.Contains(ip) {
					taken = true
				}
			}
		}
		if !taken {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("rignet: no free /30 in 10.231.0.0/16")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
