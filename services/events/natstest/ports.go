package natstest

import (
	"net"
	"testing"
)

// FreePorts reserves n loopback TCP ports the system says are free, and releases them for the caller to listen on:
// a cluster's client and route ports, known before its nodes start.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}
