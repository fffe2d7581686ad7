package history

import (
	"sync"
	"time"
)

// clock is the simulated time the history's services run on: the meter, the ledger, the
// credits and their webhook, the API keys. The history sets it to each moment of the past it
// acts at, in order.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t.UTC()
	c.mu.Unlock()
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
