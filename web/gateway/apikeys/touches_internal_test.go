package apikeys

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// Closing the record drops the scheduled write of when keys were last used, and schedules no other: nothing is
// written once Close has returned (the database may be gone by then).
func TestKeyTouchesScheduleNothingOnceClosed(t *testing.T) {
	var writes atomic.Int32
	touches := NewTouches(func(context.Context, map[string]time.Time) error { writes.Add(1); return nil }, slog.New(slog.DiscardHandler))
	touches.Touch("key_1", time.Now())
	touches.Close()
	touches.Touch("key_2", time.Now())
	time.Sleep(TouchEvery + 200*time.Millisecond)
	if n := writes.Load(); n != 0 {
		t.Fatalf("%d writes after Close", n)
	}
}

// A write under way when the record closes is waited for.
func TestKeyTouchesCloseWaitsForTheWriteUnderWay(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	touches := NewTouches(func(context.Context, map[string]time.Time) error {
		close(started)
		<-release
		finished.Store(true)
		return nil
	}, slog.New(slog.DiscardHandler))
	touches.Touch("key_1", time.Now())
	<-started
	closed := make(chan struct{})
	go func() { touches.Close(); close(closed) }()
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
