package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
)

// TestAProviderBenchmarksItsListingThroughTheGateway is the benchmark's method through the
// platform (docs/provider-benchmarks.md): loadgen, with a developer's API key and -offering,
// measures one of two offerings of a model through the gateway. Every request is served by the
// pinned offering; the result's requests and tokens are what the gateway recorded and the meter
// billed, and the platform's cost it computes from the catalog's price is what the meter charged,
// to the picodollar. The provider attaches the result, which the platform takes as run through its
// gateway, and the public catalog shows it labelled as the provider's.
func TestAProviderBenchmarksItsListingThroughTheGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	const model = "bench-pinned"
	pinned := b.list(t, rigSpec{model: model, ask: 100_000, p99: 300})
	other := b.list(t, rigSpec{model: model, ask: 90_000, p99: 300}) // cheaper: routing's choice without the pin
	dev, _, secret := b.developer(t, "benchmarker", 20*money.PicoPerUSD, accounts.NewKeyInput{})

	const requests = 30
	res, err := load.Run(b.ctx, load.Options{URL: b.p.URL() + "/v1", APIKey: secret, Offering: pinned.ID,
		Requests: requests, Rate: 40, MaxTokens: 16, PromptTokens: 40, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != model || res.Completed != requests || res.FromOffering != requests || res.NotFromOffering != 0 || res.Failed != 0 {
		t.Fatalf("loadgen: model %q, %d completed, %d from the offering, %d not, %d failed (%+v)",
			res.Model, res.Completed, res.FromOffering, res.NotFromOffering, res.Failed, res.Failures)
	}

	// What the gateway recorded: every request on the pinned offering, none on the other, with
	// the tokens the result counts.
	type recorded struct {
		requests, otherOffering int
		input, output           int64
	}
	var gw recorded
	b.eventually(t, "the gateway records every request", func() bool {
		b.flushRequestLog(t)
		err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE offering_id = $2), count(*) FILTER (WHERE offering_id <> $2),
				coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint
			FROM gateway_requests WHERE account_id = $1 AND status = 'ok'`, dev.AccountID, pinned.ID).
			Scan(&gw.requests, &gw.otherOffering, &gw.input, &gw.output)
		return err == nil && gw.requests+gw.otherOffering >= requests
	})
	if gw.requests != requests || gw.otherOffering != 0 || gw.input != res.InputTokens || gw.output != res.OutputTokens {
		t.Errorf("the gateway recorded %+v; loadgen counted %d requests, %d input and %d output tokens",
			gw, res.Completed, res.InputTokens, res.OutputTokens)
	}
	// What the meter billed: the same requests and tokens, and the charge loadgen computed.
	var billed recorded
	var charged int64
	b.eventually(t, "the meter bills every request", func() bool {
		err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE offering_id = $2), count(*) FILTER (WHERE offering_id <> $2),
				coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint, coalesce(sum(charge_pico), 0)::bigint
			FROM usage_events WHERE account_id = $1`, dev.AccountID, pinned.ID).
			Scan(&billed.requests, &billed.otherOffering, &billed.input, &billed.output, &charged)
		return err == nil && billed.requests+billed.otherOffering >= requests
	})
	if billed.requests != requests || billed.otherOffering != 0 || billed.input != res.InputTokens || billed.output != res.OutputTokens {
		t.Errorf("the meter billed %+v; loadgen counted %d input and %d output tokens", billed, res.InputTokens, res.OutputTokens)
	}
	if res.Platform == nil || int64(res.Platform.ChargePico) != charged || res.Platform.Tier != string(pinned.Tier) {
		t.Errorf("loadgen's platform cost %+v; the meter charged %d picodollars", res.Platform, charged)
	}
	if want := b.price(t, string(pinned.Tier), res.InputTokens, res.OutputTokens); money.Pico(charged) != want {
		t.Errorf("charged %d picodollars, want %d at the tier's price", charged, want)
	}

	// The provider attaches the result; the platform takes it as run through its gateway.
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	token := (&apiClient{t: t, base: b.p.URL()}).login("provider@example.com")
	status, body := call(t, http.MethodPut, b.p.URL()+"/api/provider/offerings/"+pinned.ID+"/benchmark", token, json.RawMessage(raw))
	if status != http.StatusOK || !strings.Contains(body, `"through_gateway":true`) {
		t.Fatalf("attach: %d %s", status, body)
	}
	// Not to the other offering: the result names the pinned one.
	status, body = call(t, http.MethodPut, b.p.URL()+"/api/provider/offerings/"+other.ID+"/benchmark", token, json.RawMessage(raw))
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "This result measured offering "+pinned.ID) {
		t.Errorf("attach to the other offering: %d %s", status, body)
	}

	doc := b.page(t, "/catalog?model="+model)
	row := doc.Find(`[data-testid="provider-benchmark-row"][data-offering-id="` + pinned.ID + `"]`)
	text := strings.Join(strings.Fields(row.Text()), " ")
	if row.Length() != 1 || !strings.Contains(text, "Benchmarked by the provider") || !strings.Contains(text, "over 30 requests") ||
		!strings.Contains(text, "not measured by the platform") || strings.Contains(text, "not through the platform's gateway") {
		t.Errorf("catalog row %q", text)
	}
	if doc.Find(`[data-testid="provider-benchmark-row"][data-offering-id="`+other.ID+`"]`).Length() != 0 {
		t.Error("the other offering shows a benchmark")
	}
}

// page opens a public page and parses it.
func (b *gatewayBundle) page(t *testing.T, path string) *goquery.Document {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.p.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
