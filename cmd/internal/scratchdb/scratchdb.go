// Package scratchdb gives a benchmark a fresh, migrated database of its own on the tests'
// PostgreSQL server (dbtest.AdminURL), dropped when the run ends.
package scratchdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db"
	"github.com/gpumarket/gpumarket/db/dbtest"
)

// Database is a scratch database and a pool on it.
type Database struct {
	Name string
	Pool *pgxpool.Pool
	// warn reports what could not be cleaned up.
	warn func(format string, args ...any)
}

// Create creates and migrates a database named prefix and a random suffix. warn is told what
// Drop could not do.
func Create(ctx context.Context, prefix string, warn func(format string, args ...any)) (*Database, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	d := &Database{Name: prefix + hex.EncodeToString(b), warn: warn}
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w (is PostgreSQL running? `go run ./cmd/gpumarket dev postgres` starts it)", dbtest.AdminURL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+d.Name); err != nil {
		return nil, fmt.Errorf("create the scratch database: %w", err)
	}
	u, err := url.Parse(dbtest.AdminURL())
	if err != nil {
		d.Drop()
		return nil, err
	}
	u.Path = "/" + d.Name
	if d.Pool, err = db.Open(ctx, u.String()); err != nil {
		d.Drop()
		return nil, err
	}
	if err := db.Migrate(ctx, d.Pool, nil); err != nil {
		d.Drop()
		return nil, err
	}
	return d, nil
}

// Drop closes the pool and drops the database, whatever state the run left it in.
func (d *Database) Drop() {
	if d.Pool != nil {
		d.Pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		d.warn("could not drop database %s: %v", d.Name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+d.Name+" WITH (FORCE)"); err != nil {
		d.warn("could not drop database %s: %v", d.Name, err)
	}
}
