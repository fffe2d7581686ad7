package metering

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

const (
	reportQwen  = "Qwen/Qwen2.5-7B-Instruct"
	reportLlama = "meta-llama/Llama-3.1-8B-Instruct"
)

// reportDay is the first day of the reports' test traffic.
var reportDay = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// reportFixture is what a reports test reads from: two customers and two providers on a
// fresh database, each provider with a rig, and usage written the way the meter writes it
// (a usage row and its hourly rollup).
type reportFixture struct {
	reports  *Reports
	pool     *pgxpool.Pool
	acme     string // the customer whose usage the tests read
	other    string // another customer, who must see none of acme's
	fjord    string // provider of rtx4090
	north    string // provider of h100
	rtx4090  string // 4x RTX 4090 serving Qwen, standard
	h100     string // 1x H100 PCIe serving Llama, realtime
	requests int    // a sequence for request ids
}

func newReportFixture(t *testing.T) *reportFixture {
	t.Helper()
	pool := dbtest.New(t)
	f := &reportFixture{reports: NewReports(pool), pool: pool}
	f.acme = f.account(t, "Acme Labs")
	f.other = f.account(t, "Other Labs")
	f.fjord = f.account(t, "=HYPERLINK(\"http://evil.example\") Fjord")
	f.north = f.account(t, "Northwind Compute")
	f.rtx4090 = f.offering(t, f.fjord, "rtx-4090", 4, reportQwen, catalog.TierStandard)
	f.h100 = f.offering(t, f.north, "h100-pcie", 1, reportLlama, catalog.TierRealtime)
	return f
}

func (f *reportFixture) account(t *testing.T, name string) string {
	t.Helper()
	return fixtures.Account(t, f.pool, name, fixtures.AccountCreatedAt(reportDay))
}

func (f *reportFixture) offering(t *testing.T, provider, gpu string, count int, model string, tier catalog.Tier) string {
	t.Helper()
	return fixtures.Offering(t, f.pool, provider, fixtures.WithGPU(gpu, count), fixtures.WithModel(model),
		fixtures.WithAsk(60000, 60000), fixtures.WithTier(string(tier)), fixtures.WithCreatedAt(reportDay))
}

// reportUse is one metered request to write.
type reportUse struct {
	at       time.Time
	customer string
	offering string
	tier     catalog.Tier
	in, out  int64
	charge   money.Pico
	payable  money.Pico
	status   usage.Status
}

