package events

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/testlog"
)

func TestConnectReportsAnUnreachableServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	log, _ := testLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	nc, _, err := Connect(ctx, "nats://rig:s3cret@"+addr, "test", log)
	if err == nil {
		nc.Close()
		t.Fatal("Connect to a closed port = nil error")
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), addr) {
		t.Errorf("error = %q, want one that names %s without the password", err, addr)
	}
}

// testLogger is testlog.New: a logger the test can read, shown when it fails.
func testLogger(t *testing.T) (*slog.Logger, *testlog.Buffer) { return testlog.New(t) }
