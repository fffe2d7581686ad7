package gateway

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// Closing the gateway drops the scheduled write of when keys were last used, and schedules no other: nothing is
// written once Close has returned (the database may be gone by then).
func TestKeyTouchesScheduleNothingOnceClosed(t *testing.T) {
	var writes atomic.Int32
	g := New(Config{Log: slog.New(slog.DiscardHandler)})
	g.touches.write = func(context.Context, map[string]time.Time) error { writes.Add(1); return nil }
	g.touches.touch("key_1", time.Now())
	g.Close()
	g.touches.touch("key_2", time.Now())
	time.Sleep(touchEvery + 200*time.Millisecond)
	if n := writes.Load(); n != 0 {
		t.Fatalf("%d writes after Close", n)
	}
}

// A write under way when the gateway closes is waited for.
func TestKeyTouchesCloseWaitsForTheWriteUnderWay(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	g := New(Config{Log: slog.New(slog.DiscardHandler)})
	g.touches.write = func(context.Context, map[string]time.Time) error {
		close(started)
		<-release
		finished.Store(true)
		return nil
	}
	g.touches.touch("key_1", time.Now())
	<-started
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a write was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if !finished.Load() {
		t.Fatal("Close returned before the write finished")
	}
}
