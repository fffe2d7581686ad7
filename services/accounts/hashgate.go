package accounts

import (
	"context"
	"runtime"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// hashGate bounds how many password hashes run at once. Each argon2id hash holds its memory
// cost (19 MiB with DefaultHasher) while it runs, so without a bound a flood of logins or
// sign-ups turns straight into memory; with one, the memory is at most slots times the cost.
// A request that finds every slot taken waits up to wait for one, then is told to retry: it
// never queues without end. See docs/web-security.md ("Password hashing").
type hashGate struct {
	slots chan struct{}
	wait  time.Duration
}

// Defaults of the gate: a hash is CPU-bound, so more at once than cores only adds memory.
const (
	minHashSlots    = 2
	maxHashSlots    = 16
	DefaultHashWait = time.Second
)

// DefaultHashSlots is GOMAXPROCS, from 2 to 16: at most 16 x 19 MiB = 304 MiB of hashing.
func DefaultHashSlots() int {
	return min(max(runtime.GOMAXPROCS(0), minHashSlots), maxHashSlots)
}

func newHashGate(slots int, wait time.Duration) *hashGate {
	if slots <= 0 {
		slots = DefaultHashSlots()
	}
	if wait <= 0 {
		wait = DefaultHashWait
	}
	return &hashGate{slots: make(chan struct{}, slots), wait: wait}
}

// errBusy is what a request gets when no hashing slot came free in time.
var errBusy = services.Errorf(services.CodeUnavailable,
	"Too many people are signing in at this moment. Nothing was changed: retry in a few seconds.")

// run runs f in a slot, waiting up to the gate's wait for one.
func (g *hashGate) run(ctx context.Context, f func()) error {
	select {
	case g.slots <- struct{}{}:
	default:
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-t.C:
			return errBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-g.slots }()
	f()
	return nil
}
