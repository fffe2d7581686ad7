// Package natstest starts the embedded NATS server for a test: JetStream on, its store in the
// test's temporary directory, its log discarded unless given, and shut down when the test ends.
// It is test support, imported by _test files only.
package natstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/testlog"
)

// Start starts an embedded server with opts, filling in StoreDir and Log when they are empty.
func Start(t testing.TB, opts natsserver.EmbeddedOptions) *server.Server {
	t.Helper()
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	if opts.Log == nil {
		opts.Log = testlog.Discard()
	}
	s, err := natsserver.StartEmbedded(opts)
	if err != nil {
		t.Fatalf("natstest: start the embedded NATS server: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect connects to s, closed when the test ends.
func Connect(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}
