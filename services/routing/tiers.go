package routing

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// Tier movement. An offering's tier follows catalog.TierForP99 of its measured P99 once its window holds
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

// settle computes the offering's measured figures now and moves its tier when they say so; the rig's reported
// figures play no part. It reports false when the window holds too few observations to stand for the offering:
// its stored figures and tier are then left as they are, so that a quiet hour does not erase what earlier
// traffic, or a benchmark, measured.
func (s *offeringState) settle(now time.Time, catalogTier catalog.Tier) (f Figures, tier catalog.Tier, moved, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f = s.measured.compute(now)
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

// Flush moves tiers by the measured figures and writes, for every listed offering whose measured window holds at
// least catalog.MinMeasuredRequests observations, its figures and tier to the offerings table (measured_requests
// is the window's count), so the catalog shows them "measured over N requests"; and, apart, the rig's reported
// figures when their window holds as many (reported_*), for the catalog to show beside them. Start runs it every
// FlushEvery.
func (r *Router) Flush(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.Flush")
	if r.figureStore == nil {
		return errors.New("no database to write figures to")
	}
	snap := r.snap.Load()
	if snap == nil {
		return nil
	}
	now := r.cfg.Now()
	var updates []catalog.FiguresUpdate
	for _, l := range snap.listed {
		f, tier, moved, measured := l.state.settle(now, l.Tier)
		u := catalog.FiguresUpdate{OfferingID: l.ID}
		if measured {
			if moved {
				r.log.Info("routing: offering moved tier by its measured P99", "offering", l.ID, "model", l.Model,
					"to", tier, "ttft_p99_ms", f.TTFTP99Ms, "requests", f.Requests)
			}
			u.Measured = &catalog.ObservedFigures{Requests: int64(f.Requests), TTFTP50Ms: f.TTFTP50Ms, TTFTP99Ms: f.TTFTP99Ms,
				TokensPerSec: positive(f.TokensPerSec)}
			u.Tier = tier
		}
		if rep, reported := l.state.reportedFigures(now); reported {
			u.Reported = &catalog.ObservedFigures{Requests: int64(rep.Requests), TTFTP50Ms: rep.TTFTP50Ms, TTFTP99Ms: rep.TTFTP99Ms,
				TokensPerSec: positive(rep.TokensPerSec)}
			r.checkDivergence(l, f, measured, rep)
		}
		if u.Measured != nil || u.Reported != nil {
			updates = append(updates, u)
		}
	}
	if len(updates) == 0 {
		return nil
	}
	return r.figureStore.RecordFigures(ctx, updates)
}

// FiguresStore is where Flush writes the figures; *catalog.Service implements it.
type FiguresStore interface {
	RecordFigures(ctx context.Context, updates []catalog.FiguresUpdate) error
}

var _ FiguresStore = (*catalog.Service)(nil)

func positive(v float64) *float64 {
	if v > 0 {
		return &v
	}
	return nil
}

// reportedFigures computes the rig's reported figures now, and reports false when their window holds fewer than
// catalog.MinMeasuredRequests.
func (s *offeringState) reportedFigures(now time.Time) (Figures, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.reported.compute(now)
	return f, f.Requests >= catalog.MinMeasuredRequests
}

// checkDivergence logs, for admins, when an offering's rig starts reporting figures far better than the gateways
// measured (catalog.Offering.ReportDivergence, the rule the catalog's pages flag by).
func (r *Router) checkDivergence(l *listed, measured Figures, measuredOK bool, reported Figures) {
	o := catalog.Offering{
		MeasuredRequests: l.MeasuredRequests, MeasuredTTFTP99Ms: l.MeasuredTTFTP99Ms, MeasuredTokensPerSec: l.MeasuredTokensPerSec,
		ReportedRequests: int64(reported.Requests), ReportedTTFTP99Ms: &reported.TTFTP99Ms, ReportedTokensPerSec: positive(reported.TokensPerSec),
	}
	if measuredOK {
		o.MeasuredRequests, o.MeasuredTTFTP99Ms, o.MeasuredTokensPerSec = int64(measured.Requests), &measured.TTFTP99Ms, positive(measured.TokensPerSec)
	}
	why := o.ReportDivergence()
	l.state.mu.Lock()
	started := why != "" && !l.state.diverging
	l.state.diverging = why != ""
	l.state.mu.Unlock()
	if started {
		r.log.Warn("routing: a rig reports figures far better than the gateways measured", "offering", l.ID,
			"provider", l.ProviderAccountID, "model", l.Model, "why", why)
	}
}
