package reports

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/metering"
)

// Querier is what the reports read through: the pool, or a transaction of a caller that must
// see its own writes (the close, which stores each invoice's summary).
type Querier = services.Querier

// Service computes the savings and carbon reports of an account from the rollups.
type Service struct {
	pool *pgxpool.Pool
}

// New returns the reports over the platform's database.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// MethodVersion is the version of the method every report and row carries.
const MethodVersion = carbon.MethodVersion

// Plans are PostgreSQL's plans of the two reports' reads of the rollups for an account and
// query, by report: how a benchmark or an operator checks that they read the account's rollups
// through usage_hourly_account_idx and never scan the table.
func (s *Service) Plans(ctx context.Context, accountID string, q Query) (map[string]string, error) {
	plans, err := metering.AccountRollupPlans(ctx, s.pool,
		metering.RollupWindow{AccountIDs: []string{accountID}, From: q.From, To: q.To, Unit: q.trunc()})
	if err != nil {
		return nil, err
	}
	return map[string]string{"savings": plans["charges"], "carbon": plans["energy"]}, nil
}
