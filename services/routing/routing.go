// Package routing chooses which offerings serve a gateway request, and owns the live figures that choice rests
// on: per offering, time to first token and throughput over a sliding window of the gateways' observations,
// health from the rigs' heartbeats, a circuit breaker, and the tier that measured traffic earns.
//
// The gateway's HTTP handlers call it on every request: Pick for an ordered list of candidates, Begin while a
// request is in flight, Failure or Success once the upstream answered or failed before its first byte, and
// Observe with what it saw when the request ended. Start subscribes to heartbeats, to the other gateway replicas'
// observations (events.ObservedSubject) and to the meter's feed of committed usage (events.MeteredSubject, passed to
// ObserveUsage); asks every rig for a heartbeat at once (events.HeartbeatRequestSubject), so that a restarted
// gateway routes within moments; reloads the catalog every few seconds; and writes the live figures and tiers
// back to the offerings table, so that the catalog shows "measured over N requests".
//
// The rules, each in one place (see docs/tiers-and-asks.md):
//   - Offered: an offering is offered for routing in a tier when it is active and the price in force at the
//     moment of Pick for its model in the tier (the model's own row of the price book, else the tier's
//     default) covers its asks: its input ask at most the input price, its output ask at most the output
//     price (catalog.Price.Covers), so that no request pays a provider more than its customer paid.
//     The router holds the whole price book, so a scheduled change takes effect at its instant (offered).
//   - Candidates serve the model, are offered, sit in the request's tier, are under the request's caps
//     (MaxPricePerMTok against the offering's blended ask, catalog.Offering.BlendedAsk, as the catalog's max
//     price filter; MaxTTFTMillis against the live P99, or the catalog's P99 when live traffic is thin), have a
//     heartbeat from their own provider within HeartbeatTimeout, and their circuit is not open (Pick).
//   - Uptime first: an offering below 95% uptime over the last day, with at least 100 requests in it, comes after
//     every other; below 80%, only when no other is left (reliability.go, docs/reliability.md).
//   - Order: cheapest blended ask first; among near-equals (within 5% of the cheapest remaining), the power of
//     two choices on expected wait, live P50 time to first token scaled by load (Pick).
//   - Live figures are the gateways' own: what this replica and the others observed from outside the rigs,
//     each request counted once (Observe, share.go). A rig's own figures, from its usage events, go to a window
//     apart (ObserveUsage), are written beside the measured ones, and decide nothing.
//   - Tiers move on the measured P99 with at least catalog.MinMeasuredRequests observations, with a 10% margin
//     each way, at most once a minute (Flush).
//   - Rigs earn their place: only an offering whose rig is active (catalog.RigActive: qualified by the
//     platform's probes, heard from within catalog.OfflineAfter) is routed; pending and offline ones are probed
//     while they heartbeat, never given a customer's request (rigstates.go, ProbeTargets, Pick).
//   - Ready: once the catalog is loaded and the rigs have answered the heartbeat request, or readyWait has
//     passed (Ready).
//
// All of it is in memory, per process, behind a lock per offering; PostgreSQL is read for the catalog and
// written with the figures. Replicas share their observations, so their windows agree up to the requests in
// flight between them, and the last Flush wins.
//
// Tables of other packages it reads: accounts (package accounts); offerings, prices (package
// catalog). It writes one column of catalog's: offerings.tier, the tier it moves an offering to by
// its measured latency (docs/tiers-and-asks.md), with the figures beside it; rigs' heartbeats, probes and
// states it writes through the catalog's own functions (RigStates).
package routing

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
)

// Defaults for Config.
const (
	DefaultRefreshEvery = 5 * time.Second  // catalog reload
	DefaultFlushEvery   = 15 * time.Second // figures and tiers written to the offerings table
)

// Catalog is what the router reads from the catalog: every active offering, whatever its asks, and the whole
// price book, so that the router applies the price in force itself at each Pick. *catalog.Service implements it.
type Catalog interface {
	ListActive(ctx context.Context) ([]catalog.Offering, error)
	PriceBook(ctx context.Context) (catalog.PriceBook, error)
}

