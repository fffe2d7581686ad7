// Package db owns the platform's PostgreSQL schema: versioned SQL migrations embedded in the
// binary and applied forward on start, and the connection pool every service shares.
// It imports no package of the project.
package db

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Migrations holds the versioned SQL files, applied in order by Migrate.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Open connects a pool to the database at url and checks that it answers.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db.Open: parse url: %w", err)
	}
	// Every session works in UTC, so that date_trunc and dates agree with billing periods.
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db.Open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("db.Open: ping %s: %w", cfg.ConnConfig.Host, err)
	}
	return pool, nil
}

// Migrate applies every migration not yet applied, in version order. It is safe to run from
// several processes at once: goose takes a PostgreSQL advisory lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	p, closeDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer closeDB()
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("db.Migrate: %w", err)
	}
	for _, r := range results {
		if log != nil {
			log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
		}
	}
	return nil
}

// MigrateTo applies or reverts migrations until version is the newest applied. Only tests use
// it, to write data as an older schema held it and check what a later migration, or its
// revert, makes of it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, version int64) error {
	p, closeDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer closeDB()
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("db.MigrateTo(%d): %w", version, err)
	}
	if current < version {
		_, err = p.UpTo(ctx, version)
	} else {
		_, err = p.DownTo(ctx, version)
	}
	if err != nil {
		return fmt.Errorf("db.MigrateTo(%d): %w", version, err)
	}
	return nil
}

// MigrateDownAll reverts every applied migration. Only the migration test uses it.
func MigrateDownAll(ctx context.Context, pool *pgxpool.Pool) error {
	p, closeDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("db.MigrateDownAll: %w", err)
	}
	return nil
}

// Version reports the newest applied migration.
func Version(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	p, closeDB, err := provider(pool)
	if err != nil {
		return 0, err
	}
	defer closeDB()
	return p.GetDBVersion(ctx)
}

func provider(pool *pgxpool.Pool) (*goose.Provider, func(), error) {
	dir, err := fs.Sub(Migrations, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("db: migrations: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, nil, fmt.Errorf("db: migration lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, dir, goose.WithSessionLocker(locker))
	if err != nil {
		sqlDB.Close()
		return nil, nil, fmt.Errorf("db: migrations: %w", err)
	}
	return p, func() { _ = sqlDB.Close() }, nil
}
