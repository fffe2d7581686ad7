package performance

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/money"
)

func f64(v float64) *float64 { return &v }

// rig is a home 4x RTX 4090 in the EU, claiming the benchmark's 8 requests/s figures.
func rig() catalog.Offering {
	return catalog.Offering{ID: "o1", GPU: "rtx-4090", GPUCount: 4, Region: "eu", Model: "m", Tier: catalog.TierStandard,
		Site: carbon.SiteHome, ClaimedTTFTP99Ms: f64(448.04), ClaimedTokensPerSec: f64(1858.57)}
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	day := float64(24 * time.Hour / time.Millisecond)
	measured := rig()
	measured.MeasuredRequests, measured.MeasuredTTFTP99Ms, measured.MeasuredTokensPerSec = 500, f64(500), f64(2000)
	thin := rig()
	thin.MeasuredRequests, thin.MeasuredTTFTP99Ms, thin.MeasuredTokensPerSec = 99, f64(10), f64(9000)
	// A day of 1,000,000 input and 1,000,000 output tokens, busy 43,200,000 ms (half a day of one request in
	// flight, on average 0.5), 7.2 MJ (2 kWh) of which 5.4 MJ measured, $3.00 owed.
	r := Rollup{Requests: 1000, InputTokens: 1_000_000, OutputTokens: 1_000_000, BusyMs: day / 2, EnergyJ: 7.2e6,
		EnergyMeasuredJ: 5.4e6, EnergySimulatedJ: 0.9e6, Payable: money.BigPicoOf(3 * money.PicoPerUSD)}
	cases := []struct {
		name       string
		o          catalog.Offering
		r          Rollup
		capacity   int
		util       *float64
		ttftKeeps  *bool
		tpsKeeps   *bool
		kwhPerMTok *float64
		perKWh     *money.Pico
	}{
		{"capacity known, measured over enough requests", measured, r, 4, f64(0.125), ptr(false), ptr(true), f64(1), ptr(money.Pico(1_500_000_000_000))},
		{"capacity unknown", measured, r, 0, nil, ptr(false), ptr(true), f64(1), ptr(money.Pico(1_500_000_000_000))},
		{"too few requests: no measured figures to compare", thin, r, 8, f64(0.0625), nil, nil, f64(1), ptr(money.Pico(1_500_000_000_000))},
		{"no traffic", rig(), Rollup{}, 4, f64(0), nil, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Summarise(c.o, c.r, day, c.capacity)
			if !eqF(got.Utilisation, c.util) || !eqB(got.TTFTKeepsClaim, c.ttftKeeps) || !eqB(got.TokensPerSecKeepsClaim, c.tpsKeeps) {
				t.Errorf("utilisation %v, TTFT keeps %v, TPS keeps %v; want %v, %v, %v", deref(got.Utilisation), got.TTFTKeepsClaim,
					got.TokensPerSecKeepsClaim, deref(c.util), c.ttftKeeps, c.tpsKeeps)
			}
			if !eqF(got.KWhPerMTok, c.kwhPerMTok) {
				t.Errorf("kWh per million %v, want %v", deref(got.KWhPerMTok), deref(c.kwhPerMTok))
			}
			if (got.EarnedPerKWh == nil) != (c.perKWh == nil) || (c.perKWh != nil && *got.EarnedPerKWh != *c.perKWh) {
				t.Errorf("earned per kWh %v, want %v", got.EarnedPerKWh, c.perKWh)
			}
			if c.r.EnergyJ > 0 && (got.MeasuredEnergyShare == nil || *got.MeasuredEnergyShare != 0.75) {
				t.Errorf("measured share %v, want 0.75", got.MeasuredEnergyShare)
			}
			if c.r.EnergyJ > 0 && (got.SimulatedEnergyShare == nil || *got.SimulatedEnergyShare != 0.125) {
				t.Errorf("simulated share %v, want 0.125", got.SimulatedEnergyShare)
			}
			if c.r.BusyMs > 0 && got.MeanInFlight != 0.5 {
				t.Errorf("mean in flight %v, want 0.5", got.MeanInFlight)
			}
			// The board-power estimate, 1800 W, at the measured 2000 tokens/s once enough requests back it, else at
			// the claimed 1858.57.
			tps := 1858.57
			if c.o.Measured() {
				tps = 2000
			}
			if want := 1800 / tps * 1e6 / 3.6e6; got.EstimatedKWhPerMTok == nil || math.Abs(*got.EstimatedKWhPerMTok-want) > 1e-12 {
				t.Errorf("estimated kWh per million %v, want %v", deref(got.EstimatedKWhPerMTok), want)
			}
		})
	}
}

