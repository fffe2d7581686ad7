package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// pinningGateway stands for a gateway that answers each request from the offering its body pins,
// with a simulation of the model behind it.
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

// loadgenJSON is a real loadgen result of a run pinned to the offering, serving the model.
func loadgenJSON(t *testing.T, offeringID, model string, requests int) []byte {
	t.Helper()
	gw := pinningGateway(t, model)
	res, err := load.Run(context.Background(), load.Options{URL: gw.URL + "/v1", Offering: offeringID, Model: model,
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

// postResult posts the benchmark form: the result as a file when file is set, else pasted.
func postResult(t *testing.T, client *http.Client, pageURL, csrf string, result []byte, file bool) (*http.Response, *goquery.Document) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("_csrf", csrf)
	if file {
		fw, err := mw.CreateFormFile("result_file", "result.json")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(result)
	} else {
		_ = mw.WriteField("result", string(result))
	}
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, pageURL, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, doc
}

// TestAProviderAttachesABenchmarkShownAsItsOwnClaim: a provider uploads loadgen's result of its
// rig on the rig's benchmark page; the catalog and the provider's rigs show its figures labelled as
// the provider's, with where it ran. A result of another offering or model is refused with what
// to do and the pasted text kept; another provider cannot attach to the rig; a form without its
// CSRF token is refused; a second result replaces the first; removed, it leaves the catalog.
func TestAProviderAttachesABenchmarkShownAsItsOwnClaim(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rigs, err := e.catalog.ListOwn(ctx, owner.AccountID)
	if err != nil || len(rigs) < 2 {
		t.Fatalf("the demo provider's rigs: %d, %v", len(rigs), err)
	}
	var o, sibling catalog.Offering
	o = rigs[0]
	for _, r := range rigs[1:] {
		if r.Status == catalog.StatusActive {
			sibling = r
			break
		}
	}
	pageURL := e.srv.URL + "/provider/rigs/" + o.ID + "/benchmark"
	stored := func() int { return countRows(t, e, `SELECT count(*) FROM provider_benchmarks`) }

	browser, csrf := loginBrowser(t, e, "provider@example.com")
	doc := getPage(t, browser, pageURL)
	if cmd := doc.Find(`[data-testid="loadgen-command"]`).Text(); !strings.Contains(cmd, "-url "+e.srv.URL+"/v1 -offering "+o.ID) {
		t.Errorf("loadgen command %q", cmd)
	}
	if doc.Find(`[data-testid="no-benchmark"]`).Length() != 1 || doc.Find(`[data-testid="platform-measured"]`).Text() == "" {
		t.Error("a rig without a benchmark does not say so, or what the platform measured")
	}

	// Refused: another offering's result, pasted; another model's, uploaded.
	ofSibling := loadgenJSON(t, sibling.ID, sibling.Model, 20)
	res, doc := postResult(t, browser, pageURL, csrf, ofSibling, false)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if msg := doc.Find(`[data-testid="form-error"]`).Text(); !strings.Contains(msg, "This result measured offering "+sibling.ID+", not this rig's ("+o.ID+")") {
		t.Errorf("another offering's result: %q", msg)
	}
	if kept := doc.Find(`textarea[name="result"]`).Text(); kept != string(ofSibling) {
		t.Errorf("the pasted result is not kept: %d bytes of %d", len(kept), len(ofSibling))
	}
	res, doc = postResult(t, browser, pageURL, csrf, loadgenJSON(t, o.ID, "org/another-model", 20), true)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if msg := doc.Find(`[data-testid="form-error"]`).Text(); !strings.Contains(msg, `This result measured model "org/another-model"; this rig serves "`+o.Model+`".`) {
		t.Errorf("another model's result: %q", msg)
	}
	if n := stored(); n != 0 {
		t.Fatalf("%d benchmarks stored after refusals", n)
	}

	// Another provider's session and CSRF token do not reach the rig.
	intruder, intruderCSRF := loginBrowser(t, e, "northwind@example.com")
	res, _ = postResult(t, intruder, pageURL, intruderCSRF, loadgenJSON(t, o.ID, o.Model, 20), true)
	wantStatus(t, res, http.StatusNotFound)
	res, _ = postResult(t, browser, pageURL, "forged", loadgenJSON(t, o.ID, o.Model, 20), true)
	wantStatus(t, res, http.StatusForbidden)
	if n := stored(); n != 0 {
		t.Fatalf("%d benchmarks stored after another provider's and a forged post", n)
	}

	// Attached, then replaced by a second run.
	res, _ = postResult(t, browser, pageURL, csrf, loadgenJSON(t, o.ID, o.Model, 20), true)
	wantStatus(t, res, http.StatusSeeOther)
	res, _ = postResult(t, browser, pageURL, csrf, loadgenJSON(t, o.ID, o.Model, 30), false)
	wantStatus(t, res, http.StatusSeeOther)
	if n := stored(); n != 1 || countRows(t, e, `SELECT completed FROM provider_benchmarks WHERE offering_id = $1`, o.ID) != 30 {
		t.Fatalf("%d benchmarks stored, want the second run's alone", n)
	}
	doc = getPage(t, browser, pageURL)
	if got := doc.Find(`[data-testid="provider-benchmark"]`).Text(); !strings.Contains(got, "Benchmarked by the provider") ||
		!strings.Contains(got, "over 30 requests") || !strings.Contains(got, "not measured by the platform") {
		t.Errorf("the rig's page shows %q", got)
	}

	// The public catalog: a detail row under the offering, labelled as the provider's, marked as
	// run elsewhere than the platform's gateway (the stand-in's address).
	catalogDoc := getPage(t, browserClient(t), e.srv.URL+"/catalog")
	row := catalogDoc.Find(`[data-testid="provider-benchmark-row"][data-offering-id="` + o.ID + `"]`)
	if row.Length() != 1 {
		t.Fatalf("the catalog has %d benchmark rows for the offering", row.Length())
	}
	text := strings.Join(strings.Fields(row.Text()), " ")
	for _, want := range []string{"Benchmarked by the provider", "p50 TTFT", "tokens/s at 400 requests/s over 30 requests",
		"the provider's own claim, not measured by the platform", "not through the platform's gateway"} {
		if !strings.Contains(text, want) {
			t.Errorf("catalog row %q lacks %q", text, want)
		}
	}
	if n := catalogDoc.Find(`[data-testid="provider-benchmark-row"]`).Length(); n != 1 {
		t.Errorf("%d benchmark rows in the catalog, want the one attached", n)
	}
	var public struct {
		Label  string          `json:"label"`
		Result json.RawMessage `json:"result"`
		Done   int             `json:"completed"`
	}
	wantStatus(t, e.call(t, "", http.MethodGet, "/api/offerings/"+o.ID+"/benchmark", nil, &public), http.StatusOK)
	if public.Done != 30 || !strings.Contains(public.Label, "not measured by the platform") || !bytes.Contains(public.Result, []byte(`"offering":"`+o.ID+`"`)) {
		t.Errorf("public benchmark: %d completed, label %q", public.Done, public.Label)
	}
	rigsDoc := getPage(t, browser, e.srv.URL+"/provider/rigs")
	if rigsDoc.Find(`[data-testid="provider-benchmark-row"][data-offering-id="`+o.ID+`"]`).Length() != 1 {
		t.Error("the provider's rigs do not show the benchmark")
	}

	// Removed by another provider: not found; by its own: gone from the catalog.
	wantStatus(t, postForm(t, intruder, pageURL+"/remove", map[string][]string{"_csrf": {intruderCSRF}}), http.StatusNotFound)
	if n := stored(); n != 1 {
		t.Fatalf("%d benchmarks after another provider's removal", n)
	}
	wantStatus(t, postForm(t, browser, pageURL+"/remove", map[string][]string{"_csrf": {csrf}}), http.StatusSeeOther)
	if n := stored(); n != 0 {
		t.Fatalf("%d benchmarks after removal", n)
	}
	if getPage(t, browserClient(t), e.srv.URL+"/catalog").Find(`[data-testid="provider-benchmark-row"]`).Length() != 0 {
		t.Error("the catalog still shows the removed benchmark")
	}
}

// TestAProviderAttachesABenchmarkThroughTheAPI: PUT takes loadgen's result as the body and DELETE
// removes it, each on the provider's own rig only.
func TestAProviderAttachesABenchmarkThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	rigs, err := e.catalog.ListOwn(ctx, owner.AccountID)
	if err != nil || len(rigs) == 0 {
		t.Fatal(err)
	}
	o := rigs[0]
	path := "/api/provider/offerings/" + o.ID + "/benchmark"
	put := func(token string, raw []byte) *http.Response {
		req, _ := http.NewRequest(http.MethodPut, e.srv.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	token := e.token(t, "provider@example.com", demo.Password)
	other := e.token(t, "northwind@example.com", demo.Password)
	raw := loadgenJSON(t, o.ID, o.Model, 20)
	wantStatus(t, put(other, raw), http.StatusNotFound)
	wantStatus(t, put(token, []byte(`{"method":"gpumarket-loadgen/1"}`)), http.StatusUnprocessableEntity)
	wantStatus(t, put(token, raw), http.StatusOK)
	wantStatus(t, e.call(t, token, http.MethodGet, path, nil, nil), http.StatusOK)
	wantStatus(t, e.call(t, other, http.MethodDelete, path, nil, nil), http.StatusNotFound)
	if n := countRows(t, e, `SELECT count(*) FROM provider_benchmarks`); n != 1 {
		t.Fatalf("%d benchmarks", n)
	}
	wantStatus(t, e.call(t, token, http.MethodDelete, path, nil, nil), http.StatusNoContent)
	wantStatus(t, e.call(t, token, http.MethodGet, path, nil, nil), http.StatusNotFound)
}
