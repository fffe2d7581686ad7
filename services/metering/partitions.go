package metering

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/usagestore"
)

// The monthly partitions of usage_events as the usage store changes them: it makes and drops a month's partition,
// and the meter's tables take it in and let it go, in the store's transaction (usagestore.Config's AttachMonth and
// DetachMonth).

// AttachMonth attaches month's partition (usagestore.PartitionName), made by the usage store in tx, to usage_events.
// A CHECK of the month's bounds, added first and dropped after, spares the attach a scan of the partition; the
// attach locks usage_events only against other changes of its partitions, never against the meter's writes or the
// readers.
func AttachMonth(ctx context.Context, tx pgx.Tx, month time.Time) (err error) {
	name := usagestore.PartitionName(month)
	defer services.Wrap(&err, "metering.AttachMonth(%s)", name)
	from, to := usagestore.BoundLiteral(month), usagestore.BoundLiteral(month.AddDate(0, 1, 0))
	_, err = tx.Exec(ctx, `
		ALTER TABLE `+name+` ADD CONSTRAINT `+name+`_month CHECK (occurred_at >= `+from+` AND occurred_at < `+to+`);
		ALTER TABLE usage_events ATTACH PARTITION `+name+` FOR VALUES FROM (`+from+`) TO (`+to+`);
		ALTER TABLE `+name+` DROP CONSTRAINT `+name+`_month`)
	return err
}

// DetachMonth deletes the keys (usage_event_keys) of the rows of month's partition and detaches the partition from
// usage_events, in tx, the usage store's transaction that drops the month: a month goes whole, its rows and their
// keys together.
func DetachMonth(ctx context.Context, tx pgx.Tx, month time.Time) (err error) {
	name := usagestore.PartitionName(month)
	defer services.Wrap(&err, "metering.DetachMonth(%s)", name)
	if _, err := tx.Exec(ctx, `DELETE FROM usage_event_keys k USING `+name+` u WHERE k.event_id = u.event_id`); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `ALTER TABLE usage_events DETACH PARTITION `+name)
	return err
}
