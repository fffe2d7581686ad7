package catalog

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// SeedPriceChange records a change of the price book as the user byUserID scheduled it at
// scheduledAt, for demo data whose past is made after the fact (services/demo/history). Like
// SchedulePrice it refuses a change that takes effect before it was scheduled, judged at
// scheduledAt. It adds nothing, and reports created false, when the tier already holds a row at
// the change's prices or a row at its instant for the same model (or default), so that seeding
// twice changes nothing.
func (s *Service) SeedPriceChange(ctx context.Context, byUserID string, in ScheduleInput, scheduledAt time.Time) (created bool, err error) {
	defer services.Wrap(&err, "catalog.SeedPriceChange(%s)", in.Tier)
	if err := in.Validate(scheduledAt); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO prices (tier, model, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_by, created_at,
			cached_input_micro_usd_per_mtok)
		SELECT $1, $7, $2, $3, $4, $5, $6, $8
		WHERE NOT EXISTS (SELECT 1 FROM prices
			WHERE tier = $1 AND model IS NOT DISTINCT FROM $7 AND input_micro_usd_per_mtok = $2 AND output_micro_usd_per_mtok = $3)
		ON CONFLICT ON CONSTRAINT prices_tier_model_effective_from_key DO NOTHING`,
		string(in.Tier), int64(in.Input), int64(in.Output), in.EffectiveFrom.UTC(), byUserID, scheduledAt.UTC(), nullModel(in.Model),
		int64(in.cachedInput()))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}
