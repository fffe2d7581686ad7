package reliability

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// Source counts every offering's requests over a window from the gateway's record, leaving out the requests
// of the accounts excluded; *requestlog.RequestLog implements it. Offerings without a request are absent.
type Source interface {
	Reliability(ctx context.Context, w Window, excluded []string) (map[string]Counts, error)
}

// Config wires a Board.
type Config struct {
	Source Source
	// Excluded names the accounts whose requests are the platform's own, not customers' (its probes of
	// demoted offerings); nil excludes none.
	Excluded func(ctx context.Context) ([]string, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log gets failed refreshes; nil means slog.Default().
	Log *slog.Logger
}

// Board holds the latest records of every offering. A nil *Board holds none: every offering is then without
// a record, and routed as any other.
type Board struct {
	cfg Config
	cur atomic.Pointer[loaded]
}

// loaded is one refresh's figures.
type loaded struct {
	w      Window
	counts map[string]Counts
}

// NewBoard returns a board holding nothing until its first Refresh.
func NewBoard(cfg Config) *Board {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Board{cfg: cfg}
}

// Refresh reads the figures of the window at now (WindowAt), unless they are those already held. On failure
// the figures held stay.
func (b *Board) Refresh(ctx context.Context) (err error) {
	defer services.Wrap(&err, "reliability.Board.Refresh")
	w := WindowAt(b.cfg.Now())
	if cur := b.cur.Load(); cur != nil && cur.w == w {
		return nil
	}
	var excluded []string
	if b.cfg.Excluded != nil {
		if excluded, err = b.cfg.Excluded(ctx); err != nil {
			return err
		}
	}
	counts, err := b.cfg.Source.Reliability(ctx, w, excluded)
	if err != nil {
		return err
	}
	b.cur.Store(&loaded{w: w, counts: counts})
	return nil
}

// Run refreshes now and then each time the window moves on, a moment after its end so that every process
// reads the new window together, until ctx ends.
func (b *Board) Run(ctx context.Context) {
	for {
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.cfg.Log.Warn("reliability: figures not refreshed; the last ones stay", "error", err)
		}
		now := b.cfg.Now()
		next := WindowAt(now).To.Add(RefreshEvery + settle + 100*time.Millisecond)
		t := time.NewTimer(max(next.Sub(now), time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Counts returns the offering's counts and the window they cover; zero counts for an offering without a
// request in it, or before the first refresh.
func (b *Board) Counts(offeringID string) (Counts, Window) {
	if b == nil {
		return Counts{}, Window{}
	}
	cur := b.cur.Load()
	if cur == nil {
		return Counts{}, Window{}
	}
	return cur.counts[offeringID], cur.w
}

// Standing is the offering's standing by its uptime (Counts.Standing).
func (b *Board) Standing(offeringID string) Standing {
	c, _ := b.Counts(offeringID)
	return c.Standing()
}

// Record is the offering's published record.
func (b *Board) Record(offeringID string) Record {
	return RecordOf(b.Counts(offeringID))
}
