package rigaddr

import (
	"errors"
	"net/netip"
	"testing"
)

func TestCheckURL(t *testing.T) {
	prod := Policy{}
	dev := Policy{Development: true}
	allowed := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/16")}}
	cases := []struct {
		url    string
		policy Policy
		ok     bool
	}{
		{"https://rig1.example.com:8443", prod, true},
		{"http://203.0.113.7:9000/", prod, true},
		{"https://[2001:db8::1]:8443", prod, true},
		{"ftp://rig.example.com", prod, false},
		{"https://rig.example.com/v1", prod, false},       // a path
		{"https://rig.example.com/metrics#", prod, false}, // a path and a fragment
		{"https://rig.example.com#", prod, false},         // an empty fragment
		{"https://rig.example.com?x=", prod, false},       // a query
		{"https://rig.example.com?", prod, false},         // an empty query
		{"https://user:pw@rig.example.com", prod, false},  // credentials
		{"https://rig.example.com:0", prod, false},        // no port
		{"https://rig.example.com:70000", prod, false},    // no port
		{"rig.example.com", prod, false},                  // no scheme
		{"http://169.254.169.254", dev, false},            // metadata, even in development
		{"http://[fd00:ec2::254]", dev, false},            // metadata over IPv6
		{"http://[::ffff:169.254.169.254]", dev, false},   // metadata, mapped
		{"http://0.0.0.0:8080", dev, false},               // unspecified
		{"http://127.0.0.1:8080", prod, false},            // loopback
		{"http://127.0.0.1:8080", dev, true},              // loopback in development
		{"http://10.0.0.5:8000", prod, false},             // private
		{"http://10.8.3.4:8000", allowed, true},           // private, allowed network
		{"http://10.9.3.4:8000", allowed, false},          // private, another network
		{"http://[fe80::1%25eth0]:8000", prod, false},     // link-local
		{"http://100.100.100.200", dev, false},            // Alibaba's metadata
		{"http://100.64.1.1", prod, false},                // shared address space
		{"http://localhost:8080", prod, true},             // a name: judged where it resolves
	}
	for _, tc := range cases {
		_, err := tc.policy.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q, %+v) = %v, want ok %v", tc.url, tc.policy, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%q): %v does not wrap ErrRefused", tc.url, err)
		}
	}
}

func TestControl(t *testing.T) {
	prod := Policy{}
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"203.0.113.7:443", true},
		{"127.0.0.1:8080", false},
		{"[::1]:8080", false},
		{"169.254.169.254:80", false},
		{"192.168.1.10:80", false},
		{"[2001:db8::1]:443", true},
	} {
		if err := prod.Control("tcp4", tc.addr, nil); (err == nil) != tc.ok {
			t.Errorf("Control(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
	if err := (Policy{Development: true}).Control("tcp4", "127.0.0.1:8080", nil); err != nil {
		t.Errorf("development refused loopback: %v", err)
	}
}

func TestParseNetworks(t *testing.T) {
	ns, err := ParseNetworks(" 10.8.1.0/16, fd12::/48 ,")
	if err != nil || len(ns) != 2 || ns[0].String() != "10.8.0.0/16" {
		t.Fatalf("ParseNetworks = %v, %v", ns, err)
	}
	if _, err := ParseNetworks("10.8.0.0"); err == nil {
		t.Fatal("a bare address was taken for a network")
	}
}
