package history

import (
	"context"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
)

// ensurePriceChange puts the history's price change (priceChange) in the price book, unless
// the tier already holds a row at its prices. It takes effect priceChangeDaysAgo days before
// today, or, on a platform whose tier has usage metered since then, the day after its latest:
// a row put in force before it would say a price was in force that its requests were not
// billed at (docs/failure-cases.md, case 14). A row of the old price that starts after the
// change (a platform seeded by an earlier version started its book in the month of its first
// seed) ends the change there, as a later change would.
func (h *history) ensurePriceChange(ctx context.Context) error {
	from := h.today.AddDate(0, 0, -priceChangeDaysAgo)
	l, ok, err := metering.LatestUsageOfTier(ctx, h.pool, string(priceChange.Tier))
	if err != nil {
		return fmt.Errorf("the latest %s usage: %w", priceChange.Tier, err)
	}
	if ok && !l.Before(from) {
		from = time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, time.UTC)
	}
	_, err = h.catalog.SeedPriceChange(ctx, h.financeUser.ID, catalog.ScheduleInput{Tier: priceChange.Tier,
		Input: priceChange.Input, Output: priceChange.Output, EffectiveFrom: from}, from.Add(-priceChangeNotice))
	return err
}
