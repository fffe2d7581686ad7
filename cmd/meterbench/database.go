package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seed writes the workload's customers with their API keys, providers, offerings and price
// book, and returns the workload over them (without its NATS URL and ticket key).
func seed(ctx context.Context, pool *pgxpool.Pool, events int) (workload, error) {
	const customers, providers, offeringsPerProvider = 20, 4, 2
	now := time.Now()
	w := workload{Events: events, IDsFrom: now.UnixMilli()}
	account := func(name string) (string, error) {
		var id string
		err := pool.QueryRow(ctx, `INSERT INTO accounts (name, created_at) VALUES ($1, $2) RETURNING id::text`, name, now).Scan(&id)
		return id, err
	}
	for i := range customers {
		id, err := account(fmt.Sprintf("Customer %d", i))
		if err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
		var key string
		if err := pool.QueryRow(ctx, `WITH u AS (
				INSERT INTO users (account_id, email, password_hash, role, created_at)
				VALUES ($1, $2, 'x', 'developer', $3) RETURNING id)
			INSERT INTO api_keys (account_id, created_by, name, prefix, key_hash, created_at)
			SELECT $1, u.id, 'bench', 'gm_bench', sha256(convert_to($2, 'UTF8')), $3 FROM u RETURNING id::text`,
			id, fmt.Sprintf("customer-%d@bench.test", i), now).Scan(&key); err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
		w.Customers, w.APIKeys = append(w.Customers, id), append(w.APIKeys, key)
	}
	prices := map[string]int64{}
	for tier, p := range tierPrices {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok,
			effective_from, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id`, tier, p.in, p.out, now.AddDate(0, -1, 0), now).Scan(&id); err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
		prices[tier] = id
	}
	tiers := []string{"realtime", "standard", "batch"}
	for p := range providers {
		provider, err := account(fmt.Sprintf("Provider %d", p))
		if err != nil {
			return w, fmt.Errorf("seed: %w", err)
		}
		for o := range offeringsPerProvider {
			// Asks below the tier's price for either kind of token: 10,000 to 45,000 in, twice as
			// much out.
			ask := int64(10_000 + 5_000*len(w.Offerings))
			off := offering{Provider: provider, Tier: tiers[len(w.Offerings)%len(tiers)],
				Model: fmt.Sprintf("bench/model-%d", o), AskIn: ask, AskOut: 2 * ask}
			off.PriceID = prices[off.Tier]
			if err := pool.QueryRow(ctx, `INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
				ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok, tier, status, created_at, updated_at)
				VALUES ($1, 'rtx-4090', 4, 'eu', $2, $3, $4, $5, 'active', $6, $6) RETURNING id::text`,
				provider, off.Model, off.AskIn, off.AskOut, off.Tier, now).Scan(&off.ID); err != nil {
				return w, fmt.Errorf("seed: %w", err)
			}
			w.Offerings = append(w.Offerings, off)
		}
	}
	return w, nil
}

// gatewayColumns are the columns of gateway_requests the gateway writes for an attempt.
var gatewayColumns = []string{"request_id", "account_id", "api_key_id", "offering_id", "tier", "model", "http_status",
	"status", "input_tokens", "output_tokens", "ttft_ms", "duration_ms", "at", "input_bytes", "max_input_tokens",
	"max_output_tokens", "streamed", "relayed_output_bytes", "relayed_output_chunks"}

// writeGatewayRecords writes, by COPY, the gateway's record of every request of the workload's
// rounds, as the gateway would have written them when it relayed the responses: a 200
// streamed whole, relaying four bytes of text per output token in a chunk per token. The
// meter bills each event against its record.
func writeGatewayRecords(ctx context.Context, pool *pgxpool.Pool, rounds ...workload) (int64, error) {
	at := time.Now()
	var total int64
	for _, w := range rounds {
		src := &gatewaySource{w: w, i: w.From - 1, at: at}
		n, err := pool.CopyFrom(ctx, pgx.Identifier{"gateway_requests"}, gatewayColumns, src)
		if err != nil {
			return total, fmt.Errorf("write the gateway's records: %w", err)
		}
		total += n
	}
	return total, nil
}

// gatewaySource hands CopyFrom the gateway's records of a round, one request at a time.
type gatewaySource struct {
	w  workload
	i  int
	at time.Time
}

func (s *gatewaySource) Next() bool { s.i++; return s.i < s.w.From+s.w.Events }
func (s *gatewaySource) Err() error { return nil }
func (s *gatewaySource) Values() ([]any, error) {
	u, off := s.w.usage(s.i, ""), s.w.offering(s.i)
	return []any{u.RequestID, s.w.customer(s.i), s.w.apiKey(s.i), off.ID, off.Tier, off.Model, int32(200), "ok",
		u.InputTokens, u.OutputTokens, u.TTFTMillis, u.DurationMillis, s.at, 4 * u.InputTokens, u.InputTokens,
		int64(maxOutputTokens), true, 4 * u.OutputTokens, u.OutputTokens}, nil
}
