package metering

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestBulkUsage loads usage rows, rolls them up, reads them back and sums them, and copies them into scratch
// tables shaped like the usage tables: what the benchmarks seed and check with.
func TestBulkUsage(t *testing.T) {
	dbtest.SkipShort(t)
	pool := dbtest.New(t)
	ctx := context.Background()
	id := func() string {
		id, err := services.NewUUID()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	account, offering, provider := id(), id(), id()
	hour := time.Now().UTC().Truncate(time.Hour)
	ttft, reported := 40.0, int64(120)
	rows := []UsageRow{
		{EventID: "evt_1", RequestID: "req_1", AccountID: account, APIKeyID: "key", OfferingID: offering,
			ProviderAccountID: provider, Tier: "standard", Model: "m", InputTokens: 100, OutputTokens: 20,
			ReportedInputTokens: &reported, ReportedOutputTokens: &reported, TTFTMs: &ttft, DurationMs: 900, EnergyJ: 42,
			EnergySource: "measured", Status: "ok", PriceID: 1, InputPrice: 150000, OutputPrice: 300000,
			AskInputPrice: 60000, AskOutputPrice: 120000, Charge: 21_000_000, Payable: 8_400_000,
			OccurredAt: hour.Add(time.Minute), MeteredAt: hour.Add(time.Minute), StreamSeq: 1},
		{EventID: "evt_2", RequestID: "req_2", AccountID: account, OfferingID: offering, ProviderAccountID: provider,
			Tier: "standard", Model: "m", InputTokens: 50, OutputTokens: 10, DurationMs: 300, EnergyJ: 8,
			EnergySource: "estimated", Status: "ok", PriceID: 1, InputPrice: 150000, OutputPrice: 300000,
			AskInputPrice: 60000, AskOutputPrice: 120000, Charge: 10_500_000, Payable: 4_200_000,
			OccurredAt: hour.Add(2 * time.Minute), MeteredAt: hour.Add(2 * time.Minute), StreamSeq: 2},
	}
	if n, err := CopyUsage(ctx, pool, slices.Values(rows)); err != nil || n != 2 {
		t.Fatalf("CopyUsage: %d, %v", n, err)
	}
	if n, err := RollUpCopiedUsage(ctx, pool); err != nil || n != 1 {
		t.Fatalf("RollUpCopiedUsage: %d rollup rows, %v; want 1", n, err)
	}
	rolled, err := SumHourly(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if rolled.Rows != 1 || rolled.Requests != 2 || !rolled.Charge.Equal(31_500_000) || !rolled.Payable.Equal(12_600_000) {
		t.Fatalf("SumHourly: %+v", rolled)
	}
	stored, err := SumStored(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if stored != (StoredSums{UsageRows: 2, EventIDs: 2, RequestIDs: 2, Charge: money.BigPicoOf(31_500_000), Payable: money.BigPicoOf(12_600_000)}) {
		t.Fatalf("SumStored: %+v", stored)
	}
	read, err := ReadUsageRows(ctx, pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 2 || *read[0].TTFTMs != 40 || *read[0].ReportedInputTokens != 120 || read[1].TTFTMs != nil ||
		read[1].Flag != nil || read[0].Charge != 21_000_000 || !read[0].OccurredAt.Equal(rows[0].OccurredAt) {
		t.Fatalf("ReadUsageRows: %+v", read)
	}
	if later, err := ReadUsageRows(ctx, pool, 1); err != nil || len(later) != 1 || later[0].EventID != "evt_2" {
		t.Fatalf("ReadUsageRows after 1: %+v, %v", later, err)
	}

	// Loaded rows have no keys, so no duration is found by request until they do.
	if _, err := pool.Exec(ctx, `INSERT INTO usage_event_keys (event_id, request_id, occurred_at, stream_seq)
		VALUES ('evt_1', 'req_1', $1, 1)`, rows[0].OccurredAt); err != nil {
		t.Fatal(err)
	}
	durations, err := DurationsOfRequests(ctx, pool, []string{"req_1", "req_2", "req_3"})
	if err != nil || len(durations) != 1 || durations["req_1"] != 900 {
		t.Fatalf("DurationsOfRequests: %v, %v", durations, err)
	}

	tables, err := CreateUsageTablesLike(ctx, pool, "scratch_usage", "scratch_keys")
	if err != nil {
		t.Fatal(err)
	}
	if err := tables.Copy(ctx, pool, read); err != nil {
		t.Fatal(err)
	}
	var copied, keys int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM scratch_usage WHERE charge_pico = 21000000 OR ttft_ms IS NULL),
		(SELECT count(*) FROM scratch_keys)`).Scan(&copied, &keys); err != nil {
		t.Fatal(err)
	}
	if copied != 2 || keys != 2 {
		t.Fatalf("copied %d rows and %d keys; want 2 and 2", copied, keys)
	}
	if err := tables.Drop(ctx, pool); err != nil {
		t.Fatal(err)
	}

	if n, err := CopyHourly(ctx, pool, slices.Values([]HourlyRow{{Hour: hour.Add(-time.Hour), AccountID: account,
		OfferingID: offering, ProviderAccountID: provider, Tier: "standard", Model: "m", PriceID: 1, AskInputPrice: 60000,
		AskOutputPrice: 120000, Requests: 10, InputTokens: 1000, OutputTokens: 90, UnchargedRequests: 1,
		UnchargedInputTokens: 100, Charge: 5, Payable: 2, EnergyJ: 400}})); err != nil || n != 1 {
		t.Fatalf("CopyHourly: %d, %v", n, err)
	}
	if rolled, err = SumHourly(ctx, pool); err != nil || rolled.Rows != 2 || rolled.Requests != 12 || !rolled.Charge.Equal(31_500_005) {
		t.Fatalf("SumHourly after CopyHourly: %+v, %v", rolled, err)
	}
}
