package requestlog

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/jackc/pgx/v5/pgxpool"
)

var testNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

func newOrg(t testing.TB, pool *pgxpool.Pool, name string) string {
	t.Helper()
	return fixtures.Account(t, pool, name, fixtures.AccountCreatedAt(testNow))
}

func newUser(t testing.TB, pool *pgxpool.Pool, org, email string) string {
	t.Helper()
	return fixtures.User(t, pool, org, email, "developer", fixtures.UserCreatedAt(testNow))
}
