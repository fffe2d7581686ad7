package main

import (
	"context"

	"github.com/gpumarket/gpumarket/services"
	records "github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// The reliability records (docs/reliability.md): the gateway routes by them and the pages show them. Each
// process that runs either keeps its own board, read from the gateway's record in PostgreSQL over the same
// windows as every other process, so that they agree.

// reliabilityBoard returns the process's board, made on first use; startReliability refreshes it.
func (p *Platform) reliabilityBoard() *records.Board {
	if p.reliability == nil {
		p.reliability = records.NewBoard(records.Config{Source: requestlog.NewRequestLog(p.pool, nil, nil, p.log),
			Excluded: p.probeAccounts, Log: p.log})
	}
	return p.reliability
}

// probeAccounts names the platform's probe account, whose requests are not customers' and count for nothing
// in the records; none before the first probe made it.
func (p *Platform) probeAccounts(ctx context.Context) ([]string, error) {
	u, err := p.accounts.UserByEmail(ctx, probeEmail)
	if services.ErrorCode(err) == services.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []string{u.AccountID}, nil
}

// startReliability loads the records once, before the gateway routes, so that a gateway just started places
// offerings as the others do, then refreshes them until the platform stops.
func (p *Platform) startReliability(r *running) {
	if p.reliability == nil {
		return
	}
	if err := p.reliability.Refresh(r.ctx); err != nil {
		p.log.Warn("reliability: records not loaded; every offering is routed as without one until they are", "err", err)
	}
	r.loops.Go(func() { p.reliability.Run(r.ctx) })
}
