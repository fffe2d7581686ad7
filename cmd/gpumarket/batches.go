package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// The Batch API's wiring (docs/batches.md): files on the S3 store when one is set, else under the
// data directory, and a scheduler that sends batches' lines through this process's own gateway.

// openBatches builds the files and batches service; the scheduler is built once the web server is.
// The S3 store is checked here, so a wrong setting stops the start.
func (p *Platform) openBatches(ctx context.Context) (*batch.Service, error) {
	store, err := p.openBatchStore(ctx)
	if err != nil {
		return nil, err
	}
	return batch.NewService(batch.Config{Pool: p.pool, Storage: store, Events: p.webhooks}), nil
}

func (p *Platform) openBatchStore(ctx context.Context) (batch.Storage, error) {
	if p.cfg.BatchS3.Endpoint == "" {
		dir := filepath.Join(p.cfg.DataDir, "batch-files")
		store, err := batch.NewLocalDir(dir)
		if err != nil {
			return nil, err
		}
		p.log.Info("batch files in the data directory, seen by this process alone", "dir", dir)
		return store, nil
	}
	s3 := p.cfg.BatchS3
	s3.CacheDir = filepath.Join(p.cfg.DataDir, "batch-cache")
	store, err := batch.NewS3Store(ctx, s3)
	if err != nil {
		return nil, fmt.Errorf("batch files (GPUMARKET_BATCH_S3_*): %w", err)
	}
	p.log.Info("batch files in the S3 bucket, reachable", "store", store.String(), "cache", s3.CacheDir)
	return store, nil
}

// newBatchScheduler builds a scheduler that runs lines through p.gateway at the batch tier.
func (p *Platform) newBatchScheduler() *batch.Scheduler {
	cr := credits.NewCredits(p.pool, ledger.NewLedger(p.pool, nil), nil, nil)
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
		Prices: p.catalog.PriceBook,
		Balance: func(ctx context.Context, accountID string) (money.BigPico, error) {
			b, err := cr.Balance(ctx, accountID)
			return b.Pico, err
		},
	})
}

// defaultBatchPollEvery is how often the scheduler looks for work it was not told of.
const defaultBatchPollEvery = time.Second
