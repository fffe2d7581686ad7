package metering

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// KeySpend is what an API key was billed in the day, the week and the month (UTC) that hold a
// moment: the meter's sums in api_key_spend_days and api_key_spend, so only what is metered.
type KeySpend struct {
	Day, Week, Month money.BigPico
}

// In is the spend of the period p.
func (s KeySpend) In(p periods.Period) money.BigPico {
	switch p {
	case periods.Day:
		return s.Day
	case periods.Week:
		return s.Week
	}
	return s.Month
}

// SpendReader reads the keys' metered spend per period.
type SpendReader struct {
	pool *pgxpool.Pool
}

// NewSpendReader returns a reader of the keys' spend on pool.
func NewSpendReader(pool *pgxpool.Pool) *SpendReader { return &SpendReader{pool: pool} }

// KeySpend is each key's spend in the day, week and month that hold now; a key that spent
// nothing is in the map with zeros. A day is one row, a week at most seven, a month one row of
// the monthly sums: cheap for any number of requests.
func (r *SpendReader) KeySpend(ctx context.Context, keyIDs []string, now time.Time) (_ map[string]KeySpend, err error) {
	defer services.Wrap(&err, "metering.SpendReader.KeySpend")
	out := make(map[string]KeySpend, len(keyIDs))
	for _, k := range keyIDs {
		out[k] = KeySpend{}
	}
	if len(keyIDs) == 0 {
		return out, nil
	}
	day, week, month := periods.Day.Start(now), periods.Week.Start(now), periods.Month.Start(now)
	rows, err := r.pool.Query(ctx, `
		SELECT k.id,
			coalesce((SELECT charge_pico FROM api_key_spend_days d WHERE d.api_key_id = k.id AND d.day = $2::date), 0),
			coalesce((SELECT sum(charge_pico) FROM api_key_spend_days d WHERE d.api_key_id = k.id AND d.day >= $3::date
				AND d.day <= $2::date), 0),
			coalesce((SELECT charge_pico FROM api_key_spend s WHERE s.api_key_id = k.id AND s.month = $4), 0)
		FROM unnest($1::text[]) AS k(id)`, keyIDs, day, week, month)
	if err != nil {
		return nil, err
	}
	spends, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct {
		id string
		s  KeySpend
	}, error) {
		var v struct {
			id string
			s  KeySpend
		}
		err := row.Scan(&v.id, &v.s.Day, &v.s.Week, &v.s.Month)
		return v, err
	})
	if err != nil {
		return nil, err
	}
	for _, v := range spends {
		out[v.id] = v.s
	}
	return out, nil
}
