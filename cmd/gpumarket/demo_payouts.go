package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/payouts"
)

// demoConnectedProviders are the demo providers whose Stripe accounts `gpumarket dev` connects on stripe-mock, as
// each would by finishing the test onboarding page, so that approving their statements shows a transfer at once.
// Garage Cluster Lisboa is left to connect by hand: its payouts page shows the onboarding.
var demoConnectedProviders = []struct{ email, country string }{
	{"provider@example.com", "NO"},
	{"northwind@example.com", "US"},
}

// connectDemoProviders connects the demo providers' Stripe accounts through the payouts service, on test payments
// only: the account is created as the connect form creates it, and its onboarding recorded as the test onboarding
// page records it. Running it again changes nothing.
func (p *Platform) connectDemoProviders(ctx context.Context) error {
	if p.payouts == nil || !p.testPayments {
		return nil
	}
	for _, d := range demoConnectedProviders {
		u, err := p.accounts.UserByEmail(ctx, d.email)
		if err != nil {
			return fmt.Errorf("demo payouts: %s: %w", d.email, err)
		}
		a, _, err := p.payouts.Connect(ctx, payouts.ConnectInput{ProviderAccountID: u.AccountID, Email: u.Email, Country: d.country,
			RefreshURL: p.URL() + "/provider/payouts/onboarding", ReturnURL: p.URL() + "/provider/payouts/return"})
		if err != nil {
			return fmt.Errorf("demo payouts: connect %s: %w", d.email, err)
		}
		if a.OnboardedAt != nil {
			continue
		}
		if _, err := p.payouts.Observe(ctx, payouts.AccountState{ID: a.StripeAccountID, DetailsSubmitted: true, PayoutsEnabled: true},
			time.Now()); err != nil {
			return fmt.Errorf("demo payouts: onboard %s: %w", d.email, err)
		}
	}
	return nil
}