func TestPerKWhRoundsOnceHalfUp(t *testing.T) {
	t.Parallel()
	// $1 over 3 kWh is 333,333,333,333.33 picodollars per kWh; $2 over 3 is ...666.67; 1 pico over 2 kWh is 0.5 -> 1.
	for _, c := range []struct {
		payable money.Pico
		joules  float64
		want    money.Pico
	}{
		{money.PicoPerUSD, 3 * 3.6e6, 333_333_333_333},
		{2 * money.PicoPerUSD, 3 * 3.6e6, 666_666_666_667},
		{1, 2 * 3.6e6, 1},
		{0, 3.6e6, 0},
	} {
		if got := perKWh(money.BigPicoOf(c.payable), c.joules); got == nil || *got != c.want {
			t.Errorf("perKWh(%d, %g) = %v, want %d", c.payable, c.joules, got, c.want)
		}
	}
	if got := perKWh(money.BigPicoOf(1), 0); got != nil {
		t.Errorf("without energy: %v, want nil", got)
	}
}

// The view reads only the caller's rollups, within the window.
func TestOfferingsReadsTheProvidersRollups(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC)
	cat := catalog.NewService(pool, catalog.Config{Now: func() time.Time { return now }})
	if err := cat.EnsureDefaultPrices(ctx, now.AddDate(0, -1, 0)); err != nil {
		t.Fatal(err)
	}
	account := func(name string) string { return fixtures.Account(t, pool, name) }
	mine, other, customer := account("Fjord"), account("Other"), account("Customer")
	list := func(provider string) catalog.Offering {
		o, err := cat.Create(ctx, provider, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "no", Model: "m",
			AskInput: 100_000, AskOutput: 200_000, ClaimedTTFTP99Ms: f64(448), ClaimedTokensPerSec: f64(1858.57)})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o, theirs := list(mine), list(other)
	rollup := func(provider, offering string, hour time.Time, tokens int64, busyMs, energy, measured float64, payable int64) {
		if _, err := pool.Exec(ctx, `INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price,
			ask_output_price, provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
			uncharged_output_tokens, charge_pico, payable_pico, energy_j, energy_measured_j, busy_ms)
			VALUES ($1, $2, $3, 'standard', 'm', 1, 100000, 200000, $4, 10, $5, $5, 0, 0, 0, $6, $6, $7, $8, $9)`,
			hour, customer, offering, provider, tokens, payable, energy, measured, busyMs); err != nil {
			t.Fatal(err)
		}
	}
	rollup(mine, o.ID, now.Truncate(time.Hour), 500_000, 3_600_000, 3.6e6, 3.6e6, 1_000_000_000_000)
	rollup(mine, o.ID, now.Add(-3*time.Hour).Truncate(time.Hour), 500_000, 1_800_000, 3.6e6, 0, 500_000_000_000)
	rollup(mine, o.ID, now.Add(-8*24*time.Hour), 1, 1, 1, 1, 1)                                    // before the window
	rollup(other, theirs.ID, now.Truncate(time.Hour), 9_000_000, 9e9, 9e9, 9e9, 9_000_000_000_000) // another provider's
	w, err := WindowOf(now, 7)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewService(pool, cat).Offerings(ctx, mine, w, capacities{o.ID: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].OfferingID != o.ID {
		t.Fatalf("offerings %+v, want only the provider's own", got)
	}
	g := got[0]
	windowMs := float64((7*24*time.Hour + 30*time.Minute) / time.Millisecond)
	if g.Requests != 20 || g.InputTokens != 1_000_000 || g.OutputTokens != 1_000_000 || g.BusyMs != 5_400_000 || g.WindowMs != windowMs {
		t.Errorf("sums %+v", g)
	}
	if g.Utilisation == nil || math.Abs(*g.Utilisation-5_400_000/windowMs/4) > 1e-15 {
		t.Errorf("utilisation %v, want %v", deref(g.Utilisation), 5_400_000/windowMs/4)
	}
	// 2 kWh over 2,000,000 tokens; half measured; $1.50 over 2 kWh.
	if g.KWhPerMTok == nil || *g.KWhPerMTok != 1 || *g.MeasuredEnergyShare != 0.5 || !g.Earned.Equal(1_500_000_000_000) ||
		g.EarnedPerKWh == nil || *g.EarnedPerKWh != 750_000_000_000 {
		t.Errorf("energy %v kWh/Mtok, measured %v, earned %s, per kWh %v", deref(g.KWhPerMTok), deref(g.MeasuredEnergyShare), g.Earned, g.EarnedPerKWh)
	}
	if _, err := WindowOf(now, 91); err == nil {
		t.Error("a 91-day window was accepted")
	}
}

type capacities map[string]int

func (c capacities) Capacity(id string) int { return c[id] }

func ptr[T any](v T) *T { return &v }

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func eqF(a, b *float64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && math.Abs(*a-*b) < 1e-12)
}

func eqB(a, b *bool) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
