package main

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// seed writes, through the owners' bulk loads, the workload's customers with their API keys, providers,
// offerings and price book, and returns the workload over them (without its NATS URL and ticket key).
func seed(ctx context.Context, pool *pgxpool.Pool, events int) (workload, error) {
	const customers, providers, offeringsPerProvider = 20, 4, 2
	now := time.Now()
	w := workload{Events: events, IDsFrom: now.UnixMilli()}
	var accts []accounts.LoadedAccount
	var users []accounts.LoadedUser
	var keys []accounts.LoadedKey
	for i := range customers {
		id, user, key := newID(), newID(), newID()
		email := fmt.Sprintf("customer-%d@bench.test", i)
		accts = append(accts, accounts.LoadedAccount{ID: id, Name: fmt.Sprintf("Customer %d", i), CreatedAt: now})
		users = append(users, accounts.LoadedUser{ID: user, AccountID: id, Email: email, Role: accounts.RoleDeveloper, CreatedAt: now})
		keys = append(keys, accounts.LoadedKey{ID: key, AccountID: id, CreatedBy: user, Name: "bench", Prefix: "gm_bench",
			Secret: email, CreatedAt: now})
		w.Customers, w.APIKeys = append(w.Customers, id), append(w.APIKeys, key)
	}
	var prices []catalog.LoadedPrice
	for tier, p := range tierPrices {
		prices = append(prices, catalog.LoadedPrice{Tier: catalog.Tier(tier), Input: money.MicroUSD(p.in), Output: money.MicroUSD(p.out),
			EffectiveFrom: now.AddDate(0, -1, 0), CreatedAt: now})
	}
	var offerings []catalog.LoadedOffering
	tiers := []string{"realtime", "standard", "batch"}
	for p := range providers {
		provider := newID()
		accts = append(accts, accounts.LoadedAccount{ID: provider, Name: fmt.Sprintf("Provider %d", p), CreatedAt: now})
		for o := range offeringsPerProvider {
			// Asks below the tier's price for either kind of token: 10,000 to 45,000 in, twice as
			// much out.
			ask := int64(10_000 + 5_000*len(w.Offerings))
			off := offering{ID: newID(), Provider: provider, Tier: tiers[len(w.Offerings)%len(tiers)],
				Model: fmt.Sprintf("bench/model-%d", o), AskIn: ask, AskOut: 2 * ask}
			offerings = append(offerings, catalog.LoadedOffering{ID: off.ID, ProviderAccountID: provider, GPU: "rtx-4090",
				GPUCount: 4, Region: "eu", Model: off.Model, AskInput: money.MicroUSD(off.AskIn), AskOutput: money.MicroUSD(off.AskOut),
				Tier: catalog.Tier(off.Tier), Status: catalog.StatusActive, CreatedAt: now, UpdatedAt: now})
			w.Offerings = append(w.Offerings, off)
		}
	}
	if _, err := accounts.CopyAccounts(ctx, pool, accts); err != nil {
		return w, fmt.Errorf("seed: %w", err)
	}
	if _, err := accounts.CopyUsers(ctx, pool, users); err != nil {
		return w, fmt.Errorf("seed: %w", err)
	}
	if _, err := accounts.CopyAPIKeys(ctx, pool, keys); err != nil {
		return w, fmt.Errorf("seed: %w", err)
	}
	if _, err := catalog.CopyPrices(ctx, pool, prices); err != nil {
		return w, fmt.Errorf("seed: %w", err)
	}
	book, err := catalog.ReadPriceBook(ctx, pool)
	if err != nil {
		return w, fmt.Errorf("seed: %w", err)
	}
	for i, off := range w.Offerings {
		p, _ := book.At(catalog.Tier(off.Tier), "", now)
		w.Offerings[i].PriceID = p.ID
	}
	if _, err := catalog.CopyOfferings(ctx, pool, offerings); err != nil {
		return w, fmt.Errorf("seed: %w", err)
	}
	return w, nil
}

// writeGatewayRecords writes, by COPY, the gateway's record of every request of the workload's
// rounds, as the gateway would have written them when it relayed the responses: a 200
// streamed whole, relaying four bytes of text per output token in a chunk per token. The
// meter bills each event against its record.
func writeGatewayRecords(ctx context.Context, pool *pgxpool.Pool, rounds ...workload) (int64, error) {
	at := time.Now()
	var total int64
	for _, w := range rounds {
		n, err := requestlog.CopyRecords(ctx, pool, w.gatewayRecords(at))
		if err != nil {
			return total, fmt.Errorf("write the gateway's records: %w", err)
		}
		total += n
	}
	return total, nil
}

// gatewayRecords are the gateway's records of the round's requests, each ended at.
func (w *workload) gatewayRecords(at time.Time) iter.Seq[requestlog.GatewayRequest] {
	return func(yield func(requestlog.GatewayRequest) bool) {
		for i := w.From; i < w.From+w.Events; i++ {
			u, off := w.usage(i, ""), w.offering(i)
			r := requestlog.GatewayRequest{RequestID: u.RequestID, AccountID: w.customer(i), APIKeyID: w.apiKey(i),
				OfferingID: off.ID, Tier: catalog.Tier(off.Tier), Model: off.Model, HTTPStatus: 200, Status: requestlog.GatewayOK,
				Usage:    &admission.TokenCount{Input: u.InputTokens, Output: u.OutputTokens},
				TTFT:     time.Duration(u.TTFTMillis * float64(time.Millisecond)),
				Duration: time.Duration(u.DurationMillis * float64(time.Millisecond)), At: at,
				InputBytes: 4 * u.InputTokens, MaxInputTokens: u.InputTokens, MaxOutputTokens: maxOutputTokens, Streamed: true,
				RelayedOutputBytes: 4 * u.OutputTokens, RelayedOutputChunks: u.OutputTokens}
			if !yield(r) {
				return
			}
		}
	}
}

// newID is a fresh uuid: the id a loaded row is written with. It reads crypto/rand, which does not fail.
func newID() string {
	id, _ := services.NewUUID()
	return id
}