// record writes a usage row and adds it to its hourly rollup, as the meter does, and returns
// the request id.
func (f *reportFixture) record(t *testing.T, u reportUse) string {
	t.Helper()
	ctx := context.Background()
	f.requests++
	id := "req_" + strconv.Itoa(f.requests)
	if u.status == "" {
		u.status = usage.StatusOK
	}
	var provider, model string
	if err := f.pool.QueryRow(ctx, `SELECT provider_account_id, model FROM offerings WHERE id = $1`, u.offering).
		Scan(&provider, &model); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `
		INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
			input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 41.5, 1234.25, 12.5, 'estimated', $10,
			100000, 200000, 60000, 60000, $11, $12, $13, $13, $14)`,
		"evt_"+id, id, u.customer, u.offering, provider, string(u.tier), model, u.in, u.out, string(u.status),
		int64(u.charge), int64(u.payable), u.at, f.requests); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
			provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
			uncharged_output_tokens, charge_pico, payable_pico, energy_j)
		SELECT $1::timestamptz, $2::uuid, $3::uuid, $4, $5, 0, 60000, 60000, $6::uuid, 1, $7::bigint, $8::bigint, u, u * $7::bigint,
			u * $8::bigint, $9::bigint, $10::bigint, 12.5
		FROM (SELECT CASE WHEN $9::bigint = 0 THEN 1 ELSE 0 END AS u) uncharged
		ON CONFLICT (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price) DO UPDATE SET
			requests = usage_hourly.requests + 1,
			input_tokens = usage_hourly.input_tokens + EXCLUDED.input_tokens,
			output_tokens = usage_hourly.output_tokens + EXCLUDED.output_tokens,
			uncharged_requests = usage_hourly.uncharged_requests + EXCLUDED.uncharged_requests,
			uncharged_input_tokens = usage_hourly.uncharged_input_tokens + EXCLUDED.uncharged_input_tokens,
			uncharged_output_tokens = usage_hourly.uncharged_output_tokens + EXCLUDED.uncharged_output_tokens,
			charge_pico = usage_hourly.charge_pico + EXCLUDED.charge_pico,
			payable_pico = usage_hourly.payable_pico + EXCLUDED.payable_pico,
			energy_j = usage_hourly.energy_j + EXCLUDED.energy_j`,
		u.at.Truncate(time.Hour), u.customer, u.offering, string(u.tier), model, provider, u.in, u.out,
		int64(u.charge), int64(u.payable)); err != nil {
		t.Fatal(err)
	}
	return id
}

// reportTraffic is the traffic most tests read: acme's five requests over three days, one
// of them with a charge no float64 holds exactly, and one request of the other customer.
type reportTraffic struct {
	*reportFixture
	ids []string // acme's requests in the order written (oldest first)
}

// bigCharge is 2^53+1 picodollars: a float64 would read it as 2^53.
const bigCharge = money.Pico(1<<53 + 1)

func newReportTraffic(t *testing.T) *reportTraffic {
	t.Helper()
	f := newReportFixture(t)
	r := &reportTraffic{reportFixture: f}
	day := reportDay
	for _, u := range []reportUse{
		{at: day.Add(9*time.Hour + 15*time.Minute), offering: f.rtx4090, tier: catalog.TierStandard, in: 1000, out: 500,
			charge: 200_000_000, payable: 90_000_000},
		{at: day.Add(24*time.Hour - 500*time.Millisecond), offering: f.h100, tier: catalog.TierRealtime, in: 20, out: 7,
			charge: 3_400_007, payable: 1_620_000},
		{at: day.Add(24 * time.Hour), offering: f.rtx4090, tier: catalog.TierStandard, in: 1, out: 1,
			charge: 300_000, payable: 120_000},
		{at: day.Add(34 * time.Hour), offering: f.rtx4090, tier: catalog.TierStandard, in: 12, out: 3,
			charge: bigCharge, payable: 900_001},
		{at: day.Add(50 * time.Hour), offering: f.h100, tier: catalog.TierRealtime, in: 30, out: 0,
			status: usage.StatusError},
	} {
		u.customer = f.acme
		r.ids = append(r.ids, f.record(t, u))
	}
	f.record(t, reportUse{at: day.Add(10 * time.Hour), customer: f.other, offering: f.rtx4090, tier: catalog.TierStandard,
		in: 5, out: 5, charge: 1_500_000, payable: 600_000})
	return r
}

func requestIDs(recs []RequestRecord) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.RequestID)
	}
	return out
}

func TestReportsRequests(t *testing.T) {
	t.Parallel()
	r := newReportTraffic(t)
	ctx := context.Background()
	ids := r.ids

	page, err := r.reports.Requests(ctx, r.acme, UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := requestIDs(page.Requests), []string{ids[4], ids[3], ids[2], ids[1], ids[0]}; !slices.Equal(got, want) {
		t.Fatalf("requests %v, want acme's five newest first %v", got, want)
	}
	if page.Next != "" {
		t.Errorf("next = %q on the only page", page.Next)
	}

	t.Run("each row says what, where and how much, exactly", func(t *testing.T) {
		big := page.Requests[1]
		want := RequestRecord{
			OccurredAt: reportDay.Add(34 * time.Hour), RequestID: ids[3], Model: reportQwen, Tier: catalog.TierStandard,
			OfferingID: r.rtx4090, Provider: "=HYPERLINK(\"http://evil.example\") Fjord", GPU: "rtx-4090",
			GPUName: "NVIDIA GeForce RTX 4090", GPUCount: 4, InputTokens: 12, OutputTokens: 3, TTFTMillis: big.TTFTMillis,
			DurationMillis: 1234.25, Cost: bigCharge, CostUSD: "9007.199254740993", Status: usage.StatusOK,
			// 12.5 J estimated at home in the EU-27 (242 g/kWh, PUE 1.0); with no realtime price
			// in this book, the request is its own baseline.
			EnergyJoules: 12.5, EnergySource: usage.EnergyEstimated, Region: "eu", GCO2e: 12.5 / 3.6e6 * 242,
			BaselineCost: money.BigPicoOf(bigCharge), BaselineCostUSD: "9007.199254740993",
		}
		if big != want || big.TTFTMillis == nil || *big.TTFTMillis != 41.5 {
			t.Errorf("row\n%+v, want\n%+v, 41.5 ms to the first token", big, want)
		}
		if failed := page.Requests[0]; failed.Status != usage.StatusError || failed.Cost != 0 || failed.CostUSD != "0.00" ||
			failed.GPUName != "NVIDIA H100 PCIe 80GB" || failed.Provider != "Northwind Compute" {
			t.Errorf("failed request %+v, want an error at no cost on Northwind's H100", failed)
		}
	})

	t.Run("filters", func(t *testing.T) {
		for name, tc := range map[string]struct {
			filter UsageFilter
			want   []string
		}{
			"tier":  {UsageFilter{Tier: catalog.TierRealtime}, []string{ids[4], ids[1]}},
			"model": {UsageFilter{Model: reportQwen}, []string{ids[3], ids[2], ids[0]}},
			"from is inclusive, to exclusive": {UsageFilter{From: reportDay.Add(9 * time.Hour), To: reportDay.Add(24 * time.Hour)},
				[]string{ids[1], ids[0]}},
			"one UTC day": {UsageFilter{From: reportDay.Add(24 * time.Hour), To: reportDay.Add(48 * time.Hour)},
				[]string{ids[3], ids[2]}},
			"all together": {UsageFilter{From: reportDay, To: reportDay.Add(72 * time.Hour), Model: reportQwen,
				Tier: catalog.TierStandard}, []string{ids[3], ids[2], ids[0]}},
			"nothing matches": {UsageFilter{Model: "no/such-model"}, nil},
		} {
			t.Run(name, func(t *testing.T) {
				page, err := r.reports.Requests(ctx, r.acme, tc.filter)
				if err != nil {
					t.Fatal(err)
				}
				if got := requestIDs(page.Requests); !slices.Equal(got, tc.want) {
					t.Errorf("requests %v, want %v", got, tc.want)
				}
			})
		}
	})

	t.Run("the cursor pages through every request once, ties broken by request id", func(t *testing.T) {
		// Two more requests in the same microsecond as another.
		tie := reportDay.Add(34 * time.Hour)
		extra := []string{
			r.record(t, reportUse{at: tie, customer: r.acme, offering: r.h100, tier: catalog.TierRealtime, in: 1, out: 1, charge: 7}),
			r.record(t, reportUse{at: tie, customer: r.acme, offering: r.h100, tier: catalog.TierRealtime, in: 1, out: 1, charge: 9}),
		}
		all, err := r.reports.Requests(ctx, r.acme, UsageFilter{Limit: MaxUsageLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.Requests) != 7 || !slices.Contains(requestIDs(all.Requests), extra[0]) {
			t.Fatalf("%d requests %v, want 7 with %v", len(all.Requests), requestIDs(all.Requests), extra)
		}
		var paged []string
		filter := UsageFilter{Limit: 2}
		for pages := 1; ; pages++ {
			page, err := r.reports.Requests(ctx, r.acme, filter)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, requestIDs(page.Requests)...)
			if page.Next == "" {
				if pages != 4 {
					t.Errorf("%d pages of 2 for 7 requests, want 4", pages)
				}
				break
			}
			if len(page.Requests) != 2 || pages > 4 {
				t.Fatalf("page %d holds %d requests and goes on", pages, len(page.Requests))
			}
			filter.Before = page.Next
		}
		if want := requestIDs(all.Requests); !slices.Equal(paged, want) {
			t.Errorf("paged %v, want %v", paged, want)
		}
	})

	t.Run("another account sees nothing of acme's", func(t *testing.T) {
		page, err := r.reports.Requests(ctx, r.other, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Requests) != 1 || page.Requests[0].Cost != 1_500_000 {
			t.Errorf("other's requests %+v, want its one request of $0.0000015", page.Requests)
		}
		// A provider's account is nobody's customer here, even for the rigs it runs.
		page, err = r.reports.Requests(ctx, r.fjord, UsageFilter{})
		if err != nil || len(page.Requests) != 0 {
			t.Errorf("the provider as a customer sees %d requests (%v), want none", len(page.Requests), err)
		}
		// A cursor taken from acme's list does not open acme's requests to another account.
		first, err := r.reports.Requests(ctx, r.acme, UsageFilter{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		page, err = r.reports.Requests(ctx, r.north, UsageFilter{Before: first.Next})
		if err != nil || len(page.Requests) != 0 {
			t.Errorf("with acme's cursor another account sees %d requests (%v), want none", len(page.Requests), err)
		}
	})
}

func TestReportsDailyTotals(t *testing.T) {
	t.Parallel()
	r := newReportTraffic(t)
	ctx := context.Background()

	totals, err := r.reports.DailyTotals(ctx, r.acme, UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sum := func(requests, in, out int64, cost money.Pico) UsageSum {
		return UsageSum{Requests: requests, InputTokens: in, OutputTokens: out, Cost: money.BigPicoOf(cost), CostUSD: usdText(cost)}
	}
	want := []DailyTotal{
		{Day: "2026-11-04", Tier: catalog.TierRealtime, UsageSum: sum(1, 30, 0, 0)},
		{Day: "2026-11-03", Tier: catalog.TierStandard, UsageSum: sum(2, 13, 4, bigCharge+300_000)},
		// The request half a second before midnight UTC counts on its own day.
		{Day: "2026-11-02", Tier: catalog.TierRealtime, UsageSum: sum(1, 20, 7, 3_400_007)},
		{Day: "2026-11-02", Tier: catalog.TierStandard, UsageSum: sum(1, 1000, 500, 200_000_000)},
	}
	if !slices.Equal(totals.Days, want) {
		t.Errorf("days\n%+v, want\n%+v", totals.Days, want)
	}
	wantTotal := sum(5, 1063, 511, bigCharge+300_000+3_400_007+200_000_000)
	if totals.Total != wantTotal || totals.Total.CostUSD != "9007.199458441" {
		t.Errorf("total %+v, want %+v", totals.Total, wantTotal)
	}

	t.Run("filtered like the requests", func(t *testing.T) {
		got, err := r.reports.DailyTotals(ctx, r.acme, UsageFilter{From: reportDay, To: reportDay.Add(24 * time.Hour),
			Tier: catalog.TierStandard})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Days, want[3:]) || got.Total != want[3].UsageSum {
			t.Errorf("standard on the first day: %+v, want %+v", got, want[3:])
		}
		got, err = r.reports.DailyTotals(ctx, r.acme, UsageFilter{Model: reportLlama})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Days, []DailyTotal{want[0], want[2]}) {
			t.Errorf("Llama: %+v, want %+v", got.Days, []DailyTotal{want[0], want[2]})
		}
	})

	t.Run("another account sees nothing of acme's", func(t *testing.T) {
		got, err := r.reports.DailyTotals(ctx, r.other, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Days) != 1 || got.Total != sum(1, 5, 5, 1_500_000) {
			t.Errorf("other's totals %+v, want its one request", got)
		}
		got, err = r.reports.DailyTotals(ctx, r.fjord, UsageFilter{})
		if err != nil || len(got.Days) != 0 || got.Total.Cost.Sign() != 0 || got.Total.CostUSD != "0.00" {
			t.Errorf("the provider as a customer: %+v (%v), want nothing", got, err)
		}
	})

	t.Run("a sum past the range of Pico is exact", func(t *testing.T) {
		f := newReportFixture(t)
		// Two days of $9.2 million and more each: each day's sum and the total pass int64.
		for _, h := range []time.Duration{0, time.Hour, 24 * time.Hour, 25 * time.Hour} {
			f.record(t, reportUse{at: reportDay.Add(h), customer: f.acme, offering: f.rtx4090, tier: catalog.TierStandard,
				in: 1, out: 1, charge: math.MaxInt64 / 2, payable: 1})
		}
		f.record(t, reportUse{at: reportDay.Add(2 * time.Hour), customer: f.acme, offering: f.rtx4090,
			tier: catalog.TierStandard, in: 1, out: 1, charge: 2, payable: 1})
		got, err := f.reports.DailyTotals(context.Background(), f.acme, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Days) != 2 || got.Days[1].CostUSD != "9223372.036854775808" || got.Days[0].CostUSD != "9223372.036854775806" ||
			got.Total.Cost.String() != "$18446744.073709551614" || got.Total.CostUSD != "18446744.073709551614" || got.Total.Requests != 5 {
			t.Errorf("totals %+v, want $9223372.036854775808 and $9223372.036854775806, $18446744.073709551614 in all", got)
		}
	})
}

func TestReportsExportCSV(t *testing.T) {
	t.Parallel()
	r := newReportTraffic(t)
	ctx := context.Background()

	read := func(t *testing.T, accountID string, f UsageFilter) [][]string {
		t.Helper()
		var buf bytes.Buffer
		if err := r.reports.ExportCSV(ctx, accountID, f, &buf); err != nil {
			t.Fatal(err)
		}
		records, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatalf("the export is not CSV: %v\n%s", err, buf.String())
		}
		if len(records) == 0 || !slices.Equal(records[0], csvHeader) {
			t.Fatalf("header %v, want %v", records[:min(1, len(records))], csvHeader)
		}
		return records[1:]
	}

	rows := read(t, r.acme, UsageFilter{Limit: 1}) // the export is every row whatever the page size
	if len(rows) != 5 {
		t.Fatalf("%d rows, want acme's 5", len(rows))
	}
	want := []string{"2026-11-03T10:00:00Z", r.ids[3], reportQwen, "standard", "'=HYPERLINK(\"http://evil.example\") Fjord",
		r.rtx4090, "rtx-4090", "4", "12", "3", "41.5", "1234.25", "ok", "9007.199254740993", "", "0"}
	if !slices.Equal(rows[1], want) {
		t.Errorf("row\n%q, want\n%q", rows[1], want)
	}
	var total money.Pico
	for _, row := range rows {
		p, err := money.ParseUSD(row[13])
		if err != nil {
			t.Fatal(err)
		}
		total += p
	}
	if want := bigCharge + 300_000 + 3_400_007 + 200_000_000; total != want {
		t.Errorf("the export's costs sum to %s, want %s", total, want)
	}

	t.Run("filtered", func(t *testing.T) {
		rows := read(t, r.acme, UsageFilter{Tier: catalog.TierRealtime, To: reportDay.Add(48 * time.Hour)})
		if len(rows) != 1 || rows[0][1] != r.ids[1] || rows[0][0] != "2026-11-02T23:59:59.5Z" || rows[0][13] != "0.000003400007" {
			t.Errorf("realtime before the 4th: %q, want the one request of $0.000003400007", rows)
		}
	})

	t.Run("another account exports only its own", func(t *testing.T) {
		rows := read(t, r.other, UsageFilter{})
		if len(rows) != 1 || slices.Contains(r.ids, rows[0][1]) {
			t.Errorf("other's export %q, want its one request", rows)
		}
		if rows := read(t, r.north, UsageFilter{}); len(rows) != 0 {
			t.Errorf("a provider's export as a customer: %q, want no rows", rows)
		}
	})

	t.Run("more rows than a chunk, each once and in order", func(t *testing.T) {
		f := newReportFixture(t)
		n := exportChunk*2 + 17
		if _, err := f.pool.Exec(ctx, `
			INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
				input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
				input_price, output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
			SELECT 'evt_' || i, 'req_' || lpad(i::text, 6, '0'), $1, $2, $3, 'standard', $4, i, 1, 10, 20, 1, 'estimated', 'ok',
				1, 1, 1, 1, i, i, $5::timestamptz + (i / 3) * interval '1 second', $5, i
			FROM generate_series(1, $6) AS i`, f.acme, f.rtx4090, f.fjord, reportQwen, reportDay, n); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := f.reports.ExportCSV(ctx, f.acme, UsageFilter{}, &buf); err != nil {
			t.Fatal(err)
		}
		records, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		rows := records[1:]
		if len(rows) != n {
			t.Fatalf("%d rows, want %d", len(rows), n)
		}
		var sum money.Pico
		for i, row := range rows {
			// Newest first: request n down to 1, each costing its number in picodollars.
			if wantID := "req_" + strings.Repeat("0", 6-len(strconv.Itoa(n-i))) + strconv.Itoa(n-i); row[1] != wantID {
				t.Fatalf("row %d is %s, want %s", i, row[1], wantID)
			}
			p, err := money.ParseUSD(row[13])
			if err != nil {
				t.Fatal(err)
			}
			sum += p
		}
		if want := money.Pico(n * (n + 1) / 2); sum != want {
			t.Errorf("costs sum to %d pico, want %d", sum, want)
		}
	})
}

func TestReportsProviderTraffic(t *testing.T) {
	t.Parallel()
	r := newReportTraffic(t)
	ctx := context.Background()

	traffic, err := r.reports.ProviderTraffic(ctx, r.fjord, UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	day := func(d string, requests, in, out int64, earned money.Pico) OfferingDay {
		return OfferingDay{Day: d, OfferingID: r.rtx4090, GPU: "rtx-4090", GPUName: "NVIDIA GeForce RTX 4090", GPUCount: 4,
			Model: reportQwen, TrafficSum: TrafficSum{Requests: requests, InputTokens: in, OutputTokens: out,
				Earned: money.BigPicoOf(earned), EarnedUSD: usdText(earned)}}
	}
	// Both customers' requests on Fjord's rig, the payable not the charge.
	want := []OfferingDay{
		day("2026-11-03", 2, 13, 4, 900_001+120_000),
		day("2026-11-02", 2, 1005, 505, 90_000_000+600_000),
	}
	if !slices.Equal(traffic.Days, want) {
		t.Errorf("Fjord's days\n%+v, want\n%+v", traffic.Days, want)
	}
	wantTotal := TrafficSum{Requests: 4, InputTokens: 1018, OutputTokens: 509, Earned: money.BigPicoOf(91_620_001), EarnedUSD: "0.000091620001"}
	if traffic.Total != wantTotal {
		t.Errorf("Fjord's total %+v, want %+v", traffic.Total, wantTotal)
	}

	t.Run("each provider sees only its own rigs", func(t *testing.T) {
		north, err := r.reports.ProviderTraffic(ctx, r.north, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(north.Days) != 2 || north.Total.Requests != 2 || !north.Total.Earned.Equal(1_620_000) {
			t.Errorf("Northwind's traffic %+v, want 2 requests earning $0.00000162", north)
		}
		for _, d := range north.Days {
			if d.OfferingID != r.h100 {
				t.Errorf("Northwind sees offering %s", d.OfferingID)
			}
		}
		// A customer's account is nobody's provider.
		got, err := r.reports.ProviderTraffic(ctx, r.acme, UsageFilter{})
		if err != nil || len(got.Days) != 0 || got.Total.Earned.Sign() != 0 {
			t.Errorf("the customer as a provider: %+v (%v), want nothing", got, err)
		}
	})

	t.Run("filtered by day", func(t *testing.T) {
		got, err := r.reports.ProviderTraffic(ctx, r.fjord, UsageFilter{From: reportDay.Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Days, want[:1]) || got.Total != want[0].TrafficSum {
			t.Errorf("from the 3rd: %+v, want %+v", got, want[:1])
		}
	})

	t.Run("earnings past the range of Pico are exact", func(t *testing.T) {
		f := newReportFixture(t)
		// Three requests each paying the provider $4 million: one day's rollup and the total
		// pass int64.
		for _, h := range []time.Duration{0, time.Hour, 2 * time.Hour} {
			f.record(t, reportUse{at: reportDay.Add(h), customer: f.acme, offering: f.rtx4090, tier: catalog.TierStandard,
				in: 1, out: 1, charge: 4_000_000 * money.PicoPerUSD, payable: 4_000_000 * money.PicoPerUSD})
		}
		got, err := f.reports.ProviderTraffic(ctx, f.fjord, UsageFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Days) != 1 || got.Days[0].EarnedUSD != "12000000.00" || got.Total.Earned.Decimal(2) != "12000000.00" ||
			got.Total.Requests != 3 {
			t.Errorf("traffic %+v, want $12,000,000.00 earned", got)
		}
	})
}

func TestUsageFilterValidate(t *testing.T) {
	t.Parallel()
	hour := reportDay.Add(5 * time.Hour)
	for name, tc := range map[string]struct {
		filter UsageFilter
		fields []string
	}{
		"empty":                  {UsageFilter{}, nil},
		"whole hours":            {UsageFilter{From: hour, To: hour.Add(time.Hour), Limit: MaxUsageLimit}, nil},
		"from inside an hour":    {UsageFilter{From: hour.Add(time.Minute)}, []string{"from"}},
		"to inside an hour":      {UsageFilter{To: hour.Add(time.Nanosecond)}, []string{"to"}},
		"to at from":             {UsageFilter{From: hour, To: hour}, []string{"to"}},
		"to before from":         {UsageFilter{From: hour, To: hour.Add(-time.Hour)}, []string{"to"}},
		"unknown tier":           {UsageFilter{Tier: "gold"}, []string{"tier"}},
		"negative limit":         {UsageFilter{Limit: -1}, []string{"limit"}},
		"limit past the maximum": {UsageFilter{Limit: MaxUsageLimit + 1}, []string{"limit"}},
		"cursor not base64":      {UsageFilter{Before: "!!"}, []string{"before"}},
		"cursor without a time":  {UsageFilter{Before: UsageCursor("eHx5")}, []string{"before"}}, // "x|y"
		"a cursor from a page":   {UsageFilter{Before: newUsageCursor(hour, "req_1")}, nil},
		"everything wrong at once": {UsageFilter{From: hour.Add(time.Second), Tier: "gold", Limit: -5, Before: "%"},
			[]string{"before", "from", "limit", "tier"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.filter.Validate()
			var got []string
			var ae *services.Error
			if errors.As(err, &ae) {
				for f := range ae.Fields {
					got = append(got, f)
				}
				if ae.Code != services.CodeInvalid {
					t.Errorf("code %s, want invalid", ae.Code)
				}
			} else if err != nil {
				t.Fatalf("error %v is not a *services.Error", err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Errorf("fields %v, want %v", got, tc.fields)
			}
		})
	}
}
