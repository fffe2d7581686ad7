// Package performance is a provider's view of its own rigs over a window: how busy each was,
// how its measured latency and throughput compare with what was claimed at listing, the energy
// a million tokens took, and what it earned per kWh. It reads the meter's hourly rollups
// (metering.ProviderRollups, indexed by provider and hour) and the catalog's rows, never usage
// rows, and only the caller's provider account's. docs/planner-and-carbon-routing.md defines
// each figure. It has no tables of its own and names none in its SQL.
package performance

import (
	"context"
	"math"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reliability"
)

// MaxDays bounds the window a view may ask for.
const MaxDays = 90

// Rollup is an offering's sums over the window, from the meter's hourly rollups.
type Rollup = metering.OfferingRollup

// Offering is one rig's figures over the window.
type Offering struct {
	OfferingID string         `json:"offering_id"`
	Model      string         `json:"model"`
	GPU        string         `json:"gpu"`
	GPUCount   int            `json:"gpu_count"`
	Region     string         `json:"region"`
	Tier       catalog.Tier   `json:"tier"`
	Status     catalog.Status `json:"status"`

	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`

	// BusyMs is the requests' durations summed; MeanInFlight is that over the window's length,
	// the mean number of requests in flight (Little's law). Capacity is how many the rig serves at
	// once, from its last heartbeat (0: unknown), and Utilisation MeanInFlight over Capacity.
	BusyMs       float64  `json:"busy_ms"`
	WindowMs     float64  `json:"window_ms"`
	MeanInFlight float64  `json:"mean_in_flight"`
	Capacity     int      `json:"capacity"`
	Utilisation  *float64 `json:"utilisation"`

	// What was claimed at listing against what the gateway measured over its window; the
	// measured ones are nil until catalog.MinMeasuredRequests requests back them.
	ClaimedTTFTP99Ms     *float64 `json:"claimed_ttft_p99_ms"`
	MeasuredTTFTP99Ms    *float64 `json:"measured_ttft_p99_ms"`
	ClaimedTokensPerSec  *float64 `json:"claimed_tokens_per_second"`
	MeasuredTokensPerSec *float64 `json:"measured_tokens_per_second"`
	MeasuredRequests     int64    `json:"measured_requests"`
	// TTFTKeepsClaim is measured P99 <= claimed; TokensPerSecKeepsClaim measured >= claimed; nil
	// when either side is missing.
	TTFTKeepsClaim         *bool `json:"ttft_keeps_claim"`
	TokensPerSecKeepsClaim *bool `json:"tokens_per_second_keeps_claim"`

	// KWhPerMTok is the rig's reported energy over its tokens (input and output), per million;
	// MeasuredEnergyShare the part of that energy it measured rather than estimated, and
	// SimulatedEnergyShare the part a simulated power sensor reported. Estimated is the
	// board-power estimate at the catalog's throughput, for comparison.
	EnergyKWh             float64  `json:"energy_kwh"`
	KWhPerMTok            *float64 `json:"kwh_per_million_tokens"`
	MeasuredEnergyShare   *float64 `json:"measured_energy_share"`
	SimulatedEnergyShare  *float64 `json:"simulated_energy_share"`
	EstimatedKWhPerMTok   *float64 `json:"estimated_kwh_per_million_tokens"`
	EstimatedGCO2ePerMTok *float64 `json:"estimated_g_co2e_per_million_tokens"`

	// Earned is what the provider is owed for the window's requests, exact; EarnedPerKWh that
	// over EnergyKWh, rounded once to the picodollar; nil without energy.
	Earned       money.BigPico `json:"earned_pico"`
	EarnedPerKWh *money.Pico   `json:"earned_per_kwh_pico"`

	// Reliability is the offering's reliability record, the one the public catalog shows (filled in by the
	// page, which holds the records).
	Reliability reliability.Record `json:"reliability"`
}

// Summarise computes an offering's figures from its rollup over a window of windowMs, with the
// rig's capacity (0: unknown).
func Summarise(o catalog.Offering, r Rollup, windowMs float64, capacity int) Offering {
	out := Offering{OfferingID: o.ID, Model: o.Model, GPU: o.GPU, GPUCount: o.GPUCount, Region: o.Region, Tier: o.Tier,
		Status: o.Status, Requests: r.Requests, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		BusyMs: r.BusyMs, WindowMs: windowMs, Capacity: capacity, Earned: r.Payable,
		ClaimedTTFTP99Ms: o.ClaimedTTFTP99Ms, ClaimedTokensPerSec: o.ClaimedTokensPerSec, MeasuredRequests: o.MeasuredRequests}
	if windowMs > 0 {
		out.MeanInFlight = r.BusyMs / windowMs
		if capacity > 0 {
			u := out.MeanInFlight / float64(capacity)
			out.Utilisation = &u
		}
	}
	if o.Measured() {
		out.MeasuredTTFTP99Ms, out.MeasuredTokensPerSec = o.MeasuredTTFTP99Ms, o.MeasuredTokensPerSec
	}
	out.TTFTKeepsClaim = compare(out.MeasuredTTFTP99Ms, out.ClaimedTTFTP99Ms, func(m, c float64) bool { return m <= c })
	out.TokensPerSecKeepsClaim = compare(out.MeasuredTokensPerSec, out.ClaimedTokensPerSec, func(m, c float64) bool { return m >= c })

	out.EnergyKWh = carbon.KWh(r.EnergyJ)
	if tokens := r.InputTokens + r.OutputTokens; tokens > 0 && r.EnergyJ > 0 {
		k := carbon.KWh(carbon.PerMillionTokens(r.EnergyJ / float64(tokens)))
		share, simulated := r.EnergyMeasuredJ/r.EnergyJ, r.EnergySimulatedJ/r.EnergyJ
		out.KWhPerMTok, out.MeasuredEnergyShare, out.SimulatedEnergyShare = &k, &share, &simulated
	}
	if e, ok := o.Emissions(); ok {
		k, g := carbon.KWh(carbon.PerMillionTokens(e.JoulesPerToken)), e.GCO2ePerMTok()
		out.EstimatedKWhPerMTok, out.EstimatedGCO2ePerMTok = &k, &g
	}
	out.EarnedPerKWh = perKWh(r.Payable, r.EnergyJ)
	return out
}

func compare(measured, claimed *float64, keeps func(m, c float64) bool) *bool {
	if measured == nil || claimed == nil {
		return nil
	}
	b := keeps(*measured, *claimed)
	return &b
}

// perKWh is payable over energy in kWh, payable x 3.6e6 / joules, rounded half up to the
// picodollar: the one rounding of the figure. Nil without energy, or past the range of a Pico.
func perKWh(payable money.BigPico, joules float64) *money.Pico {
	p, err := payable.Pico()
	if err != nil || !(joules > 0) || math.IsInf(joules, 0) {
		return nil
	}
	q := new(big.Rat).SetInt64(int64(p))
	q.Mul(q, big.NewRat(int64(carbon.JoulesPerKWh), 1))
	q.Quo(q, new(big.Rat).SetFloat64(joules))
	// Round half up: floor(q + 1/2).
	q.Add(q, big.NewRat(1, 2))
	v := new(big.Int).Quo(q.Num(), q.Denom())
	if !v.IsInt64() {
		return nil
	}
	out := money.Pico(v.Int64())
	return &out
}

// Catalog is what the view reads of the catalog: the provider's own listed rigs.
type Catalog interface {
	ListOwn(ctx context.Context, providerAccountID string) ([]catalog.Offering, error)
}

var _ Catalog = (*catalog.Service)(nil)

// Capacities tells a rig's concurrency (routing.Router.Capacity); nil knows none.
type Capacities interface {
	Capacity(offeringID string) int
}

// Service reads the view from PostgreSQL.
type Service struct {
	pool *pgxpool.Pool
	cat  Catalog
}

// NewService returns the view's service.
func NewService(pool *pgxpool.Pool, cat Catalog) *Service { return &Service{pool: pool, cat: cat} }

// Window is the view's time range: from the start of the hour days x 24 hours before now, to now.
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// WindowOf is the window of the last days before now.
func WindowOf(now time.Time, days int) (Window, error) {
	if days < 1 || days > MaxDays {
		return Window{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"days": "Choose 1 to 90 days."}}
	}
	now = now.UTC()
	return Window{From: now.Add(-time.Duration(days) * 24 * time.Hour).Truncate(time.Hour), To: now}, nil
}

// Offerings is the view of each of the provider's listed rigs over the window, newest rig
// first, with capacities from caps (nil: unknown).
func (s *Service) Offerings(ctx context.Context, providerAccountID string, w Window, caps Capacities) (_ []Offering, err error) {
	defer services.Wrap(&err, "performance.Offerings")
	own, err := s.cat.ListOwn(ctx, providerAccountID)
	if err != nil {
		return nil, err
	}
	rollups, err := metering.ProviderRollups(ctx, s.pool, providerAccountID, w.From, w.To)
	if err != nil {
		return nil, err
	}
	windowMs := float64(w.To.Sub(w.From) / time.Millisecond)
	out := make([]Offering, 0, len(own))
	for _, o := range own {
		capacity := 0
		if caps != nil {
			capacity = caps.Capacity(o.ID)
		}
		out = append(out, Summarise(o, rollups[o.ID], windowMs, capacity))
	}
	return out, nil
}
