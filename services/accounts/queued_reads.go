package accounts

import (
	"github.com/jackc/pgx/v5"
)

// Reads queued into a caller's pgx.Batch, for a caller that sends several packages' statements together, in one
// round trip and in its own transaction or snapshot (the meter's batch, admission's figures). Each fills what it is
// given once the batch is sent and its results are read (BatchResults.Close).

// QueueExisting queues into b the read of which of ids are accounts, each marked true in exists. The ids must be
// uuids as the database writes them, lower-case and canonical: another id fails the batch.
func QueueExisting(b *pgx.Batch, ids []string, exists map[string]bool) {
	b.Queue(`SELECT id::text FROM accounts WHERE id = ANY ($1::text[]::uuid[])`, ids).Query(func(rows pgx.Rows) error {
		var id string
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			exists[id] = true
			return nil
		})
		return err
	})
}

// QueueKeyCreators queues into b the read of every API key of the account, revoked ones too, with the person who
// created it: creators maps each key's id to its creator's user id.
func QueueKeyCreators(b *pgx.Batch, accountID string, creators map[string]string) {
	b.Queue(`SELECT id::text, created_by::text FROM api_keys WHERE account_id = $1::uuid`, accountID).Query(func(rows pgx.Rows) error {
		var id, by string
		_, err := pgx.ForEachRow(rows, []any{&id, &by}, func() error {
			creators[id] = by
			return nil
		})
		return err
	})
}
