// Package dbtest gives each test a fresh, fully migrated PostgreSQL database.
//
// The server comes from GPUMARKET_TEST_DATABASE_URL (an admin connection, usually to the
// database "postgres"), else postgres://postgres@127.0.0.1:5432/postgres. A migrated template
// database is built once per migration set; each test clones it (CREATE DATABASE ... TEMPLATE),
// which takes milliseconds, and drops its clone at cleanup.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db"
)

// AdminURL is the connection used to create and drop test databases.
func AdminURL() string {
	if u := os.Getenv("GPUMARKET_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// SkipShort skips a test that needs PostgreSQL in the short run (go test -short, make
// test-short), which keeps to the tests that need nothing but the code.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL: left out of the short run; make test runs it")
	}
}

// New returns a pool on a fresh migrated database that is dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := NewWithURL(t)
	return pool
}

// NewWithURL is New, also returning the database's URL for code that opens its own pool.
func NewWithURL(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	SkipShort(t)
	ctx := context.Background()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx) })
	if templateErr != nil {
		t.Fatalf("dbtest: %v", templateErr)
	}
	name := "gpumarket_test_" + randomHex(6)
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("dbtest: connect %s: %v (is PostgreSQL running? make test starts it)", AdminURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	dbURL := withDatabase(AdminURL(), name)
	pool, err := db.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		c, err := pgx.Connect(context.Background(), AdminURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return pool, dbURL
}

// NewEmpty returns the URL of a fresh database with no migrations applied, dropped at cleanup.
func NewEmpty(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	ctx := context.Background()
	name := "gpumarket_test_" + randomHex(6)
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("dbtest: connect %s: %v", AdminURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), AdminURL())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDatabase(AdminURL(), name)
}

// ensureTemplate builds gpumarket_tpl_<hash of the migrations> once per server, under an
// advisory lock so that test packages running in parallel build it once between them.
func ensureTemplate(ctx context.Context) (string, error) {
	name := "gpumarket_tpl_" + migrationsHash()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return "", fmt.Errorf("connect %s: %w (is PostgreSQL running? make test starts it)", AdminURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(727274)"); err != nil {
		return "", err
	}
	defer admin.Exec(ctx, "SELECT pg_advisory_unlock(727274)") //nolint:errcheck
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	pool, err := db.Open(ctx, withDatabase(AdminURL(), building))
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", err
	}
	return name, nil
}

func migrationsHash() string {
	h := sha256.New()
	names, _ := fs.Glob(db.Migrations, "migrations/*.sql")
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(db.Migrations, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
