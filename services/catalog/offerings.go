package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/money"
)

const offeringColumns = `o.id, o.provider_account_id, o.gpu, o.gpu_count, o.region, o.model,
	o.ask_input_micro_usd_per_mtok, o.ask_output_micro_usd_per_mtok,
	o.claimed_ttft_p50_ms, o.claimed_ttft_p99_ms, o.claimed_tokens_per_sec,
	o.measured_requests, o.measured_ttft_p50_ms, o.measured_ttft_p99_ms, o.measured_tokens_per_sec,
	o.reported_requests, o.reported_ttft_p50_ms, o.reported_ttft_p99_ms, o.reported_tokens_per_sec,
	o.tier, o.status, o.source, o.created_at, o.updated_at, o.site, o.pue,
	o.rig_state, o.rig_state_since, o.rig_heartbeat_at, o.rig_probe_passes, o.rig_probe_problem,
	o.rig_probe_at, o.rig_probe_ttft_ms, o.rig_probe_tokens_per_sec, o.rig_native_apis`

func scanOffering(row pgx.CollectableRow) (Offering, error) {
	var o Offering
	var askIn, askOut int64
	err := row.Scan(&o.ID, &o.ProviderAccountID, &o.GPU, &o.GPUCount, &o.Region, &o.Model,
		&askIn, &askOut, &o.ClaimedTTFTP50Ms, &o.ClaimedTTFTP99Ms, &o.ClaimedTokensPerSec,
		&o.MeasuredRequests, &o.MeasuredTTFTP50Ms, &o.MeasuredTTFTP99Ms, &o.MeasuredTokensPerSec,
		&o.ReportedRequests, &o.ReportedTTFTP50Ms, &o.ReportedTTFTP99Ms, &o.ReportedTokensPerSec,
		&o.Tier, &o.Status, &o.Source, &o.CreatedAt, &o.UpdatedAt, &o.Site, &o.StatedPUE,
		&o.RigState, &o.RigStateSince, &o.RigHeartbeatAt, &o.RigProbePasses, &o.RigProbeProblem,
		&o.RigProbeAt, &o.RigProbeTTFTMs, &o.RigProbeTokensPerSec, &o.RigNativeAPIs)
	o.AskInput, o.AskOutput = money.MicroUSD(askIn), money.MicroUSD(askOut)
	if g, ok := GPUBySKU(o.GPU); ok {
		o.GPUName = g.Name
		o.GPUMemoryGB = g.VRAMGB * o.GPUCount
	}
	return o, err
}

// Sort orders catalog listings.
type Sort string

const (
	SortPrice      Sort = "price"      // blended ask (Offering.BlendedAsk), cheapest first
	SortLatency    Sort = "latency"    // P99 time to first token, fastest first
	SortThroughput Sort = "throughput" // tokens per second, highest first
	SortCarbon     Sort = "carbon"     // gCO2e per million tokens, lowest first
)

// Sorts lists the orders the catalog offers.
var Sorts = []Sort{SortPrice, SortLatency, SortThroughput, SortCarbon}

// ListInput filters the public catalog. Zero values filter nothing.
type ListInput struct {
	Tier     Tier
	Model    string
	Region   string
	MaxAsk   money.MicroUSD // caps the blended ask (Offering.BlendedAsk), per million tokens
	MaxP99Ms float64
	Sort     Sort
}

// Validate checks the filters.
func (in ListInput) Validate() error {
	fe := services.FieldErrors{}
	if in.Tier != "" && !in.Tier.Valid() {
		fe.Add("tier", "Choose realtime, standard or batch.")
	}
	if in.Region != "" {
		if _, ok := RegionByCode(in.Region); !ok {
			fe.Add("region", "Unknown region.")
		}
	}
	if in.MaxP99Ms < 0 {
		fe.Add("max_p99_ms", "Use a positive number of milliseconds.")
	}
	switch in.Sort {
	case "", SortPrice, SortLatency, SortThroughput, SortCarbon:
	default:
		fe.Add("sort", "Sort by price, latency, throughput or carbon.")
	}
	return fe.Err()
}

