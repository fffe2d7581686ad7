// Package catalog owns GPU offerings, the tiers they sit in, and the price book customers pay.
//
// An offering is one provider's rig serving one model. Its tier follows its P99 time to first
// token: claimed by the provider at listing, replaced by the figure the gateway measured once
// enough requests have been observed, so that traffic, not a claim, decides. The figures a
// rig's agent reports of itself are kept apart and shown beside the measured ones; they decide
// nothing (see docs/tiers-and-asks.md).
//
// The catalog's invariants:
//   - An offering asks apart per million input and per million output tokens, and neither ask
//     is above its tier's price in force for the same kind of token when it is listed or
//     edited, so that no request pays a provider more than its customer paid. An offering that
//     a later price change or tier move leaves above its tier's price stays listed to its
//     provider, who is told why, but the public catalog does not show it and routing does not
//     send it traffic (Price.Covers is the rule both apply).
//   - A listing earns its place: its rig is pending until the platform's probes qualify it, active then, and
//     offline once no gateway hears its heartbeats; only an offering whose status and rig state are both active
//     is in the public catalog and routed (rigstate.go, docs/listing-states.md). What the platform observed
//     (RigState) is kept apart from the provider's choice (Status).
//
// Prices are integers of micro-dollars per million tokens; nothing here is a float of money.
//
// Each offering's provider name and each price change's author come from package accounts (accounts.NamesByID,
// accounts.EmailsByID), looked up after the rows are read. It writes only its own tables.
package catalog

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/money"
)

// MinMeasuredRequests is how many observed requests replace a provider's claimed figures; a rig's
// own reports over fewer are not compared with the gateway's.
const MinMeasuredRequests = 100

// Status is where an offering stands in its listing, by its provider's choice. What the platform observed of
// its rig is apart (RigState).
type Status string

const (
	StatusActive   Status = "active"   // listed, routable once its rig is active (RigState)
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
	AskInput             money.MicroUSD `json:"ask_input_usd_per_mtok"`
	AskOutput            money.MicroUSD `json:"ask_output_usd_per_mtok"`
	ClaimedTTFTP50Ms     *float64       `json:"claimed_ttft_p50_ms"`
	ClaimedTTFTP99Ms     *float64       `json:"claimed_ttft_p99_ms"`
	ClaimedTokensPerSec  *float64       `json:"claimed_tokens_per_second"`
	MeasuredRequests     int64          `json:"measured_requests"`
	MeasuredTTFTP50Ms    *float64       `json:"measured_ttft_p50_ms"`
	MeasuredTTFTP99Ms    *float64       `json:"measured_ttft_p99_ms"`
	MeasuredTokensPerSec *float64       `json:"measured_tokens_per_second"`
	// The rig's own figures, from its usage events: shown beside the measured ones, never used
	// to place or route the offering.
	ReportedRequests     int64    `json:"reported_requests"`
	ReportedTTFTP50Ms    *float64 `json:"reported_ttft_p50_ms"`
	ReportedTTFTP99Ms    *float64 `json:"reported_ttft_p99_ms"`
	ReportedTokensPerSec *float64 `json:"reported_tokens_per_second"`
	Tier                 Tier     `json:"tier"`
	Status               Status   `json:"status"`
	// What the platform observed of the rig (rigstate.go): routed and in the public catalog only when
	// active, as Status is.
	RigState       RigState   `json:"rig_state"`
	RigStateSince  time.Time  `json:"rig_state_since"`
	RigHeartbeatAt *time.Time `json:"-"`
	// The probes of a pending or offline rig: passed in a row, the last failure's problem, and the last one's
	// time and figures.
	RigProbePasses       int        `json:"-"`
	RigProbeProblem      string     `json:"-"`
	RigProbeAt           *time.Time `json:"-"`
	RigProbeTTFTMs       *float64   `json:"-"`
	RigProbeTokensPerSec *float64   `json:"-"`
	// RigNativeAPIs are the APIs besides chat completions its rig's engine serves natively, as its agent last
	// said (NativeMessages, NativeResponses); the gateway translates the others to chat completions.
	RigNativeAPIs []string  `json:"-"`
	Source        string    `json:"source,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// Where the rig runs and the PUE its provider stated, if any (docs/methodology.md).
	Site      carbon.Site `json:"site"`
	StatedPUE *float64    `json:"stated_pue,omitempty"`
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
		return "measured over " + money.Counted(o.MeasuredRequests, "request", "requests")
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

// BlendedAsk is what the offering earns per million tokens at the benchmark's mix, half input and
// half output: (AskInput + AskOutput) / 2, rounded up to the micro-dollar, so that it is at most a
// whole cap exactly when the two asks sum to at most twice the cap. The catalog sorts by it and
// its max price filter compares it.
func (o Offering) BlendedAsk() money.MicroUSD { return (o.AskInput + o.AskOutput + 1) / 2 }

// Config configures a Service.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Audit records each price change in the finance audit log, in the transaction that makes
	// it; nil records nothing.
	Audit AuditLog
	// Delisted, when set, is told each offering delisted, once the change is made: the platform closes its rig's
	// NATS connections (docs/usage-stream.md, "The rigs' entry point").
	Delisted func(offeringID string)
	// Events is told of each listed rig that goes offline, in the transaction that marks it
	// (rig.offline, docs/webhooks.md); nil tells no one.
	Events Events
}

// Events records an event for an account's webhooks inside the transaction of what happened
// (webhooks.Service.Emit).
type Events interface {
	Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) error
}

// AuditLog records a finance action inside the transaction that takes it (audit.Log).
type AuditLog interface {
	RecordTx(ctx context.Context, tx pgx.Tx, r audit.Record) error
}

// Service is the catalog on PostgreSQL.
type Service struct {
	pool  *pgxpool.Pool
	now   func() time.Time
	audit AuditLog
	// delisted is Config.Delisted.
	delisted func(offeringID string)
	events   Events
}

// NewService returns the catalog service.
func NewService(pool *pgxpool.Pool, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{pool: pool, now: cfg.Now, audit: cfg.Audit, delisted: cfg.Delisted, events: cfg.Events}
}
