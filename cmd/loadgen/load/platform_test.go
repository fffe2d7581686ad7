package load

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// fakePlatform is a gateway in front of a simulation that answers each request from the offering
// its body pins, except every strayEvery-th answer, which names another; and the catalog's
// GET /api/offerings/{id} for the pinned offering.
type fakePlatform struct {
	srv        *httptest.Server
	pins       []string // the gpumarket.offering of each request, in arrival order
	mu         sync.Mutex
	strayEvery int64
	n          atomic.Int64
}

const pinnedID = "3f0c9e1a-0000-4000-8000-000000000001"

func startFakePlatform(t *testing.T, strayEvery int64) *fakePlatform {
	t.Helper()
	f := &fakePlatform{strayEvery: strayEvery}
	sim := simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: "sim"})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/offerings/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != pinnedID {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"id":"`+pinnedID+`","model":"sim","tier":"standard",`+
			`"tier_input_usd_per_mtok":"0.10","tier_output_usd_per_mtok":"0.30"}`)
	})
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var pin struct {
			GPUMarket struct {
				Offering string `json:"offering"`
			} `json:"gpumarket"`
		}
		_ = json.Unmarshal(body, &pin)
		if r.Method == http.MethodPost {
			f.mu.Lock()
			f.pins = append(f.pins, pin.GPUMarket.Offering)
			f.mu.Unlock()
			served := pin.GPUMarket.Offering
			if f.n.Add(1)%f.strayEvery == 0 {
				served = "another-offering"
			}
			w.Header().Set("X-GPUMarket-Offering", served)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sim.ServeHTTP(w, r)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// TestAPinnedRunCountsWhatItsOfferingServedAndPricesItAtTheCatalog: every request carries the pin;
// the answers that name another offering are failures in no figure; the model comes from the
// catalog; and the platform's cost is the reported tokens at the tier's published prices, exactly.
func TestAPinnedRunCountsWhatItsOfferingServedAndPricesItAtTheCatalog(t *testing.T) {
	t.Parallel()
	f := startFakePlatform(t, 5)
	res := run(t, Options{URL: f.srv.URL + "/v1", Offering: pinnedID, Requests: 20, Rate: 500, MaxTokens: 4,
		PromptTokens: 50, Stream: true, Header: http.Header{"X-Api-Key": {"secret"}, "X-Gpumarket-Tier": {"standard"}}})

	if len(f.pins) != 20 {
		t.Fatalf("%d requests reached the gateway, want 20", len(f.pins))
	}
	for i, p := range f.pins {
		if p != pinnedID {
			t.Fatalf("request %d pinned to %q, want %q", i, p, pinnedID)
		}
	}
	if res.Model != "sim" || res.Offering != pinnedID || res.BaseURL != f.srv.URL+"/v1" || res.Method != Method {
		t.Errorf("result names model %q, offering %q, base URL %q, method %q", res.Model, res.Offering, res.BaseURL, res.Method)
	}
	if res.Completed != 16 || res.FromOffering != 16 || res.NotFromOffering != 4 || res.Failed != 4 {
		t.Errorf("completed %d, from the offering %d, not from it %d, failed %d; want 16, 16, 4, 4",
			res.Completed, res.FromOffering, res.NotFromOffering, res.Failed)
	}
	if len(res.Failures) != 1 || res.Failures[0].Kind != failOtherOffering || !strings.Contains(res.Failures[0].Example, "another-offering") {
		t.Errorf("failures %+v", res.Failures)
	}
	if res.OutputTokens != 16*4 {
		t.Errorf("output tokens %d, want the 16 pinned answers' 64", res.OutputTokens)
	}
	if res.Headers["X-Api-Key"] != "(not written)" || res.Headers["X-Gpumarket-Tier"] != "standard" {
		t.Errorf("headers written %v", res.Headers)
	}

	p := res.Platform
	if p == nil {
		t.Fatal("no platform cost")
	}
	// 0.10 $/M in and 0.30 $/M out are 100,000 and 300,000 picodollars per token.
	want := money.Pico(res.InputTokens*100_000 + res.OutputTokens*300_000)
	if p.ChargePico != want || p.Requests != 16 || p.Tier != "standard" || p.InputPrice != 100_000 || p.OutputPrice != 300_000 {
		t.Errorf("platform cost %+v, want a charge of %d picodollars over 16 requests", p, want)
	}
	tokens := res.InputTokens + res.OutputTokens
	if wantPerM := money.MicroUSD((int64(want) + tokens/2) / tokens); p.USDPerMTotal != wantPerM || p.USDPerMTotal <= 100_000 || p.USDPerMTotal >= 300_000 {
		t.Errorf("usd_per_M_total %s, want %s, between the two prices", p.USDPerMTotal, wantPerM)
	}
	if p.ChargeUSD != want.String() || !strings.Contains(p.Basis, "not invoiced") {
		t.Errorf("charge %q, basis %q", p.ChargeUSD, p.Basis)
	}

	var table strings.Builder
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{pinnedID + ": 16 answers from it, 4 from elsewhere", "at the standard tier's $0.10 in, $0.30 out",
		"computed from the catalog's price, not invoiced", "gpumarket-loadgen/1, loadgen "} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	// The JSON names the offering, the method and the parameters.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"offering":"` + pinnedID + `"`, `"method":"gpumarket-loadgen/1"`, `"seed":0`, `"rate":500`,
		`"from_offering":16`, `"not_from_offering":4`, `"usd_per_M_total":"0.`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("JSON lacks %s: %s", field, b)
		}
	}
}

// TestAPinnedRunNeedsTheCatalogOnlyWithoutAModel: an offering the catalog does not list stops a
// run that would take its model from it, and only notes the missing price of one that names it.
func TestAPinnedRunNeedsTheCatalogOnlyWithoutAModel(t *testing.T) {
	t.Parallel()
	f := startFakePlatform(t, 1_000)
	_, err := Run(context.Background(), Options{URL: f.srv.URL + "/v1", Offering: "not-listed", Requests: 2})
	if err == nil || !strings.Contains(err.Error(), "not in the public catalog") || !strings.Contains(err.Error(), "-model") {
		t.Fatalf("err %v, want the offering is not listed, name the model", err)
	}
	res := run(t, Options{URL: f.srv.URL + "/v1", Offering: "not-listed", Model: "sim", Requests: 2, MaxTokens: 2, Stream: true})
	if res.Platform != nil || !strings.Contains(res.Note, "The platform's cost is not computed") {
		t.Errorf("platform %+v, note %q", res.Platform, res.Note)
	}
	// The fake answers from the pinned offering whatever it is.
	if res.FromOffering != 2 || res.NotFromOffering != 0 {
		t.Errorf("from %d, not from %d", res.FromOffering, res.NotFromOffering)
	}
}
