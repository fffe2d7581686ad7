package catalog

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/money"
)

// Bulk loads: what the benchmarks (cmd/closebench, cmd/meterbench, cmd/reportsbench) and data loads use to write a
// price book and offerings by COPY, as given: a price already in force, which SchedulePrice refuses, included. A
// load checks nothing and writes nothing else (no audit entry, no event); ReadPriceBook reads the prices back with
// their ids.

// Loader is what a bulk load writes through: the pool, or a caller's transaction.
type Loader = services.Loader

// LoadedPrice is a row of the price book as CopyPrices writes it: a tier's default, for every model.
type LoadedPrice struct {
	Tier          Tier
	Input, Output money.MicroUSD
	EffectiveFrom time.Time
	CreatedAt     time.Time
}

// CopyPrices writes the prices by one COPY, each with no author and the default cached input price (a quarter of
// its input price), and returns how many it wrote.
func CopyPrices(ctx context.Context, db Loader, prices []LoadedPrice) (_ int64, err error) {
	defer services.Wrap(&err, "catalog.CopyPrices")
	return db.CopyFrom(ctx, pgx.Identifier{"prices"},
		[]string{"tier", "input_micro_usd_per_mtok", "output_micro_usd_per_mtok", "effective_from", "created_at"},
		pgx.CopyFromSlice(len(prices), func(i int) ([]any, error) {
			p := &prices[i]
			return []any{string(p.Tier), int64(p.Input), int64(p.Output), p.EffectiveFrom, p.CreatedAt}, nil
		}))
}

// LoadedOffering is an offering as CopyOfferings writes it, with the id the caller chose.
type LoadedOffering struct {
	ID, ProviderAccountID string
	GPU                   string
	GPUCount              int
	Region, Model         string
	AskInput, AskOutput   money.MicroUSD
	Tier                  Tier
	Status                Status
	SeedKey               string      // "" for none
	Site                  carbon.Site // "" for home
	StatedPUE             *float64
	CreatedAt, UpdatedAt  time.Time
}

// CopyOfferings writes the offerings by one COPY, each without claimed, measured or reported figures and with its
// rig pending, and returns how many it wrote.
func CopyOfferings(ctx context.Context, db Loader, offerings []LoadedOffering) (_ int64, err error) {
	defer services.Wrap(&err, "catalog.CopyOfferings")
	return db.CopyFrom(ctx, pgx.Identifier{"offerings"},
		[]string{"id", "provider_account_id", "gpu", "gpu_count", "region", "model", "ask_input_micro_usd_per_mtok",
			"ask_output_micro_usd_per_mtok", "tier", "status", "seed_key", "site", "pue", "created_at", "updated_at"},
		pgx.CopyFromSlice(len(offerings), func(i int) ([]any, error) {
			o := &offerings[i]
			var seedKey *string
			if o.SeedKey != "" {
				seedKey = &o.SeedKey
			}
			site := o.Site
			if site == "" {
				site = carbon.SiteHome
			}
			return []any{o.ID, o.ProviderAccountID, o.GPU, int32(o.GPUCount), o.Region, o.Model, int64(o.AskInput),
				int64(o.AskOutput), string(o.Tier), string(o.Status), seedKey, string(site), o.StatedPUE, o.CreatedAt,
				o.UpdatedAt}, nil
		}))
}
