package services

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Querier is what an owner's reads for other packages go through: the pool, or a caller's
// transaction when the rows must come from the snapshot of its other reads, see its own writes or
// follow its locks. Each owning package names it as its own Querier.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

var (
	_ Querier = (*pgxpool.Pool)(nil)
	_ Querier = (pgx.Tx)(nil)
)

// Loader is what an owner's bulk loads (the benchmarks', a data load's) write through by COPY: the
// pool, or a caller's transaction. Each owning package names it as its own Loader.
type Loader interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

var (
	_ Loader = (*pgxpool.Pool)(nil)
	_ Loader = (pgx.Tx)(nil)
)
