package metering

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// LatestUsageOfKeys is when the newest usage metered with any of the API keys apiKeyIDs occurred; ok is false
// when none was.
func LatestUsageOfKeys(ctx context.Context, pool *pgxpool.Pool, apiKeyIDs []string) (_ time.Time, ok bool, err error) {
	defer services.Wrap(&err, "metering.LatestUsageOfKeys")
	return latestUsage(ctx, pool, `SELECT max(occurred_at) FROM usage_events WHERE api_key_id = ANY ($1)`, apiKeyIDs)
}

// LatestUsageOfTier is when the newest usage metered on the tier occurred; ok is false when none was.
func LatestUsageOfTier(ctx context.Context, pool *pgxpool.Pool, tier string) (_ time.Time, ok bool, err error) {
	defer services.Wrap(&err, "metering.LatestUsageOfTier")
	return latestUsage(ctx, pool, `SELECT max(occurred_at) FROM usage_events WHERE tier = $1`, tier)
}

func latestUsage(ctx context.Context, pool *pgxpool.Pool, sql string, arg any) (time.Time, bool, error) {
	var last *time.Time
	if err := pool.QueryRow(ctx, sql, arg).Scan(&last); err != nil {
		return time.Time{}, false, err
	}
	if last == nil {
		return time.Time{}, false, nil
	}
	return last.UTC(), true, nil
}
