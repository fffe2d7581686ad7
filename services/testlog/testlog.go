// Package testlog is the tests' logger: one whose output a test can read, shown when the test
// fails, and one that discards. It is test support, imported by _test files only.
package testlog

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
	"testing"
)

// New returns a logger at debug level writing to a buffer the test can read, printed in the
// test's log when it fails. It outlives the test safely: servers call back from goroutines of
// their own.
func New(t testing.TB) (*slog.Logger, *Buffer) {
	t.Helper()
	buf := &Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", buf)
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Buffer is a bytes.Buffer safe for concurrent writers and readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
