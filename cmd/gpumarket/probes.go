package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/web/gateway"
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
func (p *Platform) probeAccount(ctx context.Context) (gateway.ProbeAccount, error) {
	password := make([]byte, 32)
	_, _ = rand.Read(password) // crypto/rand.Read never fails
	u, err := p.accounts.EnsureUser(ctx, probeEmail, hex.EncodeToString(password), accounts.RoleDeveloper, probeAccountName)
	if err != nil {
		return gateway.ProbeAccount{}, err
	}
	keys, err := p.accounts.Keys(ctx, u.AccountID)
	if err != nil {
		return gateway.ProbeAccount{}, err
	}
	for _, k := range keys {
		if k.Name == probeKeyName && k.RevokedAt == nil {
			return gateway.ProbeAccount{AccountID: u.AccountID, APIKeyID: k.ID}, nil
		}
	}
	k, _, err := p.accounts.CreateKey(ctx, u, accounts.NewKeyInput{Name: probeKeyName})
	if err != nil {
		return gateway.ProbeAccount{}, err
	}
	return gateway.ProbeAccount{AccountID: u.AccountID, APIKeyID: k.ID}, nil
}
