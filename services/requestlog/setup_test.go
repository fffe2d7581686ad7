package requestlog

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

var testNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

func newOrg(t testing.TB, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(),
		`INSERT INTO accounts (name, created_at) VALUES ($1, $2) RETURNING id`, name, testNow).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func newUser(t testing.TB, pool *pgxpool.Pool, org, email string) string {
	t.Helper()
	var id string
	if err := pool.QueryRow(context.Background(), `
		INSERT INTO users (account_id, email, password_hash, role, created_at)
		VALUES ($1, $2, 'x', 'developer', $3) RETURNING id`, org, email, testNow).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
