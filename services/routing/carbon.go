package routing

import (
	"cmp"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// Carbon-aware routing (docs/planner-and-carbon-routing.md). A request that prefers carbon is
// served by the candidate with the lowest estimated gCO2e per token among those that keep its
// tier's promise and its caps: the same filters as any request, only the order differs. Its
// figure is the estimate of catalog.EstimateEmissions: board power x GPU count over the rig's
// tokens per second (the live window's when it holds catalog.MinMeasuredRequests requests,
// else the catalog's measured or claimed figure), x the region's grid intensity x the site's PUE.

// estimateCarbon fills in the choice's estimated gCO2e per token, from its throughput (choice.estimate).
func (c *choice) estimateCarbon() {
	if e, ok := catalog.EstimateEmissions(c.GPU, c.GPUCount, c.tps, c.Region, c.Site, c.StatedPUE); ok {
		c.gco2ePerToken = e.GCO2ePerToken
	}
}

// byCarbon orders candidates with room before saturated ones, then by estimated gCO2e per token,
// lowest first, an offering without an estimate last, then by blended ask and id.
func byCarbon(a, b choice) int {
	if a.saturated != b.saturated {
		if a.saturated {
			return 1
		}
		return -1
	}
	if (a.gco2ePerToken > 0) != (b.gco2ePerToken > 0) {
		if a.gco2ePerToken > 0 {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.gco2ePerToken, b.gco2ePerToken), cmp.Compare(a.askSum(), b.askSum()), cmp.Compare(a.ID, b.ID))
}
