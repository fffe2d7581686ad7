package catalog

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Price is what a customer pays per million tokens in a tier, from a date on.
type Price struct {
	Tier          Tier           `json:"tier"`
	Input         money.MicroUSD `json:"input_usd_per_mtok"`
	Output        money.MicroUSD `json:"output_usd_per_mtok"`
	EffectiveFrom time.Time      `json:"effective_from"`
}

// DefaultPrices is the price book a new platform starts with. Realtime sits above the
// enterprise asks it routes to (about $0.17-0.31 per million at the benchmark's load);
// standard and batch sit above the consumer clusters' asks ($0.03-0.15).
var DefaultPrices = []Price{
	{Tier: TierRealtime, Input: 300_000, Output: 600_000},
	{Tier: TierStandard, Input: 150_000, Output: 300_000},
	{Tier: TierBatch, Input: 80_000, Output: 160_000},
}

// PricesAt returns, per tier, the price in force at t: the latest row effective at or before t.
func (s *Service) PricesAt(ctx context.Context, t time.Time) (_ map[Tier]Price, err error) {
	defer services.Wrap(&err, "catalog.PricesAt")
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT ON (tier) tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from
		FROM prices WHERE effective_from <= $1
		ORDER BY tier, effective_from DESC`, t)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Price, error) {
		var p Price
		var in, out int64
		err := r.Scan(&p.Tier, &in, &out, &p.EffectiveFrom)
		p.Input, p.Output = money.MicroUSD(in), money.MicroUSD(out)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	m := make(map[Tier]Price, len(list))
	for _, p := range list {
		m[p.Tier] = p
	}
	return m, nil
}

// CurrentPrices is PricesAt now.
func (s *Service) CurrentPrices(ctx context.Context) (map[Tier]Price, error) {
	return s.PricesAt(ctx, s.now())
}

// EnsureDefaultPrices gives every tier that has no price yet its default, effective from
// effectiveFrom. Tiers that have prices are left alone, so running it twice changes nothing.
func (s *Service) EnsureDefaultPrices(ctx context.Context, effectiveFrom time.Time) (err error) {
	defer services.Wrap(&err, "catalog.EnsureDefaultPrices")
	for _, p := range DefaultPrices {
		if _, err := s.pool.Exec(ctx, `
			INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
			SELECT $1, $2, $3, $4, $5
			WHERE NOT EXISTS (SELECT 1 FROM prices WHERE tier = $1)`,
			string(p.Tier), int64(p.Input), int64(p.Output), effectiveFrom.UTC(), s.now().UTC()); err != nil {
			return err
		}
	}
	return nil
}
