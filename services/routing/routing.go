// Package routing chooses which offerings serve a gateway request, and owns the live figures that choice rests
// on: per offering, time to first token and throughput over a sliding window of observed requests, health from
// the rigs' heartbeats, a circuit breaker, and the tier that measured traffic earns (FIELD-CASES 17, 18).
//
// The gateway's HTTP handlers call it on every request: Pick for an ordered list of candidates, Begin while a
// request is in flight, Failure or Success once the upstream answered or failed before its first byte, and
// Observe with what it saw when the request ended. The meter's stored usage comes in through ObserveUsage.
// Start subscribes to heartbeats and to the meter's feed of committed usage (metering.FeedSubject, which it passes
// to ObserveUsage), reloads the catalog every few seconds and writes the live figures and tiers back to the
// offerings table, so that the catalog shows "measured over N requests".
//
// The rules, each in one place:
//   - Routable: an offering is offered for routing when it is active and its ask is at most its tier's blended
//     price, (input + output) / 2, the break-even of the 50/50 token mix the asks are computed at. Above it the
//     platform would pay a provider more than the customer pays for typical traffic (offered).
//   - Candidates serve the model, are offered, sit in the request's tier, are under the request's caps
//     (MaxPricePerMTok against the ask, as the catalog's max price filter; MaxTTFTMillis against the live P99,
//     or the catalog's P99 when live traffic is thin), have a heartbeat from their own provider within
//     HeartbeatTimeout, and their circuit is not open (Pick).
//   - Order: cheapest ask first; among near-equals (within 5% of the cheapest remaining ask), the power of two
//     choices on expected wait, live P50 time to first token scaled by load (Pick).
//   - Live figures: gateway observations win over metered ones for the same request id; a request is counted
//     once whichever arrives first (Observe).
//   - Tiers move on live P99 with at least catalog.MinMeasuredRequests observations, with a 10% margin each
//     way, at most once a minute (Flush).
//
// All of it is in memory, per process, behind a lock per offering; PostgreSQL is read for the catalog and
// written with the figures. Gateway replicas each keep their own view and the last Flush wins; the meter's feed
// adds the requests other replicas routed, so that every replica's window holds the offering's whole metered
// traffic (ARCHITECTURE, Scaling: live figures are shared through NATS).
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
	"github.com/gpumarket/gpumarket/services/metering"
)

// Defaults for Config.
const (
	DefaultRefreshEvery = 5 * time.Second  // catalog reload
	DefaultFlushEvery   = 15 * time.Second // figures and tiers written to the offerings table
)

// Catalog is what the router reads from the catalog: the active offerings and the price book in force.
// *catalog.Service implements it.
type Catalog interface {
	List(ctx context.Context, in catalog.ListInput) ([]catalog.Offering, error)
	CurrentPrices(ctx context.Context) (map[catalog.Tier]catalog.Price, error)
}

var _ Catalog = (*catalog.Service)(nil)

// Config wires a Router.
type Config struct {
	// Pool is where Flush writes the figures, and the catalog's database when Catalog is nil. Nil keeps the
	// figures in memory only: Start then does not flush.
	Pool *pgxpool.Pool
	// Catalog is where routable offerings and prices come from; nil means catalog.NewService(Pool, Now).
	Catalog Catalog
	// NATS is the connection Start subscribes to heartbeats and the meter's feed on.
	NATS *nats.Conn
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand drives the power of two choices; nil means a randomly seeded source. The router serialises its use.
	Rand *rand.Rand
	// RefreshEvery and FlushEvery are Start's periods; zero means the defaults.
	RefreshEvery time.Duration
	FlushEvery   time.Duration
	// Log gets failed reloads and flushes, ignored heartbeats and tier moves; nil means slog.Default().
	Log *slog.Logger
}

// Router is the gateway's routing table. Its methods are safe for concurrent use.
type Router struct {
	cfg Config
	cat Catalog
	log *slog.Logger

	randMu sync.Mutex
	rnd    *rand.Rand

	snap atomic.Pointer[snapshot]

	mu        sync.RWMutex
	offerings map[string]*offeringState
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
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cat := cfg.Catalog
	if cat == nil {
		cat = catalog.NewService(cfg.Pool, cfg.Now)
	}
	return &Router{cfg: cfg, cat: cat, log: cfg.Log, rnd: cfg.Rand, offerings: map[string]*offeringState{}}
}

// Start subscribes to every rig's heartbeats (heartbeat.>) and to the meter's feed (metering.FeedSubject), loads
// the catalog, and then, until ctx ends, reloads it every RefreshEvery and flushes the figures every FlushEvery
// (when there is a Pool). It returns once the subscriptions are up and the first load is done; a failure of
// either is returned.
func (r *Router) Start(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.Start")
	if r.cfg.NATS == nil {
		return errors.New("no NATS connection for heartbeats")
	}
	var subs []*nats.Subscription
	unsubscribe := func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}
	for subject, handler := range map[string]nats.MsgHandler{
		events.HeartbeatPrefix + ".>": r.onHeartbeat,
		metering.FeedSubject:          r.onMetered,
	} {
		sub, err := r.cfg.NATS.Subscribe(subject, handler)
		if err != nil {
			unsubscribe()
			return err
		}
		subs = append(subs, sub)
	}
	if err := r.Refresh(ctx); err != nil {
		unsubscribe()
		return err
	}
	go r.run(ctx, unsubscribe)
	return nil
}

func (r *Router) run(ctx context.Context, unsubscribe func()) {
	defer unsubscribe()
	refresh := time.NewTicker(r.cfg.RefreshEvery)
	defer refresh.Stop()
	flush := time.NewTicker(r.cfg.FlushEvery)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
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
