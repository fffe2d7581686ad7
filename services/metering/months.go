package metering

import (
	"context"
	"time"
)

// makeMonths makes the monthly partitions of usage_events the batch's rows go to, when one is
// missing: a month not yet made ahead (a meter whose clock is in the past, as the demo
// history's). Each is made in a transaction of its own, before the batch's. A failure is only
// logged: the batch is written all the same, its rows of that month in the DEFAULT partition,
// from which the next pass that makes the month moves them (docs/usage-storage.md).
func (m *Meter) makeMonths(ctx context.Context, cands []candidate) {
	times := make([]time.Time, len(cands))
	for i := range cands {
		times[i] = cands[i].ev.Time
	}
	if err := m.months.MakeMonths(ctx, times); err != nil && ctx.Err() == nil {
		m.cfg.Log.Warn("a month's usage partition could not be made; its rows wait in the default partition", "err", err)
	}
}
