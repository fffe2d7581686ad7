package benchmarks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// pinningGateway stands for the platform's gateway: it answers every request from the offering
// its body pins, as the gateway does, with a simulation of the model behind it.
func pinningGateway(t *testing.T, model string) *httptest.Server {
	t.Helper()
	sim := simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: model})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var pin struct {
			GPUMarket struct {
				Offering string `json:"offering"`
			} `json:"gpumarket"`
		}
		_ = json.Unmarshal(body, &pin)
		w.Header().Set("X-GPUMarket-Offering", pin.GPUMarket.Offering)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// loadgenResult is a real result of loadgen (package load) pinned to the offering, as JSON.
func loadgenResult(t *testing.T, gateway *httptest.Server, o catalog.Offering, requests int) []byte {
	t.Helper()
	res, err := load.Run(context.Background(), load.Options{URL: gateway.URL + "/v1", Offering: o.ID, Model: o.Model,
		Requests: requests, Rate: 400, MaxTokens: 8, PromptTokens: 20, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edited is the JSON with its fields changed.
func edited(t *testing.T, raw []byte, change func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAResultIsHeldToItsListing: a real loadgen result of the offering is taken, marked as run
// through the gateway when it was; every other kind of result is refused with what to do.
func TestAResultIsHeldToItsListing(t *testing.T) {
	t.Parallel()
	listed := time.Now().Add(-time.Hour)
	o := catalog.Offering{ID: "0b5e7a52-1111-4222-8333-444455556666", ProviderAccountID: "p", Model: "org/model-7b", CreatedAt: listed}
	gw := pinningGateway(t, o.Model)
	raw := loadgenResult(t, gw, o, 20)
	now := time.Now()

	b, err := benchmarks.Check(raw, o, gw.URL+"/v1/", now)
	if err != nil {
		t.Fatalf("a real result refused: %v", err)
	}
	if !b.ThroughGateway || b.OfferingID != o.ID || b.Completed != 20 || b.TTFTP50Ms <= 0 || b.TotalTPS <= 0 || b.Rate != 400 ||
		b.Method != load.Method || b.Result != string(bytes.TrimSpace(raw)) {
		t.Errorf("benchmark %+v", b)
	}
	if b, err := benchmarks.Check(raw, o, "https://gpumarket.example/v1", now); err != nil || b.ThroughGateway {
		t.Errorf("run elsewhere: through the gateway %v, %v; want taken, marked as not", b.ThroughGateway, err)
	}
	withTier := edited(t, raw, func(m map[string]any) { m["model"] = o.Model + ":batch" })
	if _, err := benchmarks.Check(withTier, o, gw.URL+"/v1", now); err != nil {
		t.Errorf("the model with a tier suffix refused: %v", err)
	}

	big := edited(t, raw, func(m map[string]any) { m["note"] = strings.Repeat("x", benchmarks.MaxResultBytes) })
	for _, c := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", []byte("  \n"), "the field is empty"},
		{"too large", big, "at most 64 KB"},
		{"not JSON", []byte("ttft 20 ms"), "This is not loadgen's JSON result"},
		{"another tool", []byte(`{"ttft_p50_ms": 20}`), "not a result of gpumarket's loadgen"},
		{"another offering", edited(t, raw, func(m map[string]any) { m["offering"] = "another" }),
			"This result measured offering another, not this rig's (" + o.ID + "): attach it to that rig, or run loadgen with -offering " + o.ID + "."},
		{"not pinned", edited(t, raw, func(m map[string]any) { m["offering"] = "" }),
			"The run was not pinned to an offering: run loadgen with -offering " + o.ID},
		{"another model", edited(t, raw, func(m map[string]any) { m["model"] = "org/model-70b" }),
			`This result measured model "org/model-70b"; this rig serves "org/model-7b".`},
		{"not streamed", edited(t, raw, func(m map[string]any) { m["stream"] = false }), "The run did not stream"},
		{"too few answers", edited(t, raw, func(m map[string]any) { m["completed"], m["from_offering"] = 5, 5 }), "Only 5 requests succeeded"},
		{"counts", edited(t, raw, func(m map[string]any) { m["failed"] = 3 }), "The counts do not add up"},
		{"answers from elsewhere", edited(t, raw, func(m map[string]any) { m["from_offering"] = 12 }), "12 answers came from the offering"},
		{"percentiles", edited(t, raw, func(m map[string]any) { m["ttft_p99_ms"] = 0.0001 }), "not in order"},
		{"throughput", edited(t, raw, func(m map[string]any) { m["total_tps"] = m["total_tps"].(float64) * 3 }),
			"is not what the run's tokens and answers"},
		{"rate", edited(t, raw, func(m map[string]any) { m["rate"] = 1e6 }), "outside 0 to 10000"},
		{"future", edited(t, raw, func(m map[string]any) { m["started_at"] = now.Add(time.Hour).Format(time.RFC3339) }), "in the future"},
		{"before the listing", edited(t, raw, func(m map[string]any) { m["started_at"] = listed.Add(-time.Hour).Format(time.RFC3339) }),
			"before this rig was listed"},
	} {
		_, err := benchmarks.Check(c.raw, o, gw.URL+"/v1", now)
		if err == nil {
			t.Errorf("%s: taken", c.name)
			continue
		}
		ae, ok := err.(*services.Error)
		if !ok || ae.Code != services.CodeInvalid || !strings.Contains(ae.Fields["result"], c.want) {
			t.Errorf("%s: %v, want invalid with %q", c.name, err, c.want)
		}
	}
}
