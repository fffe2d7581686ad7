package scratchdb

import (
	"context"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
)

// NewID is a fresh uuid: the id a loaded row is written with. It reads crypto/rand, which does not fail.
func NewID() string {
	id, _ := services.NewUUID()
	return id
}

// LoadAccounts writes n accounts named prefix and their number (accounts.CopyAccounts), and returns their ids in
// that order.
func (d *Database) LoadAccounts(ctx context.Context, prefix string, n int, created time.Time) ([]string, error) {
	rows := make([]accounts.LoadedAccount, n)
	ids := make([]string, n)
	for i := range rows {
		ids[i] = NewID()
		rows[i] = accounts.LoadedAccount{ID: ids[i], Name: fmt.Sprintf("%s %d", prefix, i), CreatedAt: created}
	}
	_, err := accounts.CopyAccounts(ctx, d.Pool, rows)
	return ids, err
}
