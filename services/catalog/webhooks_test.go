package catalog

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/webhooks/webhookstest"
)

// A listed rig that goes offline is sent to its provider's webhooks once, from the update that
// marks it; a second pass that finds it offline already sends nothing.
func TestRigOfflineIsSentToTheProvidersWebhooks(t *testing.T) {
	dbtest.SkipShort(t)
	ctx := context.Background()
	pool := dbtest.New(t)
	hooks := webhookstest.New(t, pool)
	s := NewService(pool, Config{Events: hooks.Service})
	provider := fixtures.Account(t, pool, "Fjord GPU Co-op")
	other := fixtures.Account(t, pool, "Northwind Compute")
	hooks.Subscribe(t, provider)
	hooks.Subscribe(t, other)
	offering := fixtures.Offering(t, pool, provider, fixtures.WithModel("meta-llama/Llama-3.1-8B-Instruct"))
	if err := s.MarkQualified(ctx, offering); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	ids, err := s.MarkOffline(ctx, later.Add(-OfflineAfter), later)
	if err != nil || len(ids) != 1 || ids[0] != offering {
		t.Fatalf("MarkOffline: %v, %v; want the offering", ids, err)
	}
	if ids, err := s.MarkOffline(ctx, later.Add(-OfflineAfter), later.Add(time.Minute)); err != nil || len(ids) != 0 {
		t.Fatalf("MarkOffline again: %v, %v; want nothing", ids, err)
	}
	got := hooks.Events(t)
	if len(got) != 1 || got[0].Type != EventRigOffline {
		t.Fatalf("events %+v: want one rig.offline, to its provider only", got)
	}
	var data struct {
		OfferingID      string     `json:"offering_id"`
		Model           string     `json:"model"`
		RigState        string     `json:"rig_state"`
		OfflineSince    time.Time  `json:"offline_since"`
		LastHeartbeatAt *time.Time `json:"last_heartbeat_at"`
	}
	if err := json.Unmarshal(got[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.OfferingID != offering || data.Model != "meta-llama/Llama-3.1-8B-Instruct" || data.RigState != "offline" ||
		!data.OfflineSince.Equal(later) || data.LastHeartbeatAt != nil {
		t.Fatalf("data %+v: want the offering, its model and when it went offline", data)
	}
}
