package routing

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// Tier movement. An offering's tier follows catalog.TierForP99 of its live P99 once its window holds
// catalog.MinMeasuredRequests observations, with hysteresis so that a P99 hovering at a bound does not flap it
// between tiers: it is demoted only when its P99 exceeds its tier's bound by more than tierMarginPercent, and
// promoted only when its P99 is below the better tier's bound by at least that much; and it moves at most once
// per tierMoveEvery.
const (
	tierMarginPercent = 10
	tierMoveEvery     = time.Minute
)

// boundMs is the tier's P99 bound; batch promises none.
func boundMs(t catalog.Tier) float64 {
	switch t {
	case catalog.TierRealtime:
		return catalog.RealtimeMaxP99Ms
	case catalog.TierStandard:
		return catalog.StandardMaxP99Ms
	}
	return math.Inf(1)
}

// nextTier is where an offering in tier cur belongs with a live P99 of p99Ms, by the hysteresis above. A
// demotion goes to the tier the P99 meets; a promotion to the best tier it meets with the margin to spare.
func nextTier(cur catalog.Tier, p99Ms float64) catalog.Tier {
	if p99Ms > boundMs(cur)*(100+tierMarginPercent)/100 {
		return catalog.TierForP99(p99Ms)
	}
	if better := catalog.TierForP99(p99Ms * 100 / (100 - tierMarginPercent)); rank(better) < rank(cur) {
		return better
	}
	return cur
}

func rank(t catalog.Tier) int { return slices.Index(catalog.Tiers, t) }

// settle computes the offering's figures now and moves its tier when they say so. It reports false when the
// window holds too few observations to stand for the offering: its stored figures and tier are then left as
// they are, so that a quiet hour does not erase what earlier traffic, or a benchmark, measured.
func (s *offeringState) settle(now time.Time, catalogTier catalog.Tier) (f Figures, tier catalog.Tier, moved, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f = s.computeLocked(now)
	cur := catalogTier
	if s.tier != "" {
		cur = s.tier
	}
	if f.Requests < catalog.MinMeasuredRequests {
		return f, cur, false, false
	}
	next := nextTier(cur, f.TTFTP99Ms)
	if next == cur || (!s.tierMovedAt.IsZero() && now.Sub(s.tierMovedAt) < tierMoveEvery) {
		return f, cur, false, true
	}
	s.tier, s.tierMovedAt = next, now
	return f, next, true, true
}

// Flush moves tiers by the live figures and writes, for every listed offering whose window holds at least
// catalog.MinMeasuredRequests observations, its figures and tier to the offerings table (measured_requests is
// the window's count), so the catalog shows them "measured over N requests" (FIELD-CASES 17). Start runs it every
// FlushEvery.
func (r *Router) Flush(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.Flush")
	if r.cfg.Pool == nil {
		return errors.New("no database to write figures to")
	}
	snap := r.snap.Load()
	if snap == nil {
		return nil
	}
	now := r.cfg.Now()
	b := &pgx.Batch{}
	for _, l := range snap.listed {
		f, tier, moved, ok := l.state.settle(now, l.Tier)
		if !ok {
			continue
		}
		if moved {
			r.log.Info("routing: offering moved tier by its live P99", "offering", l.ID, "model", l.Model,
				"to", tier, "ttft_p99_ms", f.TTFTP99Ms, "requests", f.Requests)
		}
		var tps *float64
		if f.TokensPerSec > 0 {
			tps = &f.TokensPerSec
		}
		b.Queue(`UPDATE offerings SET measured_requests = $2, measured_ttft_p50_ms = $3, measured_ttft_p99_ms = $4,
				measured_tokens_per_sec = coalesce($5, measured_tokens_per_sec), tier = $6
			WHERE id = $1 AND status <> 'delisted'`,
			l.ID, int64(f.Requests), f.TTFTP50Ms, f.TTFTP99Ms, tps, string(tier))
	}
	if b.Len() == 0 {
		return nil
	}
	return r.cfg.Pool.SendBatch(ctx, b).Close()
}
