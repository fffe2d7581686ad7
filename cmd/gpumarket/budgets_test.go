package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
	"github.com/gpumarket/gpumarket/services/routing"
)

// A key's $1 daily limit under 50 requests at once through the real gateway, admission and
// meter: what is billed in the day never passes $1 by more than one request's bound, and
// GET /v1/key reports exactly what was billed.
func TestDailyKeyLimitUnderParallelRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	const model = "gw-daily"
	b.list(t, rigSpec{model: model, ask: 100_000, p99: 300})
	// The most admission holds for one request (its body, under 512 bytes, with the input
	// allowance, and max_tokens 8), at the standard price.
	bound := b.price(t, "standard", routing.InputAllowance+512, 8)
	limit := money.PicoPerUSD
	dev, key, secret := b.developer(t, "daily", 20*money.PicoPerUSD, accounts.NewKeyInput{Limit: &limit, LimitPeriod: periods.Day})
	client := b.client(secret)
	// Earlier today the key was billed all but three requests' bounds of its limit, as the meter
	// writes it: 50 requests at once would spend what is left many times over.
	earlier := limit - 3*bound
	today := time.Now().UTC()
	if _, err := b.p.pool.Exec(b.ctx, `INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico) VALUES ($1, $2::date, 1, $3)`,
		key.ID, today.Format("2006-01-02"), int64(earlier)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.p.pool.Exec(b.ctx, `INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico) VALUES ($1, $2, 1, $3)`,
		key.ID, periods.Month.Start(today), int64(earlier)); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var ids []string
	refused := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			var res *http.Response
			_, err := client.Chat.Completions.New(b.ctx, chatParams(model, 8), option.WithResponseInto(&res))
			mu.Lock()
			defer mu.Unlock()
			var apiErr *openai.Error
			switch {
			case err == nil:
				id, _, _ := headersOf(t, res)
				ids = append(ids, id)
			case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusPaymentRequired:
				refused++
			default:
				t.Errorf("request: %v", err)
			}
		})
	}
	wg.Wait()
	if refused == 0 || len(ids) == 0 {
		t.Fatalf("%d admitted, %d refused; want the limit to stop some and admit some", len(ids), refused)
	}
	billed := earlier
	for _, id := range ids {
		billed += b.metered(t, id).charge
	}
	var day money.Pico
	if err := b.p.pool.QueryRow(b.ctx, `SELECT charge_pico::bigint FROM api_key_spend_days WHERE api_key_id = $1 AND day = $2::date`,
		key.ID, today.Format("2006-01-02")).Scan(&day); err != nil || day != billed {
		t.Fatalf("the day's spend is %s, %v; want the %s billed", day, err, billed)
	}
	if billed > limit+bound {
		t.Fatalf("billed %s under a limit of %s: more than one request's bound (%s) over", billed, limit, bound)
	}
	t.Logf("50 at once: %d admitted, %d refused; billed %s of a %s daily limit (bound %s)", len(ids), refused, billed, limit, bound)

	// GET /v1/key foots with what was billed.
	var info struct {
		Data struct {
			Label       string        `json:"label"`
			LimitPico   money.BigPico `json:"limit_pico"`
			LimitPeriod string        `json:"limit_period"`
			LimitReset  time.Time     `json:"limit_reset"`
			UsagePico   money.BigPico `json:"usage_pico"`
			DailyPico   money.BigPico `json:"usage_daily_pico"`
			MonthlyPico money.BigPico `json:"usage_monthly_pico"`
			Remaining   money.BigPico `json:"limit_remaining_pico"`
		} `json:"data"`
	}
	req, _ := http.NewRequest(http.MethodGet, b.p.URL()+"/api/v1/key", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&info); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/key: %d, %v", res.StatusCode, err)
	}
	d := info.Data
	wantRemaining := max(limit-billed, 0)
	if d.Label != key.Name || !d.LimitPico.Equal(limit) || d.LimitPeriod != "day" || !d.UsagePico.Equal(billed) ||
		!d.DailyPico.Equal(billed) || !d.MonthlyPico.Equal(billed) || !d.Remaining.Equal(wantRemaining) ||
		!d.LimitReset.Equal(periods.Day.End(time.Now())) {
		t.Fatalf("GET /api/v1/key = %+v; want %s billed of %s, %s remaining, for %s (%s)", d, billed, limit, wantRemaining, key.Name, dev.Email)
	}
}
