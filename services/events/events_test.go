package events

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
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

// testLogger returns a logger at debug level whose output the test can read, and which is shown when it fails.
// It outlives the test safely: NATS calls back from its own goroutines.
func testLogger(t *testing.T) (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", buf)
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
