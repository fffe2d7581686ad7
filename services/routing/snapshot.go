package routing

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// snapshot is the catalog as last loaded: the active offerings, each with its router state, and the price
// book in force. It is replaced whole, never changed.
type snapshot struct {
	listed   []*listed
	byModel  map[string][]*listed // ordered by ask, then id
	prices   map[catalog.Tier]catalog.Price
	loadedAt time.Time
}

// listed is an active offering and its router state.
type listed struct {
	catalog.Offering
	state *offeringState
}

// Refresh reloads the active offerings and the price book in force. Start calls it every RefreshEvery; call it
// after a change that should route at once. On failure the previous catalog stays in use.
func (r *Router) Refresh(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.Refresh")
	offerings, err := r.cat.List(ctx, catalog.ListInput{})
	if err != nil {
		return err
	}
	prices, err := r.cat.CurrentPrices(ctx)
	if err != nil {
		return err
	}
	snap := &snapshot{byModel: map[string][]*listed{}, prices: prices, loadedAt: r.cfg.Now()}
	for _, o := range offerings {
		if o.Status != catalog.StatusActive || o.AgentURL == "" {
			continue
		}
		l := &listed{Offering: o, state: r.state(o.ID)}
		snap.listed = append(snap.listed, l)
		snap.byModel[o.Model] = append(snap.byModel[o.Model], l)
	}
	for _, ls := range snap.byModel {
		slices.SortFunc(ls, func(a, b *listed) int { return cmp.Or(cmp.Compare(a.Ask, b.Ask), strings.Compare(a.ID, b.ID)) })
	}
	r.snap.Store(snap)
	return nil
}

// offered reports whether an offering with this ask may be routed in the tier: the tier has a price in force
// and the ask is at most its blended price, (input + output) / 2. Asks are per million tokens of either kind and
// the benchmark they come from mixes input and output about 50/50, so above that price the platform would pay
// the provider more than the customer pays it for typical traffic. (A request much heavier in input than that
// can still cost the platform a little on an offering close to the bound; the strict bound, the input price,
// would leave every batch offering of the benchmark unroutable.)
func (s *snapshot) offered(ask money.MicroUSD, tier catalog.Tier) bool {
	p, ok := s.prices[tier]
	return ok && 2*ask <= p.Input+p.Output
}

// ModelTiers is a model on offer and the tiers it can be asked for in.
type ModelTiers struct {
	Model string         `json:"model"`
	Tiers []catalog.Tier `json:"tiers"` // in catalog.Tiers order
}

// Models lists the models on offer, by name, each with the tiers that have an offered offering of it (for
// GET /v1/models). Health does not count: a rig that misses a heartbeat does not take its model off the list.
func (r *Router) Models() []ModelTiers {
	snap := r.snap.Load()
	if snap == nil {
		return nil
	}
	out := make([]ModelTiers, 0, len(snap.byModel))
	for model, ls := range snap.byModel {
		in := map[catalog.Tier]bool{}
		for _, l := range ls {
			if tier := l.liveTier(); snap.offered(l.Ask, tier) {
				in[tier] = true
			}
		}
		mt := ModelTiers{Model: model}
		for _, t := range catalog.Tiers {
			if in[t] {
				mt.Tiers = append(mt.Tiers, t)
			}
		}
		if len(mt.Tiers) > 0 {
			out = append(out, mt)
		}
	}
	slices.SortFunc(out, func(a, b ModelTiers) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// liveTier is the offering's tier: the one live traffic moved it to, else the catalog's.
func (l *listed) liveTier() catalog.Tier {
	l.state.mu.Lock()
	defer l.state.mu.Unlock()
	if l.state.tier != "" {
		return l.state.tier
	}
	return l.Tier
}
