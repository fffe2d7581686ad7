package core

import "github.com/gpumarket/gpumarket/services/routing"

// Router is what the pages and the API ask of this process's gateway's routing table.
// *routing.Router implements it.
type Router interface {
	Models() []routing.ModelTiers
	// Capacity is the requests an offering's rig serves at once by its last heartbeat (0: none).
	Capacity(offeringID string) int
}

var _ Router = (*routing.Router)(nil)
