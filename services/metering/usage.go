package metering

// The read side of usage: what a customer's requests cost and what a provider's rigs earned,
// as the usage pages, the API and the CSV export show them. Every query is scoped to one
// account, the customer's (usage_events.account_id) or the provider's
// (provider_account_id): no filter value can widen it. Money is read from NUMERIC exactly,
// never through a float: one request's charge as a money.Pico (the meter computes it as one),
// every sum as a money.BigPico, which holds any sum however large.

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// Page sizes of the request list.
const (
	DefaultUsageLimit = 50
	MaxUsageLimit     = 500
)

// exportChunk is how many requests ExportCSV reads per query: the connection goes back to
// the pool between chunks, not held while a slow client downloads.
const exportChunk = MaxUsageLimit

// Reports reads usage for the usage pages, the API and exports.
type Reports struct {
	pool *pgxpool.Pool
}

// NewReports returns the usage reports over the platform's database.
func NewReports(pool *pgxpool.Pool) *Reports { return &Reports{pool: pool} }

// UsageFilter selects usage. Zero values filter nothing.
type UsageFilter struct {
	// From and To bound the time a request finished: From <= time < To. Both are whole hours,
	// so that the hourly totals and the requests they sum cover the same requests.
	From, To time.Time
	Model    string
	Tier     catalog.Tier
	// Limit and Before page the request list (Requests): at most Limit rows (0 means
	// DefaultUsageLimit), older than the cursor a previous page returned as Next.
	Limit  int
	Before UsageCursor
}

// Validate checks the filter and names every bad field.
func (f UsageFilter) Validate() error {
	fe := services.FieldErrors{}
	if !f.From.IsZero() && !f.From.Equal(f.From.Truncate(time.Hour)) {
		fe.Add("from", "Start on a whole hour: totals are kept per hour.")
	}
	if !f.To.IsZero() && !f.To.Equal(f.To.Truncate(time.Hour)) {
		fe.Add("to", "End on a whole hour: totals are kept per hour.")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		fe.Add("to", "End after the start.")
	}
	if f.Tier != "" && !f.Tier.Valid() {
		fe.Add("tier", "Choose realtime, standard or batch.")
	}
	if f.Limit < 0 || f.Limit > MaxUsageLimit {
		fe.Add("limit", fmt.Sprintf("Ask for 1 to %d requests a page.", MaxUsageLimit))
	}
	if _, _, err := f.Before.decode(); err != nil {
		fe.Add("before", "This page link is not valid; start again from the first page.")
	}
	return fe.Err()
}

// where adds the filter's conditions, on the table aliased t with its time column, to
// conds and args.
func (f UsageFilter) where(conds []string, args []any, t, timeColumn string) ([]string, []any) {
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if !f.From.IsZero() {
		add(t+"."+timeColumn+" >= $%d", f.From)
	}
	if !f.To.IsZero() {
		add(t+"."+timeColumn+" < $%d", f.To)
	}
	if f.Model != "" {
		add(t+".model = $%d", f.Model)
	}
	if f.Tier != "" {
		add(t+".tier = $%d", string(f.Tier))
	}
	return conds, args
}

// UsageCursor marks where a page of requests ended: opaque to callers, "" for the first page.
type UsageCursor string

func newUsageCursor(at time.Time, requestID string) UsageCursor {
	raw := strconv.FormatInt(at.UnixMicro(), 10) + "|" + requestID
	return UsageCursor(base64.RawURLEncoding.EncodeToString([]byte(raw)))
}

func (c UsageCursor) decode() (time.Time, string, error) {
	if c == "" {
		return time.Time{}, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(c))
	if err != nil {
		return time.Time{}, "", err
	}
	micros, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || id == "" {
		return time.Time{}, "", fmt.Errorf("malformed usage cursor")
	}
	return time.UnixMicro(n).UTC(), id, nil
}

