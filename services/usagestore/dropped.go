package usagestore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueueMonthDropped queues on b the read of whether the usage rows of the month that starts at month were dropped
// after their retention (Retire), into dropped: what a check of the month's rollups against its rows reads first,
// since a dropped month has no rows to check against.
func QueueMonthDropped(b *pgx.Batch, month time.Time, dropped *bool) {
	b.Queue(`SELECT EXISTS (SELECT 1 FROM usage_months_dropped WHERE month = $1)`, month).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(dropped); err != nil {
			return fmt.Errorf("usagestore: whether %s was dropped: %w", month.Format("2006-01"), err)
		}
		return nil
	})
}
