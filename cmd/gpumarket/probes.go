package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/web/gateway/probes"
)

// The platform's probe account (docs/tiers-and-asks.md, "Probes"): the developer account the gateway's probes
// of demoted offerings are billed to, with one API key. No one logs in to it: its password is drawn and
// forgotten.
const (
	probeEmail       = "probes@gpumarket.invalid"
	probeAccountName = "GPUMarket probes"
	probeKeyName     = "Tier probes"
)

// probeAccount returns the probe account and its key, making them when missing.
func (p *Platform) probeAccount(ctx context.Context) (probes.Account, error) {
	password := make([]byte, 32)
	_, _ = rand.Read(password) // crypto/rand.Read never fails
	u, err := p.accounts.EnsureUser(ctx, probeEmail, hex.EncodeToString(password), accounts.RoleDeveloper, probeAccountName)
	if err != nil {
		return probes.Account{}, err
	}
	keys, err := p.accounts.Keys(ctx, u.AccountID)
	if err != nil {
		return probes.Account{}, err
	}
	for _, k := range keys {
		if k.Name == probeKeyName && k.RevokedAt == nil {
			return probes.Account{AccountID: u.AccountID, APIKeyID: k.ID}, nil
		}
	}
	k, _, err := p.accounts.CreateKey(ctx, u, accounts.NewKeyInput{Name: probeKeyName})
	if err != nil {
		return probes.Account{}, err
	}
	return probes.Account{AccountID: u.AccountID, APIKeyID: k.ID}, nil
}

// probeFundingEvery is how often the platform pays its probe account's spending (fundProbes).
const probeFundingEvery = time.Minute

// fundProbes brings the probe account's credit back to zero from the platform's revenue, every
// probeFundingEvery until ctx ends: probes skip admission and are metered like any request, so
// their cost first takes the account below zero; the platform pays it with an adjustment (platform
// revenue to the account's credit, recorded in the audit log as the probe account's own), so that
// the account never ends a month owing money and its invoice carries no negative balance to
// review. One process funds at a time: the one that meters (docs/tiers-and-asks.md, "Probes").
func (p *Platform) fundProbes(ctx context.Context, every time.Duration) {
	cr := credits.NewCredits(p.pool, ledger.NewLedger(p.pool, nil), nil, nil).RecordTo(p.audit)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := fundProbesOnce(ctx, p.accounts, cr); err != nil && ctx.Err() == nil {
			p.log.Warn("probes: their spending not paid yet", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fundProbesOnce pays what the probe account owes, when it owes anything.
func fundProbesOnce(ctx context.Context, accts *accounts.Service, cr *credits.Credits) error {
	u, err := accts.UserByEmail(ctx, probeEmail)
	if services.ErrorCode(err) == services.CodeNotFound {
		return nil // nothing has been probed yet
	}
	if err != nil {
		return err
	}
	b, err := cr.Balance(ctx, u.AccountID)
	if err != nil || b.Pico.Sign() >= 0 {
		return err
	}
	owed, err := b.Pico.Neg().Pico()
	if err != nil {
		return err
	}
	_, err = cr.Adjust(ctx, credits.AdjustInput{AccountID: u.AccountID, Amount: owed,
		Reason: "the platform pays its probes of demoted offerings", ByUserID: u.ID})
	return err
}