// RequestRecord is one metered request as its customer sees it.
type RequestRecord struct {
	OccurredAt  time.Time    `json:"occurred_at"`
	RequestID   string       `json:"request_id"`
	Model       string       `json:"model"`
	Tier        catalog.Tier `json:"tier"`
	OfferingID  string       `json:"offering_id"`
	Provider    string       `json:"provider"`
	GPU         string       `json:"gpu"`      // SKU, "rtx-4090"
	GPUName     string       `json:"gpu_name"` // "NVIDIA GeForce RTX 4090"
	GPUCount    int          `json:"gpu_count"`
	InputTokens int64        `json:"input_tokens"`
	// CachedInputTokens are the input tokens billed at the cached input price, a part of
	// InputTokens (docs/metering-integrity.md, "Cached input tokens").
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	// TTFTMillis is the time to the first token of a streamed request; null for a request answered
	// whole (its first byte comes with its last) or that produced no output.
	TTFTMillis     *float64     `json:"ttft_ms"`
	DurationMillis float64      `json:"duration_ms"`
	Cost           money.Pico   `json:"cost_pico"`
	CostUSD        string       `json:"cost_usd"` // exact decimal dollars
	Status         usage.Status `json:"status"`
	// EnergyJoules is the energy the rig measured or estimated for the request (EnergySource
	// says which); GCO2e its location-based emissions at the rig's region and PUE, by the
	// method of services/carbon (docs/methodology.md).
	EnergyJoules float64            `json:"energy_j"`
	EnergySource usage.EnergySource `json:"energy_source"`
	Region       string             `json:"region"`
	GCO2e        float64            `json:"gco2e"`
	// BaselineCost is what the request's charged tokens would have cost at the realtime price of its model
	// in force when it finished (its own row, else the tier's default): nothing for a request charged nothing, its own charge
	// on the realtime tier (the savings report's baseline, docs/methodology.md).
	BaselineCost    money.BigPico `json:"baseline_cost"`
	BaselineCostUSD string        `json:"baseline_cost_usd"`
	// BatchID is the batch whose line the request served, "" for a request of the API's
	// own (services.BatchOfRequest).
	BatchID string `json:"batch_id,omitempty"`
}

// RequestPage is one page of requests, newest first.
type RequestPage struct {
	Requests []RequestRecord `json:"requests"`
	// Next continues the list as the next filter's Before; "" on the last page.
	Next UsageCursor `json:"next,omitempty"`
}

