package routing

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// Rigs' states (docs/listing-states.md). A listing's rig is pending until its agent heartbeats and passes
// catalog.ProbesToQualify of the platform's probes in a row, then active; offline once no gateway has heard
// it for catalog.OfflineAfter, until its probes qualify it again. The decisions are the database's, by
// conditional updates (catalog.Service.RecordProbe, MarkOffline), so that every gateway replica may take them
// at once and each rig changes once; each replica writes down the heartbeats it heard (RecordHeartbeats), and a
// rig is offline only when none heard it. A replica that changed a state reloads its catalog at once; the
// others see the change at their next reload, within RefreshEvery.

// RigStatesEvery is how often a router writes down the heartbeats it heard and turns silent rigs offline.
const RigStatesEvery = 5 * time.Second

// RigStates is where rigs' states are decided; *catalog.Service implements it.
type RigStates interface {
	RecordHeartbeats(ctx context.Context, heard map[string]catalog.Heard) error
	MarkOffline(ctx context.Context, silentSince, now time.Time) ([]string, error)
	RecordProbe(ctx context.Context, offeringID string, r catalog.ProbeResult) (catalog.RigState, error)
}

var _ RigStates = (*catalog.Service)(nil)

// SettleRigStates writes down the heartbeats this router heard since it last did, then, once the router is
// ready (its rigs had the chance to answer its heartbeat request), turns offline every rig no gateway heard
// for catalog.OfflineAfter, and reloads the catalog when any did. Start runs it every RigStatesEvery.
func (r *Router) SettleRigStates(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.SettleRigStates")
	if r.rigs == nil {
		return nil
	}
	heard := map[string]catalog.Heard{}
	r.mu.RLock()
	for id, s := range r.offerings {
		s.mu.Lock()
		if s.heardAt.After(s.heardWritten) {
			heard[id] = catalog.Heard{At: s.heardAt, Native: s.heartbeat.Native}
		}
		s.mu.Unlock()
	}
	r.mu.RUnlock()
	if err := r.rigs.RecordHeartbeats(ctx, heard); err != nil {
		return err
	}
	for id, h := range heard {
		s := r.state(id)
		s.mu.Lock()
		if h.At.After(s.heardWritten) {
			s.heardWritten = h.At
		}
		s.mu.Unlock()
	}
	if r.Ready(ctx) != nil {
		return nil
	}
	now := r.cfg.Now()
	offline, err := r.rigs.MarkOffline(ctx, now.Add(-catalog.OfflineAfter), now)
	if err != nil || len(offline) == 0 {
		return err
	}
	r.log.Info("routing: rigs went offline: no heartbeat", "offerings", offline, "after", catalog.OfflineAfter)
	return r.Refresh(ctx)
}

// RecordProbe records the outcome of a probe the gateway sent: for a Qualifying candidate, it counts towards
// its rig's qualification (catalog.Service.RecordProbe), and the router reloads its catalog when the rig
// became active, so that it routes to it at once. Other probes (a demoted tier's) decide nothing here.
func (r *Router) RecordProbe(ctx context.Context, cand Candidate, result catalog.ProbeResult) (err error) {
	defer services.Wrap(&err, "routing.RecordProbe(%s)", cand.OfferingID)
	if !cand.Qualifying || r.rigs == nil {
		return nil
	}
	state, err := r.rigs.RecordProbe(ctx, cand.OfferingID, result)
	if err != nil || state != catalog.RigActive {
		return err
	}
	r.log.Info("routing: rig qualified by its probes", "offering", cand.OfferingID, "model", cand.Model,
		"probes", catalog.ProbesToQualify)
	return r.Refresh(ctx)
}
