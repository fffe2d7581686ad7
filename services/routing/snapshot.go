package routing

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// snapshot is the catalog as last loaded: the active offerings, each with its router state, and the whole price
// book. It holds the offerings whose rig is pending or offline too, to probe them; routing skips them
// (listed.qualified). It is replaced whole, never changed.
type snapshot struct {
	listed   []*listed
	byModel  map[string][]*listed // ordered by blended ask, then id
	book     catalog.PriceBook
	loadedAt time.Time
}

// listed is an active offering and its router state.
type listed struct {
	catalog.Offering
	state *offeringState
	// providerKey is the provider's display name as preferences compare it (nameKey).
	providerKey string
}

// qualified reports whether the offering's rig is active: it passed the platform's probes and has not gone
// offline since. Only a qualified offering is routed or listed among the models; the others are probed
// (ProbeTargets).
func (l *listed) qualified() bool { return l.RigState == catalog.RigActive }

// askSum is twice the offering's blended ask, exact: what routing orders and caps by.
func (l *listed) askSum() int64 { return int64(l.AskInput) + int64(l.AskOutput) }

// Refresh reloads the active offerings and the price book. Start calls it every RefreshEvery; call it after a
// change that should route at once. On failure the previous catalog stays in use.
func (r *Router) Refresh(ctx context.Context) (err error) {
	defer services.Wrap(&err, "routing.Refresh")
	offerings, err := r.cat.ListActive(ctx)
	if err != nil {
		return err
	}
	book, err := r.cat.PriceBook(ctx)
	if err != nil {
		return err
	}
	snap := &snapshot{byModel: map[string][]*listed{}, book: book, loadedAt: r.cfg.Now()}
	for _, o := range offerings {
		if o.Status != catalog.StatusActive {
			continue
		}
		l := &listed{Offering: o, state: r.state(o.ID), providerKey: nameKey(o.ProviderName)}
		snap.listed = append(snap.listed, l)
		snap.byModel[o.Model] = append(snap.byModel[o.Model], l)
	}
	for _, ls := range snap.byModel {
		slices.SortFunc(ls, func(a, b *listed) int {
			return cmp.Or(cmp.Compare(a.askSum(), b.askSum()), strings.Compare(a.ID, b.ID))
		})
	}
	r.snap.Store(snap)
	return nil
}

// offered returns the price in force at now for the offering's model in the tier (its own row of the price
// book, else the tier's default: catalog.PriceBook.At) and whether it covers the offering's asks
// (catalog.Price.Covers): only then may the offering be routed in the tier, for then no request pays its
// provider more than its customer paid, whatever its mix of input and output tokens.
func (s *snapshot) offered(l *listed, tier catalog.Tier, now time.Time) (catalog.Price, bool) {
	p, ok := s.book.At(tier, l.Model, now)
	return p, ok && p.Covers(l.AskInput, l.AskOutput)
}

// ModelTiers is a model on offer, the tiers it can be asked for in, and what its requests pay in each.
type ModelTiers struct {
	Model string         `json:"model"`
	Tiers []catalog.Tier `json:"tiers"` // in catalog.Tiers order
	// Prices is, per tier of Tiers, the price in force for the model there: its own row of the price book, else
	// the tier's default (catalog.PriceBook.At).
	Prices map[catalog.Tier]catalog.Price `json:"prices"`
}

// Models lists the models on offer, by name, each with the tiers that have an offered offering of it and its
// price in each (for GET /v1/models). Only qualified offerings count (their rig active); health does not: a rig that misses a
// heartbeat does not take its model off the list.
func (r *Router) Models() []ModelTiers {
	snap := r.snap.Load()
	if snap == nil {
		return nil
	}
	now := r.cfg.Now()
	out := make([]ModelTiers, 0, len(snap.byModel))
	for model, ls := range snap.byModel {
		in := map[catalog.Tier]bool{}
		for _, l := range ls {
			if !l.qualified() {
				continue
			}
			if tier := l.liveTier(); !in[tier] {
				_, in[tier] = snap.offered(l, tier, now)
			}
		}
		mt := ModelTiers{Model: model, Prices: map[catalog.Tier]catalog.Price{}}
		for _, t := range catalog.Tiers {
			if in[t] {
				mt.Tiers = append(mt.Tiers, t)
				mt.Prices[t], _ = snap.book.At(t, model, now)
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
