// Package catalog owns GPU offerings, the tiers they sit in, and the price book customers pay.
//
// An offering is one provider's rig serving one model. Its tier follows its P99 time to first
// token: claimed by the provider at listing, replaced by the measured figure once enough
// requests have been observed, so that traffic, not a claim, decides (FIELD-CASES 17).
// Prices are integers of micro-dollars per million tokens; nothing here is a float of money.
package catalog

import (
	"github.com/gpumarket/gpumarket/services/money"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MinMeasuredRequests is how many observed requests replace a provider's claimed figures.
const MinMeasuredRequests = 100

// Status is where an offering stands in its listing.
type Status string

const (
	StatusActive   Status = "active"   // listed and routable
	StatusPaused   Status = "paused"   // listed, takes no traffic
	StatusDelisted Status = "delisted" // gone from the catalog; kept for history
)

// Offering is a listed rig serving a model.
type Offering struct {
	ID                   string         `json:"id"`
	ProviderAccountID    string         `json:"provider_account_id"`
	ProviderName         string         `json:"provider_name"`
	GPU                  string         `json:"gpu"`
	GPUName              string         `json:"gpu_name"`
	GPUCount             int            `json:"gpu_count"`
	GPUMemoryGB          int            `json:"gpu_memory_gb"`
	Region               string         `json:"region"`
	Model                string         `json:"model"`
	Ask                  money.MicroUSD `json:"ask_usd_per_mtok"`
	AgentURL             string         `json:"agent_url,omitempty"`
	ClaimedTTFTP50Ms     *float64       `json:"claimed_ttft_p50_ms"`
	ClaimedTTFTP99Ms     *float64       `json:"claimed_ttft_p99_ms"`
	ClaimedTokensPerSec  *float64       `json:"claimed_tokens_per_second"`
	MeasuredRequests     int64          `json:"measured_requests"`
	MeasuredTTFTP50Ms    *float64       `json:"measured_ttft_p50_ms"`
	MeasuredTTFTP99Ms    *float64       `json:"measured_ttft_p99_ms"`
	MeasuredTokensPerSec *float64       `json:"measured_tokens_per_second"`
	Tier                 Tier           `json:"tier"`
	Status               Status         `json:"status"`
	Source               string         `json:"source,omitempty"`
	CreatedAt            time.Time      `json:"created_at"`
	UpdatedAt            time.Time      `json:"updated_at"`
}

// Measured reports whether enough traffic has been observed to show measured figures.
func (o Offering) Measured() bool {
	return o.MeasuredRequests >= MinMeasuredRequests && o.MeasuredTTFTP99Ms != nil
}

// TTFTP99Ms is the P99 time to first token the catalog shows: measured when there is enough
// traffic, else claimed; nil when neither exists.
func (o Offering) TTFTP99Ms() *float64 {
	if o.Measured() {
		return o.MeasuredTTFTP99Ms
	}
	return o.ClaimedTTFTP99Ms
}

// TokensPerSec is the throughput the catalog shows, measured or claimed like TTFTP99Ms.
func (o Offering) TokensPerSec() *float64 {
	if o.Measured() && o.MeasuredTokensPerSec != nil {
		return o.MeasuredTokensPerSec
	}
	return o.ClaimedTokensPerSec
}

// FiguresBasis says where the shown figures come from, in the catalog's words.
func (o Offering) FiguresBasis() string {
	if o.Measured() {
		return "measured over " + strconv.FormatInt(o.MeasuredRequests, 10) + " requests"
	}
	return "claimed"
}

// Footprint estimates the offering's energy and carbon per million tokens, when its
// throughput is known.
func (o Offering) Footprint() (Footprint, bool) {
	tps := o.TokensPerSec()
	gpu, okG := GPUBySKU(o.GPU)
	region, okR := RegionByCode(o.Region)
	if tps == nil || *tps <= 0 || !okG || !okR {
		return Footprint{}, false
	}
	return EstimateFootprint(gpu, o.GPUCount, *tps, region), true
}

// Service is the catalog on PostgreSQL.
type Service struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// NewService returns the catalog service on the given clock (nil means time.Now).
func NewService(pool *pgxpool.Pool, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, now: now}
}
