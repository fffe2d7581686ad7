package benchmarks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
)

// TestOnlyItsProviderAttachesReplacesAndRemovesAResult: the owner's result is kept and replaced
// by the next; another provider can neither attach to the rig nor remove its result, and leaves it
// as it was; removed, it is gone from the catalog's figures.
func TestOnlyItsProviderAttachesReplacesAndRemovesAResult(t *testing.T) {
	dbtest.SkipShort(t)
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: accounts.PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(pool, catalog.Config{})
	if err := demo.Seed(ctx, acc, cat, time.Now()); err != nil {
		t.Fatal(err)
	}
	owner, err := acc.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	other, err := acc.UserByEmail(ctx, "northwind@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rigs, err := cat.ListOwn(ctx, owner.AccountID)
	if err != nil || len(rigs) == 0 {
		t.Fatalf("the demo provider's rigs: %v, %v", rigs, err)
	}
	o := rigs[0]
	svc := benchmarks.NewService(pool, cat, nil)
	gw := pinningGateway(t, o.Model)
	gatewayURL := gw.URL + "/v1"
	attach := func(u accounts.User, raw []byte) (benchmarks.Benchmark, error) {
		return svc.Attach(ctx, benchmarks.AttachInput{ProviderAccountID: u.AccountID, UserID: u.ID, OfferingID: o.ID,
			Result: raw, GatewayURL: gatewayURL})
	}
	stored := func() (n int, completed int) {
		if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(max(completed), 0) FROM provider_benchmarks`).Scan(&n, &completed); err != nil {
			t.Fatal(err)
		}
		return n, completed
	}

	first, err := attach(owner, loadgenResult(t, gw, o, 20))
	if err != nil {
		t.Fatal(err)
	}
	if n, completed := stored(); n != 1 || completed != 20 || !first.ThroughGateway {
		t.Fatalf("after attaching: %d rows, %d completed, through the gateway %v", n, completed, first.ThroughGateway)
	}
	second := loadgenResult(t, gw, o, 30)
	if _, err := attach(owner, second); err != nil {
		t.Fatal(err)
	}
	got, found, err := svc.Own(ctx, owner.AccountID, o.ID)
	if n, completed := stored(); err != nil || !found || n != 1 || completed != 30 || got.Result != strings.TrimSpace(string(second)) {
		t.Fatalf("after replacing: %d rows, %d completed, found %v, %v", n, completed, found, err)
	}

	// Another provider: the rig is not theirs to find.
	if _, err := attach(other, second); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("another provider attaching: %v, want not found", err)
	}
	if err := svc.Remove(ctx, other.AccountID, o.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("another provider removing: %v, want not found", err)
	}
	if _, found, _ := svc.Own(ctx, other.AccountID, o.ID); found {
		t.Error("another provider sees the result as its own")
	}
	if n, completed := stored(); n != 1 || completed != 30 {
		t.Fatalf("after another provider's tries: %d rows, %d completed", n, completed)
	}
	// A bad result leaves the good one in place.
	if _, err := attach(owner, []byte(`{"method": "gpumarket-loadgen/1"}`)); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("a bad result: %v", err)
	}
	shown, err := svc.ForOfferings(ctx, []string{o.ID, rigs[len(rigs)-1].ID})
	if err != nil || len(shown) != 1 || shown[o.ID].Completed != 30 {
		t.Fatalf("for the catalog: %v, %v", shown, err)
	}

	if err := svc.Remove(ctx, owner.AccountID, o.ID); err != nil {
		t.Fatal(err)
	}
	if n, _ := stored(); n != 0 {
		t.Fatalf("%d rows after removing", n)
	}
	if shown, err := svc.ForOfferings(ctx, []string{o.ID}); err != nil || len(shown) != 0 {
		t.Errorf("for the catalog after removing: %v, %v", shown, err)
	}
}
