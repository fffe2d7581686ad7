package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// TestAListingEarnsItsPlace (docs/listing-states.md), on a whole platform: a new rig, the only and cheapest of
// its model, is pending and never gets a customer's request (503 no_capacity), nor appears in the public catalog;
// once its agent runs, the platform's probes through the real path qualify it, and customers are served. A rig
// whose answer names another model stays pending and says why. A rig whose agent stops goes offline, leaves
// routing and the catalog, and comes back by its probes. The provider's rig page shows each state.
func TestAListingEarnsItsPlace(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	_, _, secret := b.developer(t, "earns", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)
	const model = "earn-model"
	o := b.listPending(t, model)
	state := func(want catalog.RigState) catalog.Offering {
		t.Helper()
		var got catalog.Offering
		b.eventually(t, "the rig is "+string(want), func() bool {
			var err error
			got, err = b.p.catalog.Own(b.ctx, b.provider, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.RigState == want
		})
		return got
	}
	public := func() bool {
		t.Helper()
		res, err := http.Get(b.p.URL() + "/api/offerings")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out struct {
			Offerings []struct {
				ID string `json:"id"`
			} `json:"offerings"`
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		page, err := http.Get(b.p.URL() + "/catalog")
		if err != nil {
			t.Fatal(err)
		}
		defer page.Body.Close()
		html, _ := io.ReadAll(page.Body)
		inAPI := slices.ContainsFunc(out.Offerings, func(x struct {
			ID string `json:"id"`
		}) bool {
			return x.ID == o.ID
		})
		if inPage := bytes.Contains(html, []byte(`data-offering-id="`+o.ID+`"`)); inPage != inAPI {
			t.Fatalf("the catalog page lists the rig: %v; the API: %v", inPage, inAPI)
		}
		return inAPI
	}
	refused := func(what string) {
		t.Helper()
		_, err := client.Chat.Completions.New(b.ctx, chatParams(model, 4))
		e := apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_capacity")
		if !strings.Contains(e.Message, "ready") {
			t.Errorf("%s: the customer is told %q; want that no rig is ready", what, e.Message)
		}
		if public() {
			t.Fatalf("%s: the rig is in the public catalog", what)
		}
	}
	rigPage := func(want string) {
		t.Helper()
		cell := connectPage(t, b.p, "provider@example.com", o.ID).Find(`[data-testid="rig-state"]`)
		if got := strings.TrimSpace(cell.Text()); !strings.HasPrefix(got, want) {
			t.Errorf("the rig's page says %q; want %q...", got, want)
		}
	}

	// Listed, its agent not running.
	rigPage("Pending: waiting for your agent to connect")
	refused("listed")

	// Its agent connects: it is probed, not routed, until three probes in a row pass.
	profile := simulation.Zero()
	profile.Model = model
	rig := b.runAgent(t, o, simulation.NewHandler(simulation.Options{Profile: profile}))
	b.eventually(t, "routing probes the rig", func() bool {
		return slices.ContainsFunc(b.p.router.ProbeTargets(), func(c routing.Candidate) bool { return c.OfferingID == o.ID && c.Qualifying })
	})
	refused("heartbeating, not yet qualified")
	got := state(catalog.RigActive)
	if got.RigProbePasses != catalog.ProbesToQualify || got.RigProbeTTFTMs == nil || *got.RigProbeTTFTMs <= 0 ||
		got.RigProbeTokensPerSec == nil || *got.RigProbeTokensPerSec <= 0 {
		t.Fatalf("qualified after %d probes, the last at %v ms to first token and %v tokens/s; want %d, measured",
			got.RigProbePasses, got.RigProbeTTFTMs, got.RigProbeTokensPerSec, catalog.ProbesToQualify)
	}
	b.eventually(t, "the probes are recorded, billed to the platform's probe account", func() bool {
		var probes int
		if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FROM gateway_requests g JOIN accounts a ON a.id = g.account_id
			WHERE g.offering_id = $1 AND a.name = 'GPUMarket probes' AND g.status = 'ok' AND g.streamed`, o.ID).Scan(&probes); err != nil {
			t.Fatal(err)
		}
		return probes >= catalog.ProbesToQualify
	})
	rigPage("Active since ")
	var res *http.Response
	chat, err := client.Chat.Completions.New(b.ctx, chatParams(model, 4), option.WithResponseInto(&res))
	if err != nil {
		t.Fatalf("a request once the rig qualified: %v", err)
	}
	if id, offering, _ := headersOf(t, res); offering != o.ID || b.metered(t, id).output != chat.Usage.CompletionTokens {
		t.Fatalf("served by %s; want the qualified rig, metered", offering)
	}
	if !public() {
		t.Fatal("the qualified rig is not in the public catalog")
	}

	// Its agent stops. After catalog.OfflineAfter without a heartbeat it is offline: moved back here by the
	// test, which does not wait the minute.
	rig.stop()
	b.eventually(t, "the silent rig goes offline", func() bool {
		// Again until it is offline: a heartbeat heard just before the stop may be written down after this.
		longAgo := time.Now().Add(-2 * catalog.OfflineAfter)
		if _, err := b.p.pool.Exec(b.ctx, `UPDATE offerings SET rig_heartbeat_at = least(rig_heartbeat_at, $2),
			rig_state_since = least(rig_state_since, $2) WHERE id = $1 AND rig_state = 'active'`, o.ID, longAgo); err != nil {
			t.Fatal(err)
		}
		got, err := b.p.catalog.Own(b.ctx, b.provider, o.ID)
		return err == nil && got.RigState == catalog.RigOffline
	})
	b.eventually(t, "routing leaves the offline rig", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: model})
		return err != nil
	})
	refused("offline")
	rigPage("Offline: no heartbeat since ")

	// It comes back, and qualifies again by its probes.
	rig = b.runAgent(t, o, simulation.NewHandler(simulation.Options{Profile: profile}))
	t.Cleanup(rig.stop)
	state(catalog.RigActive)
	b.eventually(t, "routing sends the rig requests again", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: model})
		return err == nil
	})

	// A rig whose answers name another model than its listing's stays pending, and says why.
	liar := b.listPending(t, "earn-liar")
	other := simulation.Zero()
	other.Model = "someone-else"
	sim := simulation.NewHandler(simulation.Options{Profile: other})
	asOther := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The upstream takes any model's name, and answers as its own.
		body, _ := io.ReadAll(r.Body)
		body = bytes.ReplaceAll(body, []byte(`"earn-liar"`), []byte(`"someone-else"`))
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		sim.ServeHTTP(w, r)
	})
	liarRig := b.runAgent(t, liar, asOther)
	t.Cleanup(liarRig.stop)
	want := `its answer named the model "someone-else", not the listed "earn-liar"`
	b.eventually(t, "the liar's probes fail on its model", func() bool {
		got, err := b.p.catalog.Own(b.ctx, b.provider, liar.ID)
		return err == nil && strings.HasSuffix(got.RigStateReason(time.Now()), want)
	})
	if got, _ := b.p.catalog.Own(b.ctx, b.provider, liar.ID); got.RigState != catalog.RigPending {
		t.Fatalf("the rig answering as another model is %s", got.RigState)
	}
	_, err = client.Chat.Completions.New(b.ctx, chatParams("earn-liar", 4))
	apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_capacity")
}
