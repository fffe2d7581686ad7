package metering

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// The hourly rollups (usage_hourly) as other packages read them: a provider's view of its rigs, the reports and
// the close. Each function reads through a Querier, so that a caller that needs one snapshot across its reads
// passes its transaction.

// Querier is what the rollups are read through: the pool, or a caller's transaction.
type Querier = services.Querier

// OfferingRollup is an offering's sums over a window, from usage_hourly.
type OfferingRollup struct {
	Requests        int64
	InputTokens     int64
	OutputTokens    int64
	BusyMs          float64 // the requests' durations, summed
	EnergyJ         float64 // what the rig reported, measured or estimated
	EnergyMeasuredJ float64 // of which measured
	// EnergySimulatedJ is the part a simulated power sensor reported: neither measured nor estimated.
	EnergySimulatedJ float64
	Payable          money.BigPico
}

// ProviderRollups sums the rollups of the provider's offerings over [from, to), by offering id, through
// usage_hourly_provider_idx. An offering without usage in the window is missing from the map.
func ProviderRollups(ctx context.Context, q Querier, providerAccountID string, from, to time.Time) (_ map[string]OfferingRollup, err error) {
	defer services.Wrap(&err, "metering.ProviderRollups")
	rows, err := q.Query(ctx, `
		SELECT offering_id, sum(requests)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint,
			sum(busy_ms), sum(energy_j), sum(energy_measured_j), sum(energy_simulated_j), sum(payable_pico)
		FROM usage_hourly
		WHERE provider_account_id = $1 AND hour >= $2 AND hour < $3
		GROUP BY offering_id`, providerAccountID, from, to)
	if err != nil {
		return nil, err
	}
	rollups := map[string]OfferingRollup{}
	var id string
	var r OfferingRollup
	if _, err := pgx.ForEachRow(rows, []any{&id, &r.Requests, &r.InputTokens, &r.OutputTokens, &r.BusyMs, &r.EnergyJ,
		&r.EnergyMeasuredJ, &r.EnergySimulatedJ, &r.Payable}, func() error {
		rollups[id] = r
		return nil
	}); err != nil {
		return nil, err
	}
	return rollups, nil
}

// RolledUpRequests counts, in tx, the requests the rollups hold of the hours [from, to): what the usage retention
// (package usagestore) checks against a month's rows before it drops them.
func RolledUpRequests(ctx context.Context, tx pgx.Tx, from, to time.Time) (_ int64, err error) {
	defer services.Wrap(&err, "metering.RolledUpRequests")
	var n int64
	err = tx.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint FROM usage_hourly WHERE hour >= $1 AND hour < $2`,
		from, to).Scan(&n)
	return n, err
}
