package requestlog

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/admission"
)

// Loaded records read back as the gateway's own: what NewestByOffering sees of them, and the durations of an
// account's attempts within a window.
func TestCopyRecords(t *testing.T) {
	dbtest.SkipShort(t)
	pool := dbtest.New(t)
	ctx := context.Background()
	customer := newOrg(t, pool, "Customer 0")
	rows := newAttemptRows(t, pool, customer)
	offering := newOffering(t, pool, newOrg(t, pool, "Provider 0"))
	record := func(id string, at time.Time, usage *admission.TokenCount, ttft, took time.Duration) GatewayRequest {
		return GatewayRequest{RequestID: id, AccountID: customer, APIKeyID: rows.key, OfferingID: offering, Tier: "standard",
			Model: "m", HTTPStatus: 200, Status: GatewayOK, Usage: usage, TTFT: ttft, Duration: took, At: at,
			InputBytes: 400, MaxInputTokens: 100, MaxOutputTokens: 64, Streamed: true, RelayedOutputBytes: 80, RelayedOutputChunks: 20}
	}
	records := []GatewayRequest{
		record("req_1", testNow, &admission.TokenCount{Input: 100, Output: 20}, 120*time.Millisecond, 850*time.Millisecond),
		record("req_2", testNow.Add(time.Second), nil, 0, 1500*time.Microsecond),
		record("req_3", testNow.Add(time.Minute), &admission.TokenCount{Input: 100, Output: 20}, 0, time.Second),
	}
	n, err := CopyRecords(ctx, pool, slices.Values(records))
	if err != nil || n != 3 {
		t.Fatalf("CopyRecords: %d, %v", n, err)
	}
	newest, err := NewestByOffering(ctx, pool, []string{rows.key}, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := newest[offering]
	if len(got) != 3 || got[2].RequestID != "req_1" || got[2].TTFT != 120*time.Millisecond || got[2].Usage == nil ||
		got[2].Usage.Output != 20 || got[1].Usage != nil || got[1].TTFT != 0 || !got[1].Streamed {
		t.Fatalf("NewestByOffering: %+v", got)
	}
	durations, err := DurationsOfAccount(ctx, pool, customer, testNow, testNow.Add(time.Minute))
	if err != nil || len(durations) != 2 || durations["req_1"] != 850 || durations["req_2"] != 1.5 {
		t.Fatalf("DurationsOfAccount: %v, %v", durations, err)
	}
}
