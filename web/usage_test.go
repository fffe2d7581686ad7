package web_test

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
)

// bigCharge is 2^53+1 picodollars, $9007.199254740993: a reader that goes through a float64
// shows it wrong.
const bigCharge = money.Pico(1<<53 + 1)

// usageWorld is a platform with metered traffic: the demo developer (Acme Labs) made three
// requests in the last two days and one long ago, another developer made one, on a standard
// rig of Fjord GPU Co-op (the demo provider) and a realtime one of Northwind Compute.
type usageWorld struct {
	*env
	acme, otherDev     string // customer accounts
	fjord, northwind   string // provider accounts
	fjordRig, northRig catalog.Offering
	day0, day1         time.Time // the day before yesterday and yesterday, UTC
	recent             []string  // acme's requests in the default period, newest first
	old                string    // acme's request 40 days ago
	otherRequest       string
	requests           int
}

// usageUse is one metered request to write.
type usageUse struct {
	at              time.Time
	customer        string
	rig             catalog.Offering
	in, out         int64
	charge, payable money.Pico
	whole           bool // answered whole, not streamed: no time to first token (NULL)
}

func newUsageWorld(t *testing.T) *usageWorld {
	t.Helper()
	ctx := context.Background()
	w := &usageWorld{env: setup(t)}
	user := func(email string) accounts.User {
		u, err := w.accounts.UserByEmail(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	rig := func(provider, gpu string, count int, model string, p99 float64) catalog.Offering {
		o, err := w.catalog.Create(ctx, provider, catalog.ListingInput{GPU: gpu, GPUCount: count, Region: "eu", Model: model,
			AskInput: 60_000, AskOutput: 60_000, ClaimedTTFTP99Ms: &p99})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	w.acme, w.fjord, w.northwind = user("developer@example.com").AccountID, user("provider@example.com").AccountID,
		user("northwind@example.com").AccountID
	other, err := w.accounts.SignUp(ctx, accounts.SignUpInput{Email: "other-dev@example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper, AccountName: "Other Labs"})
	if err != nil {
		t.Fatal(err)
	}
	w.otherDev = other.AccountID
	w.fjordRig = rig(w.fjord, "rtx-4090", 4, "usage-test/fjord-model", 300)
	w.northRig = rig(w.northwind, "h100-pcie", 1, "usage-test/northwind-model", 40)
	if w.fjordRig.Tier != catalog.TierStandard || w.northRig.Tier != catalog.TierRealtime {
		t.Fatalf("rigs in %s and %s, want standard and realtime", w.fjordRig.Tier, w.northRig.Tier)
	}

	now := time.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	w.day0, w.day1 = today.AddDate(0, 0, -2), today.AddDate(0, 0, -1)
	w.old = w.record(t, usageUse{at: today.AddDate(0, 0, -40).Add(12 * time.Hour), customer: w.acme, rig: w.fjordRig,
		in: 100, out: 100, charge: 5_000_000, payable: 1_000_000})
	a1 := w.record(t, usageUse{at: w.day0.Add(9 * time.Hour), customer: w.acme, rig: w.fjordRig,
		in: 1000, out: 500, charge: 200_000_000, payable: 90_000_000})
	a2 := w.record(t, usageUse{at: w.day1.Add(-time.Second), customer: w.acme, rig: w.northRig,
		in: 20, out: 7, charge: 3_400_007, payable: 1_620_000, whole: true})
	a3 := w.record(t, usageUse{at: w.day1.Add(10 * time.Hour), customer: w.acme, rig: w.fjordRig,
		in: 12, out: 3, charge: bigCharge, payable: 900_001})
	w.recent = []string{a3, a2, a1}
	w.otherRequest = w.record(t, usageUse{at: w.day1.Add(11 * time.Hour), customer: w.otherDev, rig: w.fjordRig,
		in: 5, out: 5, charge: 1_500_000, payable: 600_000})
	return w
}

// record writes a usage row and adds it to its hourly rollup, as the meter does, and returns
// the request id.
func (w *usageWorld) record(t *testing.T, u usageUse) string {
	t.Helper()
	ctx := context.Background()
	w.requests++
	id := "req_web_" + strconv.Itoa(w.requests)
	if _, err := w.pool.Exec(ctx, `
		INSERT INTO usage_events (event_id, request_id, account_id, offering_id, provider_account_id, tier, model,
			input_tokens, output_tokens, ttft_ms, duration_ms, energy_j, energy_source, status,
			input_price, output_price, ask_input_price, ask_output_price, charge_pico, payable_pico, occurred_at, metered_at, stream_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $14 THEN NULL ELSE 38.25 END, 900, 10, 'estimated', 'ok',
			100000, 200000, 60000, 60000, $10, $11, $12, $12, $13)`,
		"evt_"+id, id, u.customer, u.rig.ID, u.rig.ProviderAccountID, string(u.rig.Tier), u.rig.Model, u.in, u.out,
		int64(u.charge), int64(u.payable), u.at, w.requests, u.whole); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(ctx, `
		INSERT INTO usage_hourly (hour, account_id, offering_id, tier, model, price_id, ask_input_price, ask_output_price,
			provider_account_id, requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens,
			uncharged_output_tokens, charge_pico, payable_pico, energy_j)
		SELECT $1::timestamptz, $2::uuid, $3::uuid, $4, $5, 0, 60000, 60000, $6::uuid, 1, $7::bigint, $8::bigint, u, u * $7::bigint,
			u * $8::bigint, $9::bigint, $10::bigint, 10
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
		u.at.Truncate(time.Hour), u.customer, u.rig.ID, string(u.rig.Tier), u.rig.Model, u.rig.ProviderAccountID,
		u.in, u.out, int64(u.charge), int64(u.payable)); err != nil {
		t.Fatal(err)
	}
	return id
}

func date(t time.Time) string { return t.Format("2006-01-02") }

// usageJSON is GET /api/usage.
type usageJSON struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Requests []struct {
		RequestID    string   `json:"request_id"`
		Model        string   `json:"model"`
		Tier         string   `json:"tier"`
		OfferingID   string   `json:"offering_id"`
		Provider     string   `json:"provider"`
		GPU          string   `json:"gpu"`
		GPUCount     int      `json:"gpu_count"`
		InputTokens  int64    `json:"input_tokens"`
		OutputTokens int64    `json:"output_tokens"`
		TTFTMillis   *float64 `json:"ttft_ms"`
		CostPico     int64    `json:"cost_pico"`
		CostUSD      string   `json:"cost_usd"`
	} `json:"requests"`
	Next   string `json:"next"`
	Totals struct {
		Days []struct {
			Day      string `json:"day"`
			Tier     string `json:"tier"`
			Requests int64  `json:"requests"`
			CostPico int64  `json:"cost_pico"`
			CostUSD  string `json:"cost_usd"`
		} `json:"days"`
		Total struct {
			Requests     int64  `json:"requests"`
			InputTokens  int64  `json:"input_tokens"`
			OutputTokens int64  `json:"output_tokens"`
			CostPico     int64  `json:"cost_pico"`
			CostUSD      string `json:"cost_usd"`
		} `json:"total"`
	} `json:"totals"`
}

func (u usageJSON) ids() []string {
	out := []string{}
	for _, r := range u.Requests {
		out = append(out, r.RequestID)
	}
	return out
}

func TestUsageAPI(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	dev := w.token(t, "developer@example.com", demo.Password)

	var got usageJSON
	wantStatus(t, w.call(t, dev, http.MethodGet, "/api/usage", nil, &got), http.StatusOK)
	today := w.day1.AddDate(0, 0, 1)
	if got.From != date(today.AddDate(0, 0, -29)) || got.To != date(today) {
		t.Errorf("period %s to %s, want the last 30 days to %s", got.From, got.To, date(today))
	}
	if !slices.Equal(got.ids(), w.recent) || got.Next != "" {
		t.Fatalf("requests %v (next %q), want acme's recent %v on one page", got.ids(), got.Next, w.recent)
	}
	big := got.Requests[0]
	if big.CostPico != int64(bigCharge) || big.CostUSD != "9007.199254740993" || big.Model != w.fjordRig.Model ||
		big.Tier != string(w.fjordRig.Tier) || big.OfferingID != w.fjordRig.ID || big.Provider != "Fjord GPU Co-op" ||
		big.GPU != "rtx-4090" || big.GPUCount != 4 || big.InputTokens != 12 || big.OutputTokens != 3 ||
		big.TTFTMillis == nil || *big.TTFTMillis != 38.25 {
		t.Errorf("request %+v, want the $9007.199254740993 request on Fjord's %s", big, w.fjordRig.ID)
	}

	if whole := got.Requests[1]; whole.TTFTMillis != nil {
		t.Errorf("request %s answered whole has a time to first token %g ms; want null", whole.RequestID, *whole.TTFTMillis)
	}

	t.Run("totals per day and tier, exact", func(t *testing.T) {
		days := got.Totals.Days
		var desc []string
		for _, d := range days {
			desc = append(desc, d.Day+" "+d.Tier+" "+strconv.FormatInt(d.Requests, 10)+" "+d.CostUSD)
		}
		// The request a second before midnight UTC counts on its own day; tiers go fastest first.
		want := []string{
			date(w.day1) + " standard 1 9007.199254740993",
			date(w.day0) + " realtime 1 0.000003400007",
			date(w.day0) + " standard 1 0.0002",
		}
		if !slices.Equal(desc, want) {
			t.Errorf("days %q, want %q", desc, want)
		}
		total := got.Totals.Total
		if sum := bigCharge + 3_400_007 + 200_000_000; total.CostPico != int64(sum) || total.CostUSD != "9007.199458141" ||
			total.Requests != 3 || total.InputTokens != 1032 || total.OutputTokens != 510 {
			t.Errorf("total %+v, want 3 requests costing %s", total, sum)
		}
	})

	t.Run("filters", func(t *testing.T) {
		for query, want := range map[string][]string{
			"?tier=realtime": {w.recent[1]},
			"?tier=standard&model=" + url.QueryEscape(w.northRig.Model): {},
			"?model=" + url.QueryEscape(w.fjordRig.Model):               {w.recent[0], w.recent[2]},
			"?from=" + date(w.day1) + "&to=" + date(w.day1):             {w.recent[0]},
			"?to=" + date(w.day0):                                       {w.recent[1], w.recent[2]}, // the 30 days to then
			"?from=" + date(w.day0.AddDate(0, 0, -60)):                  append(slices.Clone(w.recent), w.old),
			"?model=no-such-model":                                      {},
		} {
			var got usageJSON
			wantStatus(t, w.call(t, dev, http.MethodGet, "/api/usage"+query, nil, &got), http.StatusOK)
			if !slices.Equal(got.ids(), want) {
				t.Errorf("%s: requests %v, want %v", query, got.ids(), want)
			}
		}
	})

	t.Run("pages follow the cursor through every request once", func(t *testing.T) {
		var seen []string
		path := "/api/usage?limit=1&from=" + date(w.day0.AddDate(0, 0, -60))
		for range 10 {
			var page usageJSON
			wantStatus(t, w.call(t, dev, http.MethodGet, path, nil, &page), http.StatusOK)
			seen = append(seen, page.ids()...)
			if page.Next == "" {
				break
			}
			path = "/api/usage?limit=1&from=" + date(w.day0.AddDate(0, 0, -60)) + "&before=" + url.QueryEscape(page.Next)
		}
		if want := append(slices.Clone(w.recent), w.old); !slices.Equal(seen, want) {
			t.Errorf("paged %v, want %v", seen, want)
		}
	})

	t.Run("another developer sees only its own", func(t *testing.T) {
		other := w.token(t, "other-dev@example.com", demo.Password)
		var got usageJSON
		wantStatus(t, w.call(t, other, http.MethodGet, "/api/usage?from="+date(w.day0.AddDate(0, 0, -60)), nil, &got), http.StatusOK)
		if !slices.Equal(got.ids(), []string{w.otherRequest}) || got.Totals.Total.CostPico != 1_500_000 ||
			len(got.Totals.Days) != 1 {
			t.Errorf("other's usage %+v, want only its request of $0.0000015", got)
		}
	})

	t.Run("bad filters are named", func(t *testing.T) {
		for query, fields := range map[string][]string{
			"?from=2026-13-01":               {"from"},
			"?to=yesterday":                  {"to"},
			"?from=2026-11-10&to=2026-11-09": {"to"},
			"?tier=gold":                     {"tier"},
			"?limit=0":                       {"limit"},
			"?limit=many":                    {"limit"},
			"?limit=501":                     {"limit"},
			"?before=not-a-cursor!":          {"before"},
			"?from=x&to=y&tier=gold&limit=-1&before=%25": {"from", "to", "tier", "limit", "before"},
		} {
			var out apiErrorJSON
			res := w.call(t, dev, http.MethodGet, "/api/usage"+query, nil, &out)
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("%s: status %d, want 422", query, res.StatusCode)
				continue
			}
			wantFields(t, out, fields...)
		}
	})
}

// getCSV fetches an export with a bearer token and parses it.
func (w *usageWorld) getCSV(t *testing.T, client *http.Client, token, path string) (*http.Response, [][]string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, w.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		return res, nil
	}
	records, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil {
		t.Fatalf("%s is not CSV: %v\n%s", path, err, raw)
	}
	return res, records
}

func TestUsageCSV(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	dev := w.token(t, "developer@example.com", demo.Password)

	res, records := w.getCSV(t, http.DefaultClient, dev, "/api/usage.csv")
	wantStatus(t, res, http.StatusOK)
	if ct := res.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	today := w.day1.AddDate(0, 0, 1)
	wantDisposition := `attachment; filename="gpumarket-usage-` + date(today.AddDate(0, 0, -29)) + `-to-` + date(today) + `.csv"`
	if cd := res.Header.Get("Content-Disposition"); cd != wantDisposition {
		t.Errorf("Content-Disposition %q, want %q", cd, wantDisposition)
	}
	header := records[0]
	col := func(name string) int {
		i := slices.Index(header, name)
		if i < 0 {
			t.Fatalf("no column %s in %v", name, header)
		}
		return i
	}
	rows := records[1:]
	var ids []string
	var sum money.Pico
	for _, row := range rows {
		ids = append(ids, row[col("request_id")])
		p, err := money.ParseUSD(row[col("cost_usd")])
		if err != nil {
			t.Fatal(err)
		}
		sum += p
	}
	if !slices.Equal(ids, w.recent) {
		t.Fatalf("exported %v, want %v", ids, w.recent)
	}
	if row := rows[0]; row[col("cost_usd")] != "9007.199254740993" || row[col("model")] != w.fjordRig.Model ||
		row[col("offering_id")] != w.fjordRig.ID || row[col("provider")] != "Fjord GPU Co-op" ||
		row[col("input_tokens")] != "12" || row[col("output_tokens")] != "3" || row[col("ttft_ms")] != "38.25" {
		t.Errorf("row %q, want the $9007.199254740993 request", row)
	}
	if ttft := rows[1][col("ttft_ms")]; ttft != "" {
		t.Errorf("ttft_ms %q for a request answered whole; want an empty cell", ttft)
	}
	if rows[1][col("cost_usd")] != "0.000003400007" {
		t.Errorf("cost %q, want twelve exact decimals 0.000003400007", rows[1][col("cost_usd")])
	}
	if want := bigCharge + 3_400_007 + 200_000_000; sum != want {
		t.Errorf("exported costs sum to %s, want %s", sum, want)
	}

	t.Run("same filters as the page", func(t *testing.T) {
		_, records := w.getCSV(t, http.DefaultClient, dev, "/api/usage.csv?tier=realtime&model="+
			url.QueryEscape(w.northRig.Model)+"&from="+date(w.day0.AddDate(0, 0, -60)))
		if len(records) != 2 || records[1][col("request_id")] != w.recent[1] {
			t.Errorf("filtered export %q, want only %s", records, w.recent[1])
		}
	})

	t.Run("another developer exports only its own", func(t *testing.T) {
		other := w.token(t, "other-dev@example.com", demo.Password)
		_, records := w.getCSV(t, http.DefaultClient, other, "/api/usage.csv?from="+date(w.day0.AddDate(0, 0, -60)))
		if len(records) != 2 || records[1][col("request_id")] != w.otherRequest {
			t.Errorf("other's export %q, want only %s", records, w.otherRequest)
		}
	})

	t.Run("the page's export link downloads the same file", func(t *testing.T) {
		browser, _ := loginBrowser(t, w.env, "developer@example.com")
		doc := getPage(t, browser, w.srv.URL+"/usage?tier=standard")
		href, ok := doc.Find(`[data-testid="csv-export"]`).Attr("href")
		if !ok || !strings.HasPrefix(href, "/usage.csv?") {
			t.Fatalf("export link %q", href)
		}
		res, records := w.getCSV(t, browser, "", href)
		wantStatus(t, res, http.StatusOK)
		if !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment;") {
			t.Errorf("Content-Disposition %q, want an attachment", res.Header.Get("Content-Disposition"))
		}
		want := []string{w.recent[0], w.recent[2]}
		var got []string
		for _, r := range records[1:] {
			got = append(got, r[col("request_id")])
		}
		if !slices.Equal(got, want) {
			t.Errorf("page export %v, want %v", got, want)
		}
	})

	t.Run("bad filters are refused before any row", func(t *testing.T) {
		var out apiErrorJSON
		res := w.call(t, dev, http.MethodGet, "/api/usage.csv?from=2026-02-30", nil, &out)
		wantStatus(t, res, http.StatusUnprocessableEntity)
		wantFields(t, out, "from")
	})
}

func TestUsagePage(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	browser, _ := loginBrowser(t, w.env, "developer@example.com")

	pageIDs := func(doc *goquery.Document) []string {
		ids := []string{}
		doc.Find(`[data-testid="request"]`).Each(func(_ int, s *goquery.Selection) {
			id, _ := s.Attr("data-request-id")
			ids = append(ids, id)
		})
		return ids
	}

	doc := getPage(t, browser, w.srv.URL+"/usage")
	if doc.Find(`[data-testid="nav-usage"]`).Length() != 1 {
		t.Error("no Usage link in the navigation")
	}
	if got := pageIDs(doc); !slices.Equal(got, w.recent) {
		t.Fatalf("requests %v, want %v", got, w.recent)
	}
	first := doc.Find(`[data-testid="request"]`).First()
	// One request's cost to six significant digits, grouped; the JSON has it exactly.
	if cost := first.Find(`[data-testid="cost"]`).Text(); cost != "$9,007.20" {
		t.Errorf("cost %q, want $9,007.20 for $9007.199254740993", cost)
	}
	if hw := first.Find(`[data-testid="hardware"]`).Text(); hw != "4x NVIDIA GeForce RTX 4090" {
		t.Errorf("GPU %q, want 4x NVIDIA GeForce RTX 4090", hw)
	}
	if ttft := first.Find(`[data-testid="ttft"]`).Text(); ttft != "38.2 ms" {
		t.Errorf("time to first token %q", ttft)
	}
	// A total in cents: $9007.199458141 is $9,007.20.
	// The request answered whole (not streamed) has none: the finding was its whole duration shown instead.
	whole := doc.Find(`[data-testid="request"]`).Eq(1).Find(`[data-testid="ttft"]`)
	if title, _ := whole.Attr("title"); whole.Text() != "—" || !strings.Contains(title, "not streamed") {
		t.Errorf("time to first token of a request answered whole %q (%q); want — saying it was not streamed", whole.Text(), title)
	}
	total := doc.Find(`[data-testid="period-total"] [data-testid="cost"]`).Text()
	if want := money.FormatCentsOf(bigCharge + 3_400_007 + 200_000_000); total != want || want != "$9,007.20" {
		t.Errorf("period total %q, want %q", total, want)
	}
	if n := doc.Find(`[data-testid="day-total"]`).Length(); n != 3 {
		t.Errorf("%d rows of daily totals, want 3: one per day and tier", n)
	}
	if strings.Contains(doc.Text(), w.otherRequest) {
		t.Error("the page shows another developer's request")
	}

	t.Run("filters and pages", func(t *testing.T) {
		doc := getPage(t, browser, w.srv.URL+"/usage?model="+url.QueryEscape(w.northRig.Model))
		if got := pageIDs(doc); !slices.Equal(got, []string{w.recent[1]}) {
			t.Errorf("filtered by model: %v, want %v", got, []string{w.recent[1]})
		}
		// The request's cost of $0.000003400007 to six significant digits; the total, in cents.
		if cost := doc.Find(`[data-testid="request"] [data-testid="cost"]`).Text(); cost != "$0.00000340001" {
			t.Errorf("the request's cost %q, want $0.00000340001", cost)
		}
		if cost := doc.Find(`[data-testid="period-total"] [data-testid="cost"]`).Text(); cost != "$0.00" {
			t.Errorf("filtered total %q, want $0.00", cost)
		}

		var seen []string
		next := "/usage?limit=2&from=" + date(w.day0.AddDate(0, 0, -60))
		for range 5 {
			doc := getPage(t, browser, w.srv.URL+next)
			seen = append(seen, pageIDs(doc)...)
			href, ok := doc.Find(`[data-testid="older"]`).Attr("href")
			if !ok {
				break
			}
			next = href
		}
		if want := append(slices.Clone(w.recent), w.old); !slices.Equal(seen, want) {
			t.Errorf("paged %v, want %v", seen, want)
		}
	})

	t.Run("bad filters answer 422 beside the fields", func(t *testing.T) {
		res, err := browser.Get(w.srv.URL + "/usage?from=2026-11-31&tier=gold")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		wantStatus(t, res, http.StatusUnprocessableEntity)
		doc, err := goquery.NewDocumentFromReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"from", "tier"} {
			if doc.Find(`[data-testid="error-`+f+`"]`).Length() != 1 {
				t.Errorf("no error beside %s", f)
			}
		}
		if v, _ := doc.Find(`input[name="from"]`).Attr("value"); v != "2026-11-31" {
			t.Errorf("from shows %q, want the value as typed", v)
		}
		if doc.Find(`[data-testid="request"]`).Length() != 0 {
			t.Error("requests shown under filters that do not hold")
		}
	})

	t.Run("another developer's page", func(t *testing.T) {
		other, _ := loginBrowser(t, w.env, "other-dev@example.com")
		doc := getPage(t, other, w.srv.URL+"/usage")
		if got := pageIDs(doc); !slices.Equal(got, []string{w.otherRequest}) {
			t.Errorf("other's page %v, want only %s", got, w.otherRequest)
		}
	})
}

// earningsJSON is GET /api/provider/earnings.
type earningsJSON struct {
	Days []struct {
		Day          string `json:"day"`
		OfferingID   string `json:"offering_id"`
		Model        string `json:"model"`
		Requests     int64  `json:"requests"`
		InputTokens  int64  `json:"input_tokens"`
		OutputTokens int64  `json:"output_tokens"`
		EarnedPico   int64  `json:"earned_pico"`
		EarnedUSD    string `json:"earned_usd"`
	} `json:"days"`
	Total struct {
		Requests   int64  `json:"requests"`
		EarnedPico int64  `json:"earned_pico"`
		EarnedUSD  string `json:"earned_usd"`
	} `json:"total"`
}

func TestProviderEarnings(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	fjord := w.token(t, "provider@example.com", demo.Password)

	var got earningsJSON
	wantStatus(t, w.call(t, fjord, http.MethodGet, "/api/provider/earnings", nil, &got), http.StatusOK)
	// Both developers' requests on Fjord's rig, at Fjord's ask: what the customers paid is
	// not the provider's.
	if len(got.Days) != 2 {
		t.Fatalf("days %+v, want two", got.Days)
	}
	d1, d0 := got.Days[0], got.Days[1]
	if d1.Day != date(w.day1) || d1.OfferingID != w.fjordRig.ID || d1.Requests != 2 || d1.InputTokens != 17 ||
		d1.OutputTokens != 8 || d1.EarnedPico != 1_500_001 || d1.EarnedUSD != "0.000001500001" {
		t.Errorf("yesterday %+v, want 2 requests earning $0.000001500001", d1)
	}
	if d0.Day != date(w.day0) || d0.Requests != 1 || d0.EarnedPico != 90_000_000 || d0.Model != w.fjordRig.Model {
		t.Errorf("the day before %+v, want 1 request earning $0.00009", d0)
	}
	if got.Total.Requests != 3 || got.Total.EarnedPico != 91_500_001 || got.Total.EarnedUSD != "0.000091500001" {
		t.Errorf("total %+v, want 3 requests earning exactly $0.000091500001", got.Total)
	}

	t.Run("the older earning with dates", func(t *testing.T) {
		var got earningsJSON
		path := "/api/provider/earnings?from=" + date(w.day0.AddDate(0, 0, -60)) + "&to=" + date(w.day0.AddDate(0, 0, -1))
		wantStatus(t, w.call(t, fjord, http.MethodGet, path, nil, &got), http.StatusOK)
		if len(got.Days) != 1 || got.Total.EarnedPico != 1_000_000 {
			t.Errorf("earnings %+v, want the old request's $0.000001", got)
		}
	})

	t.Run("another provider sees only its own rigs", func(t *testing.T) {
		north := w.token(t, "northwind@example.com", demo.Password)
		var got earningsJSON
		wantStatus(t, w.call(t, north, http.MethodGet, "/api/provider/earnings", nil, &got), http.StatusOK)
		if len(got.Days) != 1 || got.Days[0].OfferingID != w.northRig.ID || got.Total.EarnedPico != 1_620_000 {
			t.Errorf("Northwind's earnings %+v, want its one request's $0.00000162", got)
		}
		lisboa := w.token(t, "lisboa@example.com", demo.Password)
		got = earningsJSON{}
		wantStatus(t, w.call(t, lisboa, http.MethodGet, "/api/provider/earnings", nil, &got), http.StatusOK)
		if len(got.Days) != 0 || got.Total.EarnedUSD != "0.00" {
			t.Errorf("Lisboa's earnings %+v, want none", got)
		}
	})

	t.Run("the page", func(t *testing.T) {
		browser, _ := loginBrowser(t, w.env, "provider@example.com")
		doc := getPage(t, browser, w.srv.URL+"/provider/earnings")
		if doc.Find(`[data-testid="nav-earnings"]`).Length() != 1 {
			t.Error("no Earnings link in the navigation")
		}
		// Earnings are shown in cents ($0.000091500001 is $0.00); the JSON has them exactly.
		if total := doc.Find(`[data-testid="earned-total"]`).Text(); total != "$0.00" {
			t.Errorf("earned %q, want $0.00", total)
		}
		var earned []string
		doc.Find(`[data-testid="earning"]`).Each(func(_ int, s *goquery.Selection) {
			earned = append(earned, s.Find(`[data-testid="day"]`).Text()+" "+s.Find(`[data-testid="earned"]`).Text())
		})
		if want := []string{date(w.day1) + " $0.00", date(w.day0) + " $0.00"}; !slices.Equal(earned, want) {
			t.Errorf("rows %q, want %q", earned, want)
		}

		res, err := browser.Get(w.srv.URL + "/provider/earnings?to=someday")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		wantStatus(t, res, http.StatusUnprocessableEntity)
		doc, err = goquery.NewDocumentFromReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if doc.Find(`[data-testid="error-to"]`).Length() != 1 || doc.Find(`[data-testid="earned-total"]`).Length() != 0 {
			t.Error("a bad date shows no error beside it, or shows earnings")
		}
	})

	t.Run("bad filters are named", func(t *testing.T) {
		var out apiErrorJSON
		res := w.call(t, fjord, http.MethodGet, "/api/provider/earnings?from=2026-11-05&to=2026-11-01&tier=gold", nil, &out)
		wantStatus(t, res, http.StatusUnprocessableEntity)
		wantFields(t, out, "to", "tier")
	})
}