var _ Catalog = (*catalog.Service)(nil)

// Config wires a Router.
type Config struct {
	// Pool is where Flush writes the figures, and the catalog's database when Catalog is nil. Nil keeps the
	// figures in memory only: Start then does not flush.
	Pool *pgxpool.Pool
	// Catalog is where routable offerings and prices come from; nil means the catalog on Pool.
	Catalog Catalog
	// RigStates is where rigs' heartbeats and probes are written down and their states decided
	// (rigstates.go); nil means the Catalog when it implements RigStates, else none: states are then only
	// read, never changed.
	RigStates RigStates
	// NATS is the connection Start subscribes to heartbeats, the other replicas' observations and the meter's
	// feed on, and publishes this replica's observations and the heartbeat request on.
	NATS *nats.Conn
	// Instance names this router among the gateway replicas, so that it skips its own shared observations;
	// empty means a random one.
	Instance string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand drives the power of two choices; nil means a randomly seeded source. The router serialises its use.
	Rand *rand.Rand
	// RefreshEvery, FlushEvery and ShareEvery are Start's periods; zero means the defaults.
	RefreshEvery time.Duration
	FlushEvery   time.Duration
	ShareEvery   time.Duration
	// Log gets failed reloads and flushes, ignored heartbeats and tier moves; nil means slog.Default().
	Log *slog.Logger
	// Reliability places each offering by its uptime (reliability.go); nil places every offering alike.
	Reliability Standings
}

// Router is the gateway's routing table. Its methods are safe for concurrent use.
type Router struct {
	cfg  Config
	cat  Catalog
	rigs RigStates // nil: no state is changed
	// figureStore is where Flush writes the offerings' figures and tiers (the catalog); nil writes none.
	figureStore FiguresStore
	log         *slog.Logger

	randMu sync.Mutex
	rnd    *rand.Rand

	snap atomic.Pointer[snapshot]

	mu        sync.RWMutex
	offerings map[string]*offeringState

	sharer sharer
	ready  readiness

	// conversations is the offering that last served each conversation (sticky.go).
	conversations conversations

	// stop ends Start's loop and done is closed once it has returned (Close).
	stop context.CancelFunc
	done chan struct{}
}

// New returns a router; Pick answers once Refresh (or Start) has loaded the catalog.
func New(cfg Config) *Router {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.RefreshEvery <= 0 {
		cfg.RefreshEvery = DefaultRefreshEvery
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.ShareEvery <= 0 {
		cfg.ShareEvery = DefaultShareEvery
	}
	if cfg.Instance == "" {
		cfg.Instance = services.NewTimeOrderedID("gw_", time.Now())
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cat := cfg.Catalog
	if cat == nil {
		cat = catalog.NewService(cfg.Pool, catalog.Config{Now: cfg.Now})
	}
	rigs := cfg.RigStates
	if rs, ok := cat.(RigStates); ok && rigs == nil {
		rigs = rs
	}
	r := &Router{cfg: cfg, cat: cat, rigs: rigs, log: cfg.Log, rnd: cfg.Rand, offerings: map[string]*offeringState{}}
	if fs, ok := cat.(FiguresStore); ok && cfg.Pool != nil {
		r.figureStore = fs
	}
	r.sharer.kick = make(chan struct{}, 1)
	return r
}

// Start subscribes to every rig's heartbeats (heartbeat.>), to the other replicas' observations
// (events.ObservedSubject) and to the meter's feed (events.MeteredSubject); loads the catalog; and asks every rig for a
// heartbeat now (events.HeartbeatRequestSubject), once the server has the subscriptions, so that the answers
// are not lost. Then, until ctx ends, it reloads the catalog every RefreshEvery, publishes this replica's
// observations every ShareEvery, settles the rigs' states every RigStatesEvery (SettleRigStates) and flushes
// the figures every FlushEvery (when there is a Pool). It returns once
// the subscriptions are up, the first load is done and the heartbeat request is out; a failure of any is
// returned. Close ends the loop and waits for its last flush.
func (r *Router) Start(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.Start")
	if r.cfg.NATS == nil {
		return errors.New("no NATS connection for heartbeats")
	}
	if r.done != nil {
		return errors.New("the router is started already")
	}
	var subs []*nats.Subscription
	unsubscribe := func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}
	for subject, handler := range map[string]nats.MsgHandler{
		events.Below(events.HeartbeatPrefix): r.onHeartbeat,
		events.ObservedSubject:               r.onObserved,
		events.MeteredSubject:                r.onMetered,
	} {
		sub, err := r.cfg.NATS.Subscribe(subject, handler)
		if err != nil {
			unsubscribe()
			return err
		}
		subs = append(subs, sub)
	}
	// A flush round-trips to the server, which has then registered the subscriptions: a heartbeat sent in answer
	// to the request below reaches them.
	if err := r.cfg.NATS.FlushTimeout(subscribeTimeout); err != nil {
		unsubscribe()
		return err
	}
	if err := r.Refresh(ctx); err != nil {
		unsubscribe()
		return err
	}
	// The request's time is taken before it goes out, so that every answer is heard after it (Ready).
	r.ready.requested(r.cfg.Now())
	if err := r.cfg.NATS.Publish(events.HeartbeatRequestSubject, nil); err != nil {
		unsubscribe()
		return err
	}
	r.sharer.mu.Lock()
	r.sharer.on = true
	r.sharer.mu.Unlock()
	ctx, r.stop = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		r.run(ctx, unsubscribe)
	}()
	return nil
}

