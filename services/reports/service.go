package reports

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/carbon"
)

// Querier is what the reports read through: the pool, or a transaction of a caller that must
// see its own writes (the close, which stores each invoice's summary).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

var _ Querier = (*pgxpool.Pool)(nil)

// Service computes the savings and carbon reports of an account from the rollups.
type Service struct {
	pool *pgxpool.Pool
}

// New returns the reports over the platform's database.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// MethodVersion is the version of the method every report and row carries.
const MethodVersion = carbon.MethodVersion
