package batch

import (
	"context"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testDeveloper signs up a developer with its own account on the pool, hashing its password cheaply.
func testDeveloper(t *testing.T, pool *pgxpool.Pool, email, accountName string) (*accounts.Service, accounts.User) {
	t.Helper()
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: accounts.PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := acc.EnsureUser(context.Background(), email, "a long password here", accounts.RoleDeveloper, accountName)
	if err != nil {
		t.Fatal(err)
	}
	return acc, u
}