// Close ends what Start runs and waits for it: the subscriptions are gone, and the last observations shared and
// the last figures flushed, once it returns. It does nothing for a router never started, and may be called again.
func (r *Router) Close() {
	if r.done == nil {
		return
	}
	r.stop()
	<-r.done
}

// subscribeTimeout bounds the wait for the server to confirm Start's subscriptions.
const subscribeTimeout = 5 * time.Second

func (r *Router) run(ctx context.Context, unsubscribe func()) {
	defer unsubscribe()
	refresh := time.NewTicker(r.cfg.RefreshEvery)
	defer refresh.Stop()
	flush := time.NewTicker(r.cfg.FlushEvery)
	defer flush.Stop()
	share := time.NewTicker(r.cfg.ShareEvery)
	defer share.Stop()
	rigStates := time.NewTicker(RigStatesEvery)
	defer rigStates.Stop()
	for {
		select {
		case <-ctx.Done():
			r.sharer.mu.Lock()
			r.sharer.on = false
			r.sharer.mu.Unlock()
			r.publishShared()
			if r.cfg.Pool != nil {
				// The last window is worth keeping: flush it once more, briefly, past the end of ctx.
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				if err := r.Flush(fctx); err != nil {
					r.log.Warn("routing: last flush failed", "error", err)
				}
				cancel()
			}
			return
		case <-refresh.C:
			if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("routing: catalog reload failed; routing on the last one", "error", err)
			}
		case <-rigStates.C:
			if err := r.SettleRigStates(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("routing: rigs' heartbeats or states not written", "error", err)
			}
		case <-share.C:
			r.publishShared()
		case <-r.sharer.kick:
			r.publishShared()
		case <-flush.C:
			if r.cfg.Pool == nil {
				continue
			}
			if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("routing: flush of live figures failed", "error", err)
			}
		}
	}
}

// state returns the offering's state, creating it on first use.
func (r *Router) state(offeringID string) *offeringState {
	r.mu.RLock()
	s := r.offerings[offeringID]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.offerings[offeringID]; s == nil {
		s = newOfferingState()
		r.offerings[offeringID] = s
	}
	return s
}

// intn returns a random integer in [0, n).
func (r *Router) intn(n int) int {
	r.randMu.Lock()
	defer r.randMu.Unlock()
	return r.rnd.IntN(n)
}
