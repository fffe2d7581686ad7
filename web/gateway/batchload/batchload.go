// Package batchload counts the batch lines a gateway has in flight on each offering, for the
// admin's batch queue (docs/batches.md, "The queue"): the gateway sends every line, so it alone
// knows which rig a line is on while it runs.
package batchload

import "sync"

// Load counts the batch lines in flight on each offering. Its zero value counts none.
type Load struct {
	mu sync.Mutex
	n  map[string]int
}

// Begin counts a batch line in flight on the offering until end is called (again does nothing).
func (b *Load) Begin(offeringID string) (end func()) {
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

// Snapshot is the lines in flight on each offering now.
func (b *Load) Snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.n))
	for id, n := range b.n {
		out[id] = n
	}
	return out
}
