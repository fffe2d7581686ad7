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
)

func TestSeedIsIdempotentAndFillsEveryTier(t *testing.T) {
	pool := dbtest.New(t)
	ctx := context.Background()
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: accounts.PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(pool, nil)
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
	rows, _ := Rows()
	if first[1] != len(Logins) || first[2] != len(rows) || first[3] != 3 {
		t.Fatalf("accounts, users, offerings, prices = %v; want %d users, %d offerings, 3 prices", first, len(Logins), len(rows))
	}

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
		if got := float64(r.Ask()) / 1e6; math.Abs(got-want) > 0.5e-6 {
			t.Errorf("%s: ask %v, want %v", r.RunFile, got, want)
		}
	}
	for _, c := range []string{"h100-pciex1", "rtx-4090x1", "rtx-4090x2", "rtx-4090x4", "rtx-4090x8"} {
		if !configs[c] {
			t.Errorf("no offering for %s", c)
		}
	}
	// The 4x RTX 4090 serving the 14B model: $0.1495 per million at 8 requests/s in the paper.
	for _, r := range rows {
		if r.GPUCount == 4 && strings.HasSuffix(r.Model, "Qwen-14B") && r.Ask() != 149458 {
			t.Errorf("4x RTX 4090 14B ask = %d micro-dollars, want 149458", r.Ask())
		}
	}
}
