package gateway

import "sync"

// batchLoad counts the batch lines this gateway has in flight on each offering: the gateway
// sends every line, so it alone knows which rig a line is on while it runs.
type batchLoad struct {
	mu sync.Mutex
	n  map[string]int
}

// begin counts a batch line in flight on the offering until end is called (again does nothing).
func (b *batchLoad) begin(offeringID string) (end func()) {
	b.mu.Lock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[offeringID]++
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.n[offeringID]--; b.n[offeringID] <= 0 {
				delete(b.n, offeringID)
			}
		})
	}
}

func (b *batchLoad) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.n))
	for id, n := range b.n {
		out[id] = n
	}
	return out
}

// BatchLoad is the batch lines this gateway has in flight on each offering, for the admin's
// batch queue (docs/batches.md, "The queue").
func (g *Gateway) BatchLoad() map[string]int { return g.batchLoad.snapshot() }
