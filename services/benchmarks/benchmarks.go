// Package benchmarks owns the benchmark results providers attach to their listings
// (provider_benchmarks): loadgen's JSON result of a run against the offering, through the
// platform's gateway as a customer reaches it (cmd/loadgen, docs/provider-benchmarks.md).
//
// Its invariants:
//   - A result is the provider's own claim. The catalog shows it as such, beside what the
//     platform measured; it places, prices and routes nothing.
//   - Only the offering's provider attaches or removes its result: every statement is scoped to
//     the provider's account, and the offering must be the provider's own listing (Offerings).
//   - A result is held to its listing before it is kept (Check): this offering and its model, a
//     known method, counts and figures that agree, a run that has ended. It is kept as uploaded.
//   - One result per offering: attaching another replaces it.
//
// Tables of other packages it names in SQL: none. It reads listings through package catalog.
package benchmarks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// Benchmark is a result a provider attached to one of its offerings, and what the catalog
// shows of it.
type Benchmark struct {
	OfferingID        string    `json:"offering_id"`
	ProviderAccountID string    `json:"-"`
	AttachedAt        time.Time `json:"attached_at"`
	StartedAt         time.Time `json:"started_at"` // when the run started, by the clock of the machine that ran it
	Method            string    `json:"method"`
	Model             string    `json:"model"`
	BaseURL           string    `json:"base_url"`        // the API the run called
	ThroughGateway    bool      `json:"through_gateway"` // BaseURL is the platform's gateway
	Rate              float64   `json:"rate"`            // Poisson arrivals per second; 0 when all were sent at once
	Requests          int       `json:"requests"`
	Completed         int       `json:"completed"`
	TTFTP50Ms         float64   `json:"ttft_p50_ms"`
	TTFTP99Ms         float64   `json:"ttft_p99_ms"`
	TotalTPS          float64   `json:"total_tps"`
	// Result is loadgen's JSON result as it was attached.
	Result string `json:"-"`
}

// Offerings finds a provider's own listing; *catalog.Service implements it, answering
// not found for another provider's.
type Offerings interface {
	Own(ctx context.Context, providerAccountID, id string) (catalog.Offering, error)
}

var _ Offerings = (*catalog.Service)(nil)

// Service keeps the attached results on PostgreSQL.
type Service struct {
	pool      *pgxpool.Pool
	offerings Offerings
	now       func() time.Time
}

// NewService returns the service; now nil means time.Now.
func NewService(pool *pgxpool.Pool, offerings Offerings, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, offerings: offerings, now: now}
}

// AttachInput is a result a provider's user attaches to an offering. GatewayURL is the
// platform's gateway as the provider reaches it (…/v1).
type AttachInput struct {
	ProviderAccountID string
	UserID            string
	OfferingID        string
	Result            []byte
	GatewayURL        string
}

// Attach checks the result against the provider's own offering and keeps it in place of the
// one attached before, if any.
func (s *Service) Attach(ctx context.Context, in AttachInput) (_ Benchmark, err error) {
	defer services.Wrap(&err, "benchmarks.Attach(%s)", in.OfferingID)
	o, err := s.offerings.Own(ctx, in.ProviderAccountID, in.OfferingID)
	if err != nil {
		return Benchmark{}, err
	}
	now := s.now()
	b, err := Check(in.Result, o, in.GatewayURL, now)
	if err != nil {
		return Benchmark{}, err
	}
	b.AttachedAt = now.UTC()
	// The upsert replaces only the provider's own row: an offering's provider never changes, and
	// the condition keeps it so.
	tag, err := s.pool.Exec(ctx, `INSERT INTO provider_benchmarks (offering_id, provider_account_id, attached_by, attached_at,
			started_at, method, model, base_url, through_gateway, rate, requests, completed, ttft_p50_ms, ttft_p99_ms,
			total_tps, result)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		ON CONFLICT (offering_id) DO UPDATE SET attached_by = EXCLUDED.attached_by, attached_at = EXCLUDED.attached_at,
			started_at = EXCLUDED.started_at, method = EXCLUDED.method, model = EXCLUDED.model, base_url = EXCLUDED.base_url,
			through_gateway = EXCLUDED.through_gateway, rate = EXCLUDED.rate, requests = EXCLUDED.requests,
			completed = EXCLUDED.completed, ttft_p50_ms = EXCLUDED.ttft_p50_ms, ttft_p99_ms = EXCLUDED.ttft_p99_ms,
			total_tps = EXCLUDED.total_tps, result = EXCLUDED.result
		WHERE provider_benchmarks.provider_account_id = EXCLUDED.provider_account_id`,
		b.OfferingID, in.ProviderAccountID, in.UserID, b.AttachedAt, b.StartedAt, b.Method, b.Model, b.BaseURL,
		b.ThroughGateway, b.Rate, b.Requests, b.Completed, b.TTFTP50Ms, b.TTFTP99Ms, b.TotalTPS, b.Result)
	if err != nil {
		return Benchmark{}, err
	}
	if tag.RowsAffected() != 1 {
		return Benchmark{}, services.Errorf(services.CodeNotFound, "No such rig.")
	}
	b.ProviderAccountID = in.ProviderAccountID
	return b, nil
}

// Remove takes the provider's result off its offering; removing none is not an error.
func (s *Service) Remove(ctx context.Context, providerAccountID, offeringID string) (err error) {
	defer services.Wrap(&err, "benchmarks.Remove(%s)", offeringID)
	if _, err := s.offerings.Own(ctx, providerAccountID, offeringID); err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `DELETE FROM provider_benchmarks WHERE offering_id = $1 AND provider_account_id = $2`,
		offeringID, providerAccountID)
	return err
}

// Own is the result the provider attached to its offering; found is false when there is none.
func (s *Service) Own(ctx context.Context, providerAccountID, offeringID string) (_ Benchmark, found bool, err error) {
	defer services.Wrap(&err, "benchmarks.Own(%s)", offeringID)
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM provider_benchmarks
		WHERE offering_id::text = $1 AND provider_account_id = $2`, offeringID, providerAccountID)
	if err != nil {
		return Benchmark{}, false, err
	}
	b, err := pgx.CollectOneRow(rows, scanBenchmark)
	if errors.Is(err, pgx.ErrNoRows) {
		return Benchmark{}, false, nil
	}
	return b, err == nil, err
}

// ForOfferings are the results attached to the offerings (ids as the catalog gives them), by
// offering id. The caller shows them only beside offerings it may show.
func (s *Service) ForOfferings(ctx context.Context, offeringIDs []string) (_ map[string]Benchmark, err error) {
	defer services.Wrap(&err, "benchmarks.ForOfferings")
	out := map[string]Benchmark{}
	if len(offeringIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM provider_benchmarks WHERE offering_id = ANY($1::uuid[])`, offeringIDs)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanBenchmark)
	if err != nil {
		return nil, err
	}
	for _, b := range list {
		out[b.OfferingID] = b
	}
	return out, nil
}

const columns = `offering_id::text, provider_account_id::text, attached_at, started_at, method, model, base_url,
	through_gateway, rate, requests, completed, ttft_p50_ms, ttft_p99_ms, total_tps, result`

func scanBenchmark(row pgx.CollectableRow) (Benchmark, error) {
	var b Benchmark
	err := row.Scan(&b.OfferingID, &b.ProviderAccountID, &b.AttachedAt, &b.StartedAt, &b.Method, &b.Model, &b.BaseURL,
		&b.ThroughGateway, &b.Rate, &b.Requests, &b.Completed, &b.TTFTP50Ms, &b.TTFTP99Ms, &b.TotalTPS, &b.Result)
	return b, err
}
