package accounts

import (
	"context"
	"testing"

	"github.com/gpumarket/gpumarket/services"
)

// Loaded accounts, people and keys are the service's: a key is found by its secret, a person cannot log in, and
// the account's name is looked up by id.
func TestBulkLoads(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	ctx := context.Background()
	id := func() string {
		id, err := services.NewUUID()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	account, user, key := id(), id(), id()
	if _, err := CopyAccounts(ctx, s.pool, []LoadedAccount{{ID: account, Name: "Customer 0", CreatedAt: c.t}}); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyUsers(ctx, s.pool, []LoadedUser{{ID: user, AccountID: account, Email: "customer-0@bench.test",
		Role: RoleDeveloper, CreatedAt: c.t}}); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyAPIKeys(ctx, s.pool, []LoadedKey{{ID: key, AccountID: account, CreatedBy: user, Name: "bench",
		Prefix: "gm_bench", Secret: KeyPrefix + "bench-0", CreatedAt: c.t}}); err != nil {
		t.Fatal(err)
	}
	k, err := s.KeyBySecret(ctx, KeyPrefix+"bench-0")
	if err != nil || k.ID != key || k.AccountID != account || k.CreatedBy != user || k.Limit != nil {
		t.Fatalf("KeyBySecret: %+v, %v", k, err)
	}
	names, err := NamesByID(ctx, s.pool, []string{account})
	if err != nil || names[account] != "Customer 0" {
		t.Fatalf("NamesByID: %v, %v", names, err)
	}
	if _, err := s.Login(ctx, LoginInput{Email: "customer-0@bench.test", Password: "x"}); err == nil {
		t.Fatal("a loaded person logged in")
	}
}
