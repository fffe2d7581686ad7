package gateway

// BatchLoad is the batch lines this gateway has in flight on each offering, for the admin's
// batch queue (docs/batches.md, "The queue"; package batchload).
func (g *Gateway) BatchLoad() map[string]int { return g.batchLoad.Snapshot() }
