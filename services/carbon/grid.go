package carbon

import (
	"strings"

	"github.com/gpumarket/gpumarket/services/hardware"
)

// FallbackRegion is the grid a rig's figures use when its region is none the platform lists
// (an offering listed before regions were checked): the world average, whose row names it.
const FallbackRegion = "world"

// Grid is the region's grid intensity, or the world average's for a region not listed; listed
// says which.
func Grid(region string) (r hardware.Region, listed bool) {
	if r, ok := Intensity(strings.ToLower(region)); ok {
		return r, true
	}
	r, _ = Intensity(FallbackRegion)
	return r, false
}