// Requests lists the account's requests that match the filter, newest first.
func (r *Reports) Requests(ctx context.Context, accountID string, f UsageFilter) (_ RequestPage, err error) {
	defer services.Wrap(&err, "metering.Reports.Requests")
	if err := f.Validate(); err != nil {
		return RequestPage{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultUsageLimit
	}
	conds, args := f.where([]string{"u.account_id = $1"}, []any{accountID}, "u", "occurred_at")
	if at, id, _ := f.Before.decode(); id != "" {
		args = append(args, at, id)
		conds = append(conds, fmt.Sprintf("(u.occurred_at, u.request_id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	args = append(args, limit+1)
	rows, err := r.pool.Query(ctx, `
		SELECT u.occurred_at, u.request_id, u.model, u.tier, u.offering_id, u.input_tokens, u.cached_input_tokens,
			u.output_tokens, u.ttft_ms, u.duration_ms, u.charge_pico, u.status, u.energy_j, u.energy_source
		FROM usage_events u
		WHERE `+strings.Join(conds, " AND ")+`
		ORDER BY u.occurred_at DESC, u.request_id DESC
		LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return RequestPage{}, err
	}
	list, err := pgx.CollectRows(rows, scanRequestRecord)
	if err != nil {
		return RequestPage{}, err
	}
	if err := r.describeRequests(ctx, list); err != nil {
		return RequestPage{}, err
	}
	page := RequestPage{Requests: list}
	if len(list) > limit {
		page.Requests = list[:limit]
		last := page.Requests[limit-1]
		page.Next = newUsageCursor(last.OccurredAt, last.RequestID)
	}
	return page, nil
}

func scanRequestRecord(row pgx.CollectableRow) (RequestRecord, error) {
	var rec RequestRecord
	var charge int64 // one request's charge fits: the meter computes it as a Pico
	err := row.Scan(&rec.OccurredAt, &rec.RequestID, &rec.Model, &rec.Tier, &rec.OfferingID, &rec.InputTokens,
		&rec.CachedInputTokens, &rec.OutputTokens, &rec.TTFTMillis, &rec.DurationMillis, &charge, &rec.Status,
		&rec.EnergyJoules, &rec.EnergySource)
	rec.OccurredAt = rec.OccurredAt.UTC()
	rec.BatchID, _ = services.BatchOfRequest(rec.RequestID)
	rec.Cost, rec.CostUSD = money.Pico(charge), usdText(money.Pico(charge))
	return rec, err
}

// describeRequests completes the records with what the catalog and the accounts hold of them, read after the
// usage rows: the rig that served each (catalog.RigsByID), its provider's name (accounts.NamesByID), its emissions
// at the rig's region and PUE, and its baseline cost at the realtime price in force when it finished
// (catalog.ReadPriceBook). A usage row names an offering and a provider that are never deleted.
func (r *Reports) describeRequests(ctx context.Context, list []RequestRecord) error {
	if len(list) == 0 {
		return nil
	}
	offerings := make([]string, len(list))
	for i := range list {
		offerings[i] = list[i].OfferingID
	}
	rigs, err := catalog.RigsByID(ctx, r.pool, offerings)
	if err != nil {
		return err
	}
	providers := make([]string, 0, len(rigs))
	for _, rig := range rigs {
		providers = append(providers, rig.ProviderAccountID)
	}
	names, err := accounts.NamesByID(ctx, r.pool, providers)
	if err != nil {
		return err
	}
	book, err := catalog.ReadPriceBook(ctx, r.pool)
	if err != nil {
		return err
	}
	for i := range list {
		rec := &list[i]
		rig := rigs[rec.OfferingID]
		rec.Provider, rec.GPU, rec.GPUCount, rec.Region = names[rig.ProviderAccountID], rig.GPU, rig.GPUCount, rig.Region
		if g, ok := catalog.GPUBySKU(rec.GPU); ok {
			rec.GPUName = g.Name
		} else {
			rec.GPUName = rec.GPU
		}
		rec.GCO2e = requestGCO2e(rec.EnergyJoules, rec.Region, string(rig.Site), rig.StatedPUE)
		rec.BaselineCost = baselineCost(book, *rec)
		rec.BaselineCostUSD = bigUSDText(rec.BaselineCost)
	}
	return nil
}

// baselineCost is what the request's charged tokens would have cost at the realtime price of its model in force
// when it finished (RequestRecord.BaselineCost): nothing for a request charged nothing, its own charge on the
// realtime tier or without a realtime price in force.
func baselineCost(book catalog.PriceBook, rec RequestRecord) money.BigPico {
	if rec.Cost == 0 {
		return money.BigPico{}
	}
	rt, ok := book.At(catalog.TierRealtime, rec.Model, rec.OccurredAt)
	if rec.Tier == catalog.TierRealtime || !ok {
		return money.BigPicoOf(rec.Cost)
	}
	tokens := func(n int64, price money.MicroUSD) *big.Int {
		return new(big.Int).Mul(big.NewInt(n), big.NewInt(int64(price)))
	}
	sum := tokens(rec.InputTokens-rec.CachedInputTokens, rt.Input)
	sum.Add(sum, tokens(rec.CachedInputTokens, rt.CachedInput))
	sum.Add(sum, tokens(rec.OutputTokens, rt.Output))
	var b money.BigPico
	_ = b.Scan(sum.String()) // a micro-dollar per million tokens is a picodollar per token
	return b
}

// requestGCO2e is a request's location-based emissions: its energy at its rig's region's grid
// (the world average for a region not listed) and PUE.
func requestGCO2e(joules float64, region, site string, statedPUE *float64) float64 {
	r, _ := carbon.Grid(region)
	pue, _ := carbon.PUE(carbon.Site(site), statedPUE)
	return carbon.GCO2e(joules, float64(r.GCO2ePerKWh), pue)
}

// usdText writes an amount as exact decimal dollars without the sign: "0.000042", "12.50".
func usdText(p money.Pico) string { return strings.TrimPrefix(p.String(), "$") }

// bigUSDText is usdText of a sum.
func bigUSDText(p money.BigPico) string { return strings.TrimPrefix(p.String(), "$") }

// UsageSum adds up requests.
type UsageSum struct {
	Requests          int64         `json:"requests"`
	InputTokens       int64         `json:"input_tokens"`
	CachedInputTokens int64         `json:"cached_input_tokens"` // of InputTokens
	OutputTokens      int64         `json:"output_tokens"`
	Cost              money.BigPico `json:"cost_pico"`
	CostUSD           string        `json:"cost_usd"`
}

func (s *UsageSum) add(o UsageSum) {
	s.Requests += o.Requests
	s.InputTokens += o.InputTokens
	s.CachedInputTokens += o.CachedInputTokens
	s.OutputTokens += o.OutputTokens
	s.Cost = s.Cost.Add(o.Cost)
	s.CostUSD = bigUSDText(s.Cost)
}

// DailyTotal is what an account's requests of one tier came to on one day.
type DailyTotal struct {
	Day  string       `json:"day"` // the UTC date, 2006-01-02
	Tier catalog.Tier `json:"tier"`
	UsageSum
}

// UsageTotals are an account's totals per day and tier, newest day first, and their sum.
type UsageTotals struct {
	Days  []DailyTotal `json:"days"`
	Total UsageSum     `json:"total"`
}

// DailyTotals sums the account's usage that matches the filter per UTC day and tier, from
// the hourly rollups. Limit and Before, which page requests, do not apply.
func (r *Reports) DailyTotals(ctx context.Context, accountID string, f UsageFilter) (_ UsageTotals, err error) {
	defer services.Wrap(&err, "metering.Reports.DailyTotals")
	if err := f.Validate(); err != nil {
		return UsageTotals{}, err
	}
	conds, args := f.where([]string{"h.account_id = $1"}, []any{accountID}, "h", "hour")
	rows, err := r.pool.Query(ctx, `
		SELECT to_char(h.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, h.tier,
			sum(h.requests)::bigint, sum(h.input_tokens)::bigint, sum(h.cached_input_tokens)::bigint,
			sum(h.output_tokens)::bigint, sum(h.charge_pico)
		FROM usage_hourly h
		WHERE `+strings.Join(conds, " AND ")+`
		GROUP BY day, h.tier
		ORDER BY day DESC, array_position(ARRAY['realtime', 'standard', 'batch'], h.tier), h.tier`, args...)
	if err != nil {
		return UsageTotals{}, err
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DailyTotal, error) {
		var d DailyTotal
		err := row.Scan(&d.Day, &d.Tier, &d.Requests, &d.InputTokens, &d.CachedInputTokens, &d.OutputTokens, &d.Cost)
		d.CostUSD = bigUSDText(d.Cost)
		return d, err
	})
	if err != nil {
		return UsageTotals{}, err
	}
	out := UsageTotals{Days: days, Total: UsageSum{CostUSD: usdText(0)}}
	for _, d := range days {
		out.Total.add(d.UsageSum)
	}
	return out, nil
}

// csvHeader names the columns of ExportCSV. Columns added later go at the end, so that a
// reader that counts columns keeps reading the ones it knew.
var csvHeader = []string{"occurred_at", "request_id", "model", "tier", "provider", "offering_id", "gpu", "gpu_count",
	"input_tokens", "output_tokens", "ttft_ms", "duration_ms", "status", "cost_usd", "batch_id", "cached_input_tokens"}

// ExportCSV writes every request of the account that matches the filter to w as CSV, newest
// first, with a header line. cost_usd is exact: dollars with twelve decimals, the
// picodollar. Limit and Before do not apply: the export is the whole selection, read in
// chunks so that its size bounds neither memory nor how long a connection is held.
func (r *Reports) ExportCSV(ctx context.Context, accountID string, f UsageFilter, w io.Writer) (err error) {
	defer services.Wrap(&err, "metering.Reports.ExportCSV")
	f.Limit, f.Before = exportChunk, ""
	if err := f.Validate(); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for {
		page, err := r.Requests(ctx, accountID, f)
		if err != nil {
			return err
		}
		for _, rec := range page.Requests {
			if err := cw.Write(csvRecord(rec)); err != nil {
				return err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		if page.Next == "" {
			return nil
		}
		f.Before = page.Next
	}
}

func csvRecord(rec RequestRecord) []string {
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	ttft := "" // empty: not streamed, or no output
	if rec.TTFTMillis != nil {
		ttft = ms(*rec.TTFTMillis)
	}
	return []string{
		rec.OccurredAt.Format(time.RFC3339Nano), rec.RequestID, services.CSVText(rec.Model), string(rec.Tier), services.CSVText(rec.Provider),
		rec.OfferingID, rec.GPU, strconv.Itoa(rec.GPUCount), strconv.FormatInt(rec.InputTokens, 10),
		strconv.FormatInt(rec.OutputTokens, 10), ttft, ms(rec.DurationMillis), string(rec.Status),
		rec.Cost.Decimal(12), rec.BatchID, strconv.FormatInt(rec.CachedInputTokens, 10),
	}
}

// TrafficSum adds up what a provider's rigs served and earned.
type TrafficSum struct {
	Requests          int64         `json:"requests"`
	InputTokens       int64         `json:"input_tokens"`
	CachedInputTokens int64         `json:"cached_input_tokens"` // of InputTokens
	OutputTokens      int64         `json:"output_tokens"`
	Earned            money.BigPico `json:"earned_pico"` // payable to the provider: its asks, not the customer's price
	EarnedUSD         string        `json:"earned_usd"`
}

func (s *TrafficSum) add(o TrafficSum) {
	s.Requests += o.Requests
	s.InputTokens += o.InputTokens
	s.CachedInputTokens += o.CachedInputTokens
	s.OutputTokens += o.OutputTokens
	s.Earned = s.Earned.Add(o.Earned)
	s.EarnedUSD = bigUSDText(s.Earned)
}

// OfferingDay is what one offering served and earned on one UTC day.
type OfferingDay struct {
	Day        string `json:"day"` // 2006-01-02
	OfferingID string `json:"offering_id"`
	GPU        string `json:"gpu"`
	GPUName    string `json:"gpu_name"`
	GPUCount   int    `json:"gpu_count"`
	Model      string `json:"model"`
	TrafficSum
}

// Traffic is a provider's traffic per offering and day, newest day first, and its sum.
type Traffic struct {
	Days  []OfferingDay `json:"days"`
	Total TrafficSum    `json:"total"`
}

// ProviderTraffic sums, per offering and UTC day, the requests the provider's rigs served
// that match the filter and what the provider earned for them, from the hourly rollups.
// Limit and Before do not apply.
func (r *Reports) ProviderTraffic(ctx context.Context, providerAccountID string, f UsageFilter) (_ Traffic, err error) {
	defer services.Wrap(&err, "metering.Reports.ProviderTraffic")
	if err := f.Validate(); err != nil {
		return Traffic{}, err
	}
	conds, args := f.where([]string{"h.provider_account_id = $1"}, []any{providerAccountID}, "h", "hour")
	rows, err := r.pool.Query(ctx, `
		SELECT to_char(h.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, h.offering_id,
			sum(h.requests)::bigint, sum(h.input_tokens)::bigint, sum(h.cached_input_tokens)::bigint,
			sum(h.output_tokens)::bigint, sum(h.payable_pico)
		FROM usage_hourly h
		WHERE `+strings.Join(conds, " AND ")+`
		GROUP BY day, h.offering_id`, args...)
	if err != nil {
		return Traffic{}, err
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OfferingDay, error) {
		var d OfferingDay
		err := row.Scan(&d.Day, &d.OfferingID, &d.Requests, &d.InputTokens, &d.CachedInputTokens, &d.OutputTokens, &d.Earned)
		d.EarnedUSD = bigUSDText(d.Earned)
		return d, err
	})
	if err != nil {
		return Traffic{}, err
	}
	// The rigs are the catalog's, looked up after the sums; the days are then ordered by them.
	ids := make([]string, len(days))
	for i := range days {
		ids[i] = days[i].OfferingID
	}
	rigs, err := catalog.RigsByID(ctx, r.pool, ids)
	if err != nil {
		return Traffic{}, err
	}
	for i := range days {
		d := &days[i]
		rig := rigs[d.OfferingID]
		d.GPU, d.GPUCount, d.Model = rig.GPU, rig.GPUCount, rig.Model
		d.GPUName = d.GPU
		if g, ok := catalog.GPUBySKU(d.GPU); ok {
			d.GPUName = g.Name
		}
	}
	sort.Slice(days, func(i, j int) bool {
		a, b := days[i], days[j]
		switch {
		case a.Day != b.Day:
			return a.Day > b.Day
		case a.Model != b.Model:
			return a.Model < b.Model
		case a.GPU != b.GPU:
			return a.GPU < b.GPU
		case a.GPUCount != b.GPUCount:
			return a.GPUCount < b.GPUCount
		}
		return a.OfferingID < b.OfferingID
	})
	out := Traffic{Days: days, Total: TrafficSum{EarnedUSD: usdText(0)}}
	for _, d := range days {
		out.Total.add(d.TrafficSum)
	}
	return out, nil
}