// List returns the public catalog: the active offerings whose rig is active (qualified by the platform's
// probes and heard from) and whose price in force, their model's in their tier or else the tier's default,
// covers their asks (Offering.Priced), that match the filters, in the chosen order.
func (s *Service) List(ctx context.Context, in ListInput) (_ []Offering, err error) {
	defer services.Wrap(&err, "catalog.List")
	if err := in.Validate(); err != nil {
		return nil, err
	}
	book, err := s.PriceBook(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	where := []string{"o.status = 'active'", "o.rig_state = 'active'"}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if in.Tier != "" {
		add("o.tier = $%d", string(in.Tier))
	}
	if in.Model != "" {
		add("o.model = $%d", in.Model)
	}
	if in.Region != "" {
		add("o.region = $%d", in.Region)
	}
	if in.MaxAsk > 0 {
		// BlendedAsk <= MaxAsk, exactly: the asks sum to at most twice the cap.
		add("o.ask_input_micro_usd_per_mtok + o.ask_output_micro_usd_per_mtok <= 2 * $%d::bigint", int64(in.MaxAsk))
	}
	rows, err := s.pool.Query(ctx, `SELECT `+offeringColumns+`
		FROM offerings o
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY o.ask_input_micro_usd_per_mtok + o.ask_output_micro_usd_per_mtok, o.id`, args...)
	if err != nil {
		return nil, err
	}
	all, err := s.collectOfferings(ctx, rows)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, o := range all {
		if !o.Priced(book.ForModel(o.Model, now)) {
			continue
		}
		if in.MaxP99Ms > 0 {
			p := o.TTFTP99Ms()
			if p == nil || *p > in.MaxP99Ms {
				continue
			}
		}
		out = append(out, o)
	}
	sortOfferings(out, in.Sort)
	return out, nil
}

// sortOfferings orders by the shown (measured or claimed) figures; unknown figures go last.
func sortOfferings(os []Offering, by Sort) {
	key := func(o Offering) (float64, bool) {
		switch by {
		case SortLatency:
			if p := o.TTFTP99Ms(); p != nil {
				return *p, true
			}
		case SortThroughput:
			if t := o.TokensPerSec(); t != nil {
				return -*t, true
			}
		case SortCarbon:
			if f, ok := o.Footprint(); ok {
				return f.GCO2ePerMTok, true
			}
		default:
			return float64(o.AskInput + o.AskOutput), true
		}
		return 0, false
	}
	sort.SliceStable(os, func(i, j int) bool {
		ki, oki := key(os[i])
		kj, okj := key(os[j])
		if oki != okj {
			return oki
		}
		return ki < kj
	})
}

// Models lists the distinct models of the public catalog, for filters.
func (s *Service) Models(ctx context.Context) (_ []string, err error) {
	defer services.Wrap(&err, "catalog.Models")
	listed, err := s.List(ctx, ListInput{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range listed {
		out = append(out, o.Model)
	}
	sort.Strings(out)
	return compactStrings(out), nil
}

func compactStrings(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// ListActive returns every active offering, whatever its asks and its rig's state: routing
// holds them all, applies the price in force itself, at the moment it routes, so that a scheduled price change
// or a tier move takes effect there without waiting for a reload, routes only those whose rig is active, and
// probes the pending and offline ones.
func (s *Service) ListActive(ctx context.Context) (_ []Offering, err error) {
	defer services.Wrap(&err, "catalog.ListActive")
	rows, err := s.pool.Query(ctx, `SELECT `+offeringColumns+`
		FROM offerings o
		WHERE o.status = 'active'
		ORDER BY o.id`)
	if err != nil {
		return nil, err
	}
	return s.collectOfferings(ctx, rows)
}

// ListSeeded returns the active offerings the demo seeded (demo.Seed gives each a seed key), in the order of their
// keys: those whose rigs `gpumarket dev` simulates.
func (s *Service) ListSeeded(ctx context.Context) (_ []Offering, err error) {
	defer services.Wrap(&err, "catalog.ListSeeded")
	rows, err := s.pool.Query(ctx, `SELECT `+offeringColumns+`
		FROM offerings o
		WHERE o.seed_key IS NOT NULL AND o.status = 'active'
		ORDER BY o.seed_key`)
	if err != nil {
		return nil, err
	}
	return s.collectOfferings(ctx, rows)
}

// Get returns one listed (not delisted) offering.
func (s *Service) Get(ctx context.Context, id string) (_ Offering, err error) {
	defer services.Wrap(&err, "catalog.Get(%s)", id)
	return s.one(ctx, `o.id = $1 AND o.status <> 'delisted'`, id)
}

func (s *Service) one(ctx context.Context, where string, args ...any) (Offering, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+offeringColumns+`
		FROM offerings o WHERE `+where, args...)
	if err != nil {
		return Offering{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, scanOffering)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return Offering{}, errNotFound
	}
	if err != nil {
		return Offering{}, err
	}
	one := []Offering{o}
	if err := s.nameProviders(ctx, one); err != nil {
		return Offering{}, err
	}
	return one[0], nil
}

// collectOfferings reads rows of offeringColumns, with each provider's name.
func (s *Service) collectOfferings(ctx context.Context, rows pgx.Rows) ([]Offering, error) {
	os, err := pgx.CollectRows(rows, scanOffering)
	if err != nil {
		return nil, err
	}
	return os, s.nameProviders(ctx, os)
}

// nameProviders sets each offering's ProviderName, from package accounts.
func (s *Service) nameProviders(ctx context.Context, os []Offering) error {
	ids := make([]string, len(os))
	for i, o := range os {
		ids[i] = o.ProviderAccountID
	}
	names, err := accounts.NamesByID(ctx, s.pool, ids)
	if err != nil {
		return err
	}
	for i := range os {
		os[i].ProviderName = names[os[i].ProviderAccountID]
	}
	return nil
}

var errNotFound = services.Errorf(services.CodeNotFound, "No such offering.")

// ListingInput is what a provider gives to list or edit a rig.
type ListingInput struct {
	GPU                 string         `json:"gpu"`
	GPUCount            int            `json:"gpu_count"`
	Region              string         `json:"region"`
	Model               string         `json:"model"`
	AskInput            money.MicroUSD `json:"ask_input_usd_per_mtok"`
	AskOutput           money.MicroUSD `json:"ask_output_usd_per_mtok"`
	ClaimedTTFTP50Ms    *float64       `json:"claimed_ttft_p50_ms"`
	ClaimedTTFTP99Ms    *float64       `json:"claimed_ttft_p99_ms"`
	ClaimedTokensPerSec *float64       `json:"claimed_tokens_per_second"`
	// Site is where the rig runs; empty means a data centre for an enterprise GPU and a home
	// otherwise. PUE is the provider's stated power usage effectiveness, or nil for the
	// site's default (docs/methodology.md).
	Site carbon.Site `json:"site"`
	PUE  *float64    `json:"pue"`
}

var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// Validate checks every field on its own and reports all problems at once; Create and Update
// check the rest (see Service.check).
func (in *ListingInput) Validate() error {
	fe := services.FieldErrors{}
	in.validate(fe)
	return fe.Err()
}

func (in *ListingInput) validate(fe services.FieldErrors) {
	if _, ok := GPUBySKU(in.GPU); !ok {
		fe.Add("gpu", "Choose a GPU model from the list.")
	}
	if in.GPUCount < 1 || in.GPUCount > 8 {
		fe.Add("gpu_count", "A rig has 1 to 8 GPUs.")
	}
	if _, ok := RegionByCode(in.Region); !ok {
		fe.Add("region", "Choose a region from the list.")
	}
	in.Model = strings.TrimSpace(in.Model)
	if !modelName.MatchString(in.Model) {
		fe.Add("model", "Name the model as its repository does, like meta-llama/Meta-Llama-3-8B-Instruct (letters, digits, . _ - /).")
	}
	for _, a := range []struct {
		field, kind string
		ask         money.MicroUSD
	}{{FieldAskInput, "input", in.AskInput}, {FieldAskOutput, "output", in.AskOutput}} {
		if a.ask <= 0 {
			fe.Add(a.field, "Set an ask above $0 per million "+a.kind+" tokens.")
		} else if a.ask > maxAsk {
			fe.Add(a.field, "Asks above $1,000 per million tokens are not accepted.")
		}
	}
	positive := func(field string, v *float64, max float64) {
		if v != nil && (*v <= 0 || *v > max) {
			fe.Add(field, fmt.Sprintf("Use a number above 0 and at most %g, or leave it empty.", max))
		}
	}
	positive("claimed_ttft_p50_ms", in.ClaimedTTFTP50Ms, 600_000)
	positive("claimed_ttft_p99_ms", in.ClaimedTTFTP99Ms, 600_000)
	positive("claimed_tokens_per_second", in.ClaimedTokensPerSec, 1_000_000)
	if in.ClaimedTTFTP50Ms != nil && in.ClaimedTTFTP99Ms != nil && *in.ClaimedTTFTP50Ms > *in.ClaimedTTFTP99Ms {
		fe.Add("claimed_ttft_p99_ms", "P99 cannot be below P50.")
	}
	if in.Site == "" {
		in.Site = DefaultSite(in.GPU)
	}
	if !in.Site.Valid() {
		fe.Add("site", "Choose home or data centre.")
	}
	if in.PUE != nil && (*in.PUE < carbon.MinPUE || *in.PUE > carbon.MaxPUE) {
		fe.Add("pue", fmt.Sprintf("A PUE is between %.1f and %.1f; leave it empty for the site's default.", carbon.MinPUE, carbon.MaxPUE))
	}
}

// DefaultSite is where a rig of a GPU model runs unless its provider says otherwise: a data
// centre for an enterprise card, a home for a consumer one.
func DefaultSite(gpu string) carbon.Site {
	if g, ok := GPUBySKU(gpu); ok && g.Class == "enterprise" {
		return carbon.SiteDatacentre
	}
	return carbon.SiteHome
}

// check validates a listing that will sit in tier: every rule of Validate, and its asks against
// the price in force for its model in the tier (AskProblems), all problems at once.
func (s *Service) check(ctx context.Context, in *ListingInput, tier Tier) error {
	fe := services.FieldErrors{}
	in.validate(fe)
	_, badIn := fe[FieldAskInput]
	_, badOut := fe[FieldAskOutput]
	if !badIn && !badOut {
		prices, err := s.CurrentModelPrices(ctx, in.Model)
		if err != nil {
			return err
		}
		for field, problem := range AskProblems(tier, prices, in.AskInput, in.AskOutput) {
			fe.Add(field, problem)
		}
	}
	return fe.Err()
}

// claimedTier is the tier a listing starts in: its claimed P99, or batch (no promise) when it
// claims none.
func (in ListingInput) claimedTier() Tier {
	if in.ClaimedTTFTP99Ms == nil {
		return TierBatch
	}
	return TierForP99(*in.ClaimedTTFTP99Ms)
}

// Create lists a new rig for the provider account, in the tier its claims place it. Its rig is pending: it
// is neither in the public catalog nor routed until its agent has connected and passed the platform's probes
// (docs/listing-states.md).
func (s *Service) Create(ctx context.Context, providerAccountID string, in ListingInput) (_ Offering, err error) {
	defer services.Wrap(&err, "catalog.Create")
	tier := in.claimedTier()
	if err := s.check(ctx, &in, tier); err != nil {
		return Offering{}, err
	}
	now := s.now().UTC()
	var id string
	err = s.pool.QueryRow(ctx, `
		INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
			ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok,
			claimed_ttft_p50_ms, claimed_ttft_p99_ms, claimed_tokens_per_sec, tier, status, created_at, updated_at,
			site, pue, rig_state, rig_state_since)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'active', $12, $12, $13, $14, 'pending', $12)
		RETURNING id`,
		providerAccountID, in.GPU, in.GPUCount, in.Region, in.Model, int64(in.AskInput), int64(in.AskOutput),
		in.ClaimedTTFTP50Ms, in.ClaimedTTFTP99Ms, in.ClaimedTokensPerSec, string(tier), now, string(in.Site), in.PUE,
	).Scan(&id)
	if err != nil {
		return Offering{}, err
	}
	return s.one(ctx, `o.id = $1`, id)
}

// Update edits a provider's own listed rig. Another provider's rig is not found. The tier is
// recomputed from the new claims unless traffic has measured it, and the asks are checked
// against the tier the rig will be in. A rig whose model changes is pending again: its probes
// must show it serves the new one.
func (s *Service) Update(ctx context.Context, providerAccountID, id string, in ListingInput) (_ Offering, err error) {
	defer services.Wrap(&err, "catalog.Update(%s)", id)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Offering{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var measured bool
	var tier Tier
	// The row is locked so that routing's flush cannot move its tier between the check and the write.
	err = tx.QueryRow(ctx, `SELECT measured_requests >= $3 AND measured_ttft_p99_ms IS NOT NULL, tier FROM offerings
		WHERE id = $1 AND provider_account_id = $2 AND status <> 'delisted' FOR UPDATE`,
		id, providerAccountID, MinMeasuredRequests).Scan(&measured, &tier)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return Offering{}, errNotFound
	}
	if err != nil {
		return Offering{}, err
	}
	if !measured {
		tier = in.claimedTier()
	}
	if err := s.check(ctx, &in, tier); err != nil {
		return Offering{}, err
	}
	if _, err := tx.Exec(ctx, `
		UPDATE offerings SET gpu = $2, gpu_count = $3, region = $4, model = $5,
			ask_input_micro_usd_per_mtok = $6, ask_output_micro_usd_per_mtok = $7,
			claimed_ttft_p50_ms = $8, claimed_ttft_p99_ms = $9, claimed_tokens_per_sec = $10,
			tier = $11, updated_at = $12, site = $13, pue = $14,
			-- A rig that now serves another model has not shown it serves that one: it qualifies again.
			rig_state = CASE WHEN model <> $5 THEN 'pending' ELSE rig_state END,
			rig_state_since = CASE WHEN model <> $5 THEN $12 ELSE rig_state_since END,
			rig_probe_passes = CASE WHEN model <> $5 THEN 0 ELSE rig_probe_passes END,
			rig_probe_problem = CASE WHEN model <> $5 THEN '' ELSE rig_probe_problem END
		WHERE id = $1`,
		id, in.GPU, in.GPUCount, in.Region, in.Model, int64(in.AskInput), int64(in.AskOutput),
		in.ClaimedTTFTP50Ms, in.ClaimedTTFTP99Ms, in.ClaimedTokensPerSec, string(tier), s.now().UTC(),
		string(in.Site), in.PUE); err != nil {
		return Offering{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Offering{}, err
	}
	return s.Own(ctx, providerAccountID, id)
}

// SetStatus pauses, resumes or delists a provider's own rig. Delisting is final.
func (s *Service) SetStatus(ctx context.Context, providerAccountID, id string, status Status) (err error) {
	defer services.Wrap(&err, "catalog.SetStatus(%s, %s)", id, status)
	switch status {
	case StatusActive, StatusPaused, StatusDelisted:
	default:
		return &services.Error{Code: services.CodeInvalid, Message: "Choose active, paused or delisted.",
			Fields: map[string]string{"status": "Choose active, paused or delisted."}}
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE offerings SET status = $3, updated_at = $4
		WHERE id = $1 AND provider_account_id = $2 AND status <> 'delisted'`,
		id, providerAccountID, string(status), s.now().UTC())
	if isInvalidText(err) || (err == nil && tag.RowsAffected() == 0) {
		return errNotFound
	}
	if err == nil && status == StatusDelisted && s.delisted != nil {
		s.delisted(id)
	}
	return err
}

// ReissueRigCredential moves the provider's offering on to the next issue of its rig's NATS credential and returns
// that issue: the rig's earlier password is refused from now on (events.RigPasswordIssue; docs/usage-stream.md,
// "The rigs' entry point"). A delisted offering has no credential to re-issue.
func (s *Service) ReissueRigCredential(ctx context.Context, providerAccountID, id string) (issue int, err error) {
	defer services.Wrap(&err, "catalog.ReissueRigCredential(%s)", id)
	err = s.pool.QueryRow(ctx, `
		UPDATE offerings SET rig_credential_issue = rig_credential_issue + 1, updated_at = $3
		WHERE id = $1 AND provider_account_id = $2 AND status <> 'delisted'
		RETURNING rig_credential_issue`,
		id, providerAccountID, s.now().UTC()).Scan(&issue)
	if isInvalidText(err) || errors.Is(err, pgx.ErrNoRows) {
		return 0, errNotFound
	}
	return issue, err
}

// RigCredentialIssue is the issue of the NATS credential an offering's rig holds now, whoever provides it: the
// platform's own lookup when a rig connects. A delisted offering's rig has none.
func (s *Service) RigCredentialIssue(ctx context.Context, id string) (providerAccountID string, issue int, err error) {
	defer services.Wrap(&err, "catalog.RigCredentialIssue(%s)", id)
	// By primary key: whoever reaches the rigs' entry point can make the platform look up a name.
	err = s.pool.QueryRow(ctx, `SELECT provider_account_id::text, rig_credential_issue FROM offerings
		WHERE id = $1 AND status <> 'delisted'`, id).Scan(&providerAccountID, &issue)
	if isInvalidText(err) || errors.Is(err, pgx.ErrNoRows) {
		return "", 0, errNotFound
	}
	return providerAccountID, issue, err
}

// Own returns one of the provider's own listed rigs, whatever its status but delisted.
func (s *Service) Own(ctx context.Context, providerAccountID, id string) (_ Offering, err error) {
	defer services.Wrap(&err, "catalog.Own(%s)", id)
	return s.one(ctx, `o.id = $1 AND o.provider_account_id = $2 AND o.status <> 'delisted'`, id, providerAccountID)
}

// ListOwn returns the provider's listed rigs, newest first.
func (s *Service) ListOwn(ctx context.Context, providerAccountID string) (_ []Offering, err error) {
	defer services.Wrap(&err, "catalog.ListOwn")
	rows, err := s.pool.Query(ctx, `SELECT `+offeringColumns+`
		FROM offerings o
		WHERE o.provider_account_id = $1 AND o.status <> 'delisted'
		ORDER BY o.created_at DESC, o.id`, providerAccountID)
	if err != nil {
		return nil, err
	}
	return s.collectOfferings(ctx, rows)
}

func isInvalidText(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02"
}

// SeedInput is a listing for demo data, with the figures the platform measured of it when MeasuredRequests is
// above zero. The demo lists its rigs with their claims only (the benchmark run each one copies): what the
// platform measures of them comes from their traffic (MeasureSeeded).
type SeedInput struct {
	Listing           ListingInput
	MeasuredRequests  int64
	MeasuredTTFTP50Ms float64
	MeasuredTTFTP99Ms float64
	MeasuredTPS       float64
	Source            string
}

// EnsureSeeded lists the offering under seedKey unless it exists; running it twice changes
// nothing. Its tier follows the measured P99, or the claimed one when nothing was measured, and the listing is
// checked as Create checks one. Its rig is pending, as any new listing's: under `gpumarket dev` the demo's
// simulated rigs qualify by the platform's probes.
func (s *Service) EnsureSeeded(ctx context.Context, providerAccountID, seedKey string, in SeedInput) (_ Offering, err error) {
	defer services.Wrap(&err, "catalog.EnsureSeeded(%s)", seedKey)
	var measuredP50, measuredP99, measuredTPS *float64
	tier := TierBatch
	switch {
	case in.MeasuredRequests > 0:
		measuredP50, measuredP99, measuredTPS = &in.MeasuredTTFTP50Ms, &in.MeasuredTTFTP99Ms, &in.MeasuredTPS
		tier = TierForP99(in.MeasuredTTFTP99Ms)
	case in.Listing.ClaimedTTFTP99Ms != nil:
		tier = TierForP99(*in.Listing.ClaimedTTFTP99Ms)
	}
	if err := s.check(ctx, &in.Listing, tier); err != nil {
		return Offering{}, err
	}
	now := s.now().UTC()
	l := in.Listing
	_, err = s.pool.Exec(ctx, `
		INSERT INTO offerings (provider_account_id, gpu, gpu_count, region, model,
			ask_input_micro_usd_per_mtok, ask_output_micro_usd_per_mtok,
			claimed_ttft_p50_ms, claimed_ttft_p99_ms, claimed_tokens_per_sec,
			measured_requests, measured_ttft_p50_ms, measured_ttft_p99_ms, measured_tokens_per_sec,
			tier, status, source, seed_key, created_at, updated_at, site, pue, rig_state, rig_state_since)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 'active', $16, $17, $18, $18,
			$19, $20, 'pending', $18)
		ON CONFLICT (seed_key) DO NOTHING`,
		providerAccountID, l.GPU, l.GPUCount, l.Region, l.Model, int64(l.AskInput), int64(l.AskOutput),
		l.ClaimedTTFTP50Ms, l.ClaimedTTFTP99Ms, l.ClaimedTokensPerSec,
		in.MeasuredRequests, measuredP50, measuredP99, measuredTPS,
		string(tier), in.Source, seedKey, now, string(l.Site), l.PUE)
	if err != nil {
		return Offering{}, err
	}
	return s.one(ctx, `o.seed_key = $1`, seedKey)
}

// MeasureSeeded writes the figures the platform measured of a seeded offering's traffic, as routing writes its
// live ones (measured_*), and leaves its tier: the demo's history measures the rigs it served this way
// (docs/demo-history.md). It reports whether the offering is one the seed listed and not delisted.
func (s *Service) MeasureSeeded(ctx context.Context, offeringID string, requests int64, p50Ms, p99Ms, tokensPerSec float64) (_ bool, err error) {
	defer services.Wrap(&err, "catalog.MeasureSeeded(%s)", offeringID)
	var tps *float64
	if tokensPerSec > 0 {
		tps = &tokensPerSec
	}
	tag, err := s.pool.Exec(ctx, `UPDATE offerings SET measured_requests = $2, measured_ttft_p50_ms = $3,
			measured_ttft_p99_ms = $4, measured_tokens_per_sec = coalesce($5, measured_tokens_per_sec)
		WHERE id = $1 AND seed_key IS NOT NULL AND status <> 'delisted'`, offeringID, requests, p50Ms, p99Ms, tps)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// PauseSeeded pauses the active offering listed under seedKey, if there is one, and reports
// whether it did: seed data that should no longer take traffic leaves the catalog and routing,
// its history kept.
func (s *Service) PauseSeeded(ctx context.Context, seedKey string) (paused bool, err error) {
	defer services.Wrap(&err, "catalog.PauseSeeded(%s)", seedKey)
	tag, err := s.pool.Exec(ctx, `UPDATE offerings SET status = 'paused', updated_at = $2
		WHERE seed_key = $1 AND status = 'active'`, seedKey, s.now().UTC())
	return err == nil && tag.RowsAffected() == 1, err
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
