package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// The Batch API's wiring (docs/batches.md): files under the data directory, and a scheduler that
// sends batches' lines through this process's own gateway.

// openBatches builds the files and batches service; the scheduler is built once the web server is.
func (p *Platform) openBatches() (*batch.Service, error) {
	store, err := batch.NewLocalDir(filepath.Join(p.cfg.DataDir, "batch-files"))
	if err != nil {
		return nil, err
	}
	return batch.NewService(batch.Config{Pool: p.pool, Storage: store}), nil
}

// newBatchScheduler builds a scheduler that runs lines through p.gateway at the batch tier.
func (p *Platform) newBatchScheduler() *batch.Scheduler {
	credits := billing.NewCredits(p.pool, billing.NewLedger(p.pool, nil), nil, nil)
	return batch.NewScheduler(batch.SchedulerConfig{
		Service: p.batches, Gateway: p.gateway, Concurrency: p.cfg.BatchConcurrency, PollEvery: p.batchPollEvery,
		Lease: p.batchLease, Log: p.log.With("role", "batch"),
		Ready: p.router.Ready,
		Offered: func(model string) bool {
			for _, m := range p.router.Models() {
				if m.Model == model {
					return true
				}
			}
			return false
		},
		BatchPrice: func(ctx context.Context) (catalog.Price, error) {
			prices, err := p.catalog.CurrentPrices(ctx)
			if err != nil {
				return catalog.Price{}, err
			}
			price, ok := prices[catalog.TierBatch]
			if !ok {
				return catalog.Price{}, fmt.Errorf("the batch tier has no price in force")
			}
			return price, nil
		},
		Balance: func(ctx context.Context, accountID string) (money.BigPico, error) {
			b, err := credits.Balance(ctx, accountID)
			return b.Pico, err
		},
	})
}

// defaultBatchPollEvery is how often the scheduler looks for work it was not told of.
const defaultBatchPollEvery = time.Second
