package history

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// ensurePriceChange puts the history's price change (priceChange) in the price book, unless
// the tier already holds a row at its prices. It takes effect priceChangeDaysAgo days before
// today, or the day after the tier's row in force now when that row is later (a platform
// seeded by an earlier version started its book at the month of its first seed): a change
// placed before a row of the old price would be undone by it.
func (h *history) ensurePriceChange(ctx context.Context) error {
	book, err := h.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	from := h.today.AddDate(0, 0, -priceChangeDaysAgo)
	if p, ok := book.At(priceChange.Tier, h.now); ok && !p.EffectiveFrom.Before(from) {
		e := p.EffectiveFrom.UTC()
		from = time.Date(e.Year(), e.Month(), e.Day()+1, 0, 0, 0, 0, time.UTC)
	}
	_, err = h.catalog.SeedPriceChange(ctx, h.financeUser.ID, catalog.ScheduleInput{Tier: priceChange.Tier,
		Input: priceChange.Input, Output: priceChange.Output, EffectiveFrom: from}, from.Add(-priceChangeNotice))
	return err
}
