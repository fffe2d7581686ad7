package history

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// offering is a demo offering the history routes to, with the benchmark profile its rig is
// simulated by.
type offering struct {
	catalog.Offering
	profile simulation.Profile
	// meanPrompt is the mean prompt of the profile's benchmark runs, in tokens.
	meanPrompt float64
	// joulesPerToken is the rig's configuration's board power over its benchmark throughput at
	// carbon.ReferenceRate: what its requests' energy is made from.
	joulesPerToken float64
}

// demoOfferings are the active offerings of the demo providers whose rig the benchmark
// measured.
func (h *history) demoOfferings(ctx context.Context) ([]offering, error) {
	var out []offering
	for _, l := range demo.Logins {
		if l.Role != accounts.RoleProvider {
			continue
		}
		u, err := h.accounts.UserByEmail(ctx, l.Email)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (seed the demo first)", l.Email, err)
		}
		list, err := h.catalog.ListOwn(ctx, u.AccountID)
		if err != nil {
			return nil, err
		}
		for _, o := range list {
			p, ok := simulation.Lookup(o.Model, o.GPU, o.GPUCount)
			_, known := hardware.GPUBySKU(o.GPU)
			if o.Status != catalog.StatusActive || !ok || !known {
				continue
			}
			var prompt float64
			for _, l := range p.Levels {
				prompt += l.MeanInputTokens
			}
			out = append(out, offering{Offering: o, profile: p, meanPrompt: prompt / float64(len(p.Levels)),
				joulesPerToken: carbon.Compare(o.Model, o.GPU, o.GPUCount).JoulesPerToken})
		}
	}
	return out, nil
}

// candidates are the offerings that serve a workload, in the order routing prefers them: the
// model in the tier, the cheapest blended ask first (routing.Pick prefers the cheapest that
// meets the promise).
func (h *history) candidates(w Workload) []offering {
	var out []offering
	for _, o := range h.offerings {
		if o.Model == w.Model && o.Tier == w.Tier {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b offering) int {
		return cmp.Or(cmp.Compare(a.BlendedAsk(), b.BlendedAsk()), cmp.Compare(a.ID, b.ID))
	})
	return out
}
