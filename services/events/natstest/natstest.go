// Package natstest starts the embedded NATS server for a test: JetStream on, its store in the
// test's temporary directory, its log discarded unless given, and shut down when the test ends.
// It is test support, imported by _test files only.
package natstest

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/rigauth"
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

// RigEntry is an embedded server that lets rigs in as the platform's does (natsserver.RigEntry), with the
// platform's auth callout answered for the test.
type RigEntry struct {
	Server *server.Server
	// PlatformURL and SystemURL carry the platform's user and the system account's user and passwords.
	PlatformURL, SystemURL string
	// Revoker closes a user's connections, on a connection of the system account's user.
	Revoker *rigauth.Revoker
}

// StartRigEntry starts an embedded server with opts (its Rigs filled in) that lets rigs in through the auth callout,
// answered by responder (its Issuer filled in from its RigKey) on a connection of the platform's user, and a Revoker
// on one of the system account's. Everything is closed when the test ends.
func StartRigEntry(t testing.TB, opts natsserver.EmbeddedOptions, responder *rigauth.Responder) *RigEntry {
	t.Helper()
	issuer, err := rigauth.Issuer(responder.RigKey)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := issuer.PublicKey()
	responder.Issuer = issuer
	if responder.Log == nil {
		responder.Log = testlog.Discard()
	}
	opts.Rigs = &natsserver.RigEntry{PlatformUser: "platform", PlatformPassword: "platform-secret",
		SystemUser: "system", SystemPassword: "system-secret", Issuer: public}
	e := &RigEntry{Server: Start(t, opts)}
	host := strings.TrimPrefix(e.Server.ClientURL(), "nats://")
	e.PlatformURL, e.SystemURL = "nats://platform:platform-secret@"+host, "nats://system:system-secret@"+host
	pnc, err := nats.Connect(e.PlatformURL, nats.Name("platform-rigauth"))
	if err != nil {
		t.Fatalf("natstest: connect as the platform: %v", err)
	}
	t.Cleanup(pnc.Close)
	if _, err := responder.Serve(pnc); err != nil {
		t.Fatal(err)
	}
	snc, err := nats.Connect(e.SystemURL, nats.Name("platform-revoker"))
	if err != nil {
		t.Fatalf("natstest: connect as the system account: %v", err)
	}
	t.Cleanup(snc.Close)
	e.Revoker = &rigauth.Revoker{NC: snc}
	return e
}
