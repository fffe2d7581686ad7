package demo

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

func TestSeedIsIdempotentAndFillsEveryTier(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: accounts.PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(pool, catalog.Config{})
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

	counts := func() [4]int {
		var c [4]int
		for i, table := range []string{"accounts", "users", "offerings", "prices"} {
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&c[i]); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	if err := Seed(ctx, acc, cat, now); err != nil {
		t.Fatal(err)
	}
	first := counts()
	if err := Seed(ctx, acc, cat, now.AddDate(0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if second := counts(); second != first {
		t.Fatalf("seeding twice changed the data: %v then %v", first, second)
	}
	if first[1] != len(Logins) || first[2] != 24 || first[3] != 3+len(ModelPrices) {
		t.Fatalf("accounts, users, offerings, prices = %v; want %d users, 24 offerings, %d prices", first, len(Logins), 3+len(ModelPrices))
	}

	// Seeded rigs are pending like any new listing: nothing has probed them yet.
	if list, err := cat.List(ctx, catalog.ListInput{}); err != nil || len(list) != 0 {
		t.Fatalf("the catalog lists %d seeded offerings before their probes, %v; want none", len(list), err)
	}
	qualifySeeded(t, cat)
	list, err := cat.List(ctx, catalog.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[catalog.Tier]int{}
	for _, o := range list {
		tiers[o.Tier]++
	}
	for _, tier := range catalog.Tiers {
		if tiers[tier] == 0 {
			t.Errorf("no demo offering in tier %s (%v)", tier, tiers)
		}
	}
	for _, l := range Logins {
		if _, err := acc.Login(ctx, accounts.LoginInput{Email: l.Email, Password: Password}); err != nil {
			t.Errorf("demo login %s: %v", l.Email, err)
		}
	}
}

func TestRowsCarryTheBenchmarkFigures(t *testing.T) {
	rows, err := Rows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 24 {
		t.Fatalf("%d rows; the benchmark has 24 GPU configurations and models", len(rows))
	}
	configs := map[string]bool{}
	for _, r := range rows {
		configs[r.GPU+"x"+string(rune('0'+r.GPUCount))] = true
		if r.QPS != 8 || r.Requests != 200 {
			t.Errorf("%s: load %g qps over %d requests, want the representative 8 qps over 200", r.RunFile, r.QPS, r.Requests)
		}
		want := r.USDPerHour * 1e6 / (3600 * r.TotalTPS)
		if got := float64(r.Cost()) / 1e6; math.Abs(got-want) > 0.5e-6 {
			t.Errorf("%s: cost %v, want %v", r.RunFile, got, want)
		}
	}
	for _, c := range []string{"h100-pciex1", "rtx-4090x1", "rtx-4090x2", "rtx-4090x4", "rtx-4090x8"} {
		if !configs[c] {
			t.Errorf("no offering for %s", c)
		}
	}
	// The 4x RTX 4090 serving the 14B model: $0.1495 per million at 8 requests/s in the paper.
	for _, r := range rows {
		if r.GPUCount == 4 && strings.HasSuffix(r.Model, "Qwen-14B") && r.Cost() != 149458 {
			t.Errorf("4x RTX 4090 14B cost = %d micro-dollars, want 149458", r.Cost())
		}
	}
}

// TestAsksEarnTheBenchmarksCostAtItsMix: each run's cost split in its tier's price ratio, half a million
// input tokens and half a million output tokens earning exactly the cost.
func TestAsksEarnTheBenchmarksCostAtItsMix(t *testing.T) {
	standard := catalog.Price{Tier: catalog.TierStandard, Input: 150_000, Output: 300_000}
	cases := []struct {
		cost    money.MicroUSD
		p       catalog.Price
		in, out money.MicroUSD
	}{
		{149_458, standard, 99_639, 199_277}, // 2 x 149,458 / 3 = 99,638.67
		{31_653, standard, 21_102, 42_204},
		{225_000, standard, 150_000, 300_000}, // at the blended price: at both prices
		{202_453, catalog.Price{Input: 300_000, Output: 600_000}, 134_969, 269_937},
		{100_000, catalog.Price{Input: 1, Output: 3}, 50_000, 150_000},
	}
	for _, c := range cases {
		// A row whose cost is c.cost: $1 per GPU-hour at 1e6/3600/cost tokens per second is cost micro-dollars.
		r := Row{GPUCount: 1, USDPerHour: 1, TotalTPS: 1e6 / 3600 / (float64(c.cost) / 1e6)}
		if r.Cost() != c.cost {
			t.Fatalf("test row costs %d, want %d", r.Cost(), c.cost)
		}
		in, out := r.Asks(c.p)
		if in != c.in || out != c.out || in+out != 2*c.cost {
			t.Errorf("Asks(%d at %d:%d) = %d, %d; want %d, %d, summing to %d", c.cost, c.p.Input, c.p.Output, in, out, c.in, c.out, 2*c.cost)
		}
	}
}

// overpriced are the six benchmark configurations that cost more per token than their tier pays at the
// default prices: each cost above its tier's blended price, so the split is above both prices.
var overpriced = map[string]money.MicroUSD{
	"benchmark:Qwen/QwQ-32B-Preview:1xh100-pcie":                                       377_829,   // standard, $0.225
	"benchmark:deepseek-ai/DeepSeek-R1-Distill-Qwen-32B:1xh100-pcie":                   361_234,   // standard
	"benchmark:deepseek-ai/DeepSeek-R1-Distill-Qwen-14B:8xrtx-4090":                    300_343,   // standard
	"benchmark:neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic:2xh100-pcie": 674_226,   // standard
	"benchmark:deepseek-ai/DeepSeek-R1-Distill-Llama-70B:2xh100-pcie":                  1_203_348, // batch, $0.12
	"benchmark:meta-llama/Meta-Llama-3-70B-Instruct:2xh100-pcie":                       1_194_576, // batch
}

// TestSixConfigurationsNeedTheirModelsPrice: at the tiers' defaults six configurations cost more than their tier
// pays; at the demo's prices, the model's own where it has one, every configuration's asks are within its price,
// and a model has a price of its own only where its tier's default leaves one of its configurations out.
func TestSixConfigurationsNeedTheirModelsPrice(t *testing.T) {
	rows, err := Rows()
	if err != nil {
		t.Fatal(err)
	}
	defaults, book := map[catalog.Tier]catalog.Price{}, catalog.PriceBook{}
	for _, p := range catalog.DefaultPrices {
		defaults[p.Tier] = p
		book[p.Tier] = append(book[p.Tier], p)
	}
	for _, p := range ModelPrices {
		book[p.Tier] = append(book[p.Tier], p)
	}
	n, needed := 0, map[string]bool{}
	for _, r := range rows {
		p := defaults[r.Tier()]
		in, out := r.Asks(p)
		want, over := overpriced[r.SeedKey()]
		if p.Covers(in, out) == over || (over && (r.Cost() != want || in <= p.Input || out <= p.Output)) {
			t.Errorf("%s (%s): cost %d, asks %d and %d against %d and %d; overpriced %v", r.SeedKey(), r.Tier(), r.Cost(), in, out, p.Input, p.Output, over)
		}
		if over {
			n++
			needed[string(r.Tier())+" "+r.Model] = true
		}
		mp, _ := book.At(r.Tier(), r.Model, time.Time{})
		if in, out := r.Asks(mp); !mp.Covers(in, out) || in+out != 2*r.Cost() {
			t.Errorf("%s (%s): asks %d and %d at its price %+v", r.SeedKey(), r.Tier(), in, out, mp)
		}
	}
	if n != 6 {
		t.Fatalf("%d overpriced configurations found, want 6", n)
	}
	for _, p := range ModelPrices {
		if !needed[string(p.Tier)+" "+p.Model] || p.Output != 2*p.Input {
			t.Errorf("%s has a price of its own it does not need, or not in the 1:2 ratio: %+v", p.Subject(), p)
		}
		delete(needed, string(p.Tier)+" "+p.Model)
	}
	if len(needed) != 0 {
		t.Errorf("no price of their own for %v", needed)
	}
}

// qualifySeeded makes every seeded rig active, as the platform's probes do under `gpumarket dev` once the
// demo's simulated rigs answer them.
func qualifySeeded(t *testing.T, cat *catalog.Service) {
	t.Helper()
	ctx := context.Background()
	seeded, err := cat.ListActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range seeded {
		if o.RigState == catalog.RigActive {
			continue
		}
		if err := cat.MarkQualified(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
	}
}
