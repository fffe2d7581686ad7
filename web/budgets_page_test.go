package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// The keys page shows each key's spend in its period, its limit with the period, what remains
// and when it resets; the budgets page sets a person's limit and the account's budget, and says
// the budget is a hard stop.
func TestKeysPageShowsSpendAndRemaining(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	b, csrf := loginBrowser(t, e, "developer@example.com")
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	limit := money.PicoPerUSD
	k, _, err := e.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "nightly", Limit: &limit, LimitPeriod: periods.Day})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := e.pool.Exec(ctx, `INSERT INTO api_key_spend_days (api_key_id, day, requests, charge_pico) VALUES ($1, $2::date, 3, $3)`,
		k.ID, now.Format("2006-01-02"), int64(money.PicoPerUSD/4)); err != nil {
		t.Fatal(err)
	}
	// The meter writes the month beside the day.
	if _, err := e.pool.Exec(ctx, `INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico) VALUES ($1, $2, 3, $3)`,
		k.ID, periods.Month.Start(now), int64(money.PicoPerUSD/4)); err != nil {
		t.Fatal(err)
	}
	row := `[data-testid="key"][data-key="` + k.ID + `"]`
	doc := getPage(t, b, e.srv.URL+"/keys")
	for testid, want := range map[string]string{"key-spent": "$0.25", "key-limit": "$1.00 per day", "key-remaining": "$0.75",
		"key-resets": periods.Day.End(now).Format("Mon 2 Jan 15:04 UTC")} {
		if got := strings.TrimSpace(doc.Find(row + ` [data-testid="` + testid + `"]`).Text()); got != want {
			t.Errorf("%s shows %q, want %q", testid, got, want)
		}
	}
	if v, _ := doc.Find(row + ` select[name="limit_period"] option[selected]`).Attr("value"); v != "day" {
		t.Errorf("the row's period is %q, want day", v)
	}
	wantStatus(t, postForm(t, b, e.srv.URL+"/keys/"+k.ID+"/limit", url.Values{"_csrf": {csrf}, "limit_usd": {"5"}, "limit_period": {"week"}}),
		http.StatusSeeOther)
	if got, _ := e.accounts.Keys(ctx, dev.AccountID); got[0].LimitPeriod != periods.Week || *got[0].Limit != 5*money.PicoPerUSD {
		t.Fatalf("after the form: %s per %s, want $5.00 per week", got[0].Limit, got[0].LimitPeriod)
	}
	snapshot(t, e.srv.URL, b, "keys")

	// GET /api/keys gives the same figures.
	var listed struct {
		Keys []struct {
			ID            string        `json:"id"`
			LimitPeriod   string        `json:"limit_period"`
			SpentPico     money.BigPico `json:"spent_in_period_pico"`
			RemainingUSD  string        `json:"remaining_usd"`
			RemainingPico money.BigPico `json:"remaining_pico"`
		} `json:"keys"`
	}
	token := e.token(t, "developer@example.com", demo.Password)
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/keys", nil, &listed), http.StatusOK)
	if len(listed.Keys) != 1 || listed.Keys[0].LimitPeriod != "week" || !listed.Keys[0].SpentPico.Equal(money.PicoPerUSD/4) ||
		listed.Keys[0].RemainingUSD != "4.75" || !listed.Keys[0].RemainingPico.Equal(475*money.PicoPerCent) {
		t.Errorf("GET /api/keys = %+v; want $0.25 spent this week and $4.75 remaining", listed.Keys)
	}

	wantStatus(t, postForm(t, b, e.srv.URL+"/budgets/account", url.Values{"_csrf": {csrf}, "budget_usd": {"100"}}), http.StatusSeeOther)
	wantStatus(t, postForm(t, b, e.srv.URL+"/budgets/members", url.Values{"_csrf": {csrf}, "user_id": {dev.ID}, "limit_usd": {"2"},
		"limit_period": {"day"}, "thresholds": {"50, 90"}}), http.StatusSeeOther)
	doc = getPage(t, b, e.srv.URL+"/budgets")
	if got := doc.Find(`[data-testid="budget-remaining"]`).Text(); got != "$99.75" {
		t.Errorf("the budget's remaining shows %q, want $99.75", got)
	}
	if !strings.Contains(doc.Find(`[data-testid="budget-hard-stop"]`).Text(), "hard stop") {
		t.Error("the budget does not say it is a hard stop")
	}
	member := `[data-testid="member-limit"][data-user="` + dev.ID + `"]`
	if got := doc.Find(member + ` [data-testid="member-remaining"]`).Text(); got != "$1.75" {
		t.Errorf("the member's remaining shows %q, want $1.75", got)
	}
	res, body := postPage(t, b, e.srv.URL+"/budgets/members", url.Values{"_csrf": {csrf}, "user_id": {dev.ID}, "limit_usd": {"lots"}})
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if !strings.Contains(body, "dollars and cents") {
		t.Error("a bad member limit is not explained")
	}
	// A person chooses not to be e-mailed the balance alert; the page shows the choice.
	wantStatus(t, postForm(t, b, e.srv.URL+"/budgets/subscriptions", url.Values{"_csrf": {csrf}, "budget": {"on"}}), http.StatusSeeOther)
	doc = getPage(t, b, e.srv.URL+"/budgets")
	if _, on := doc.Find(`[data-testid="sub-credit-low"]`).Attr("checked"); on {
		t.Error("the balance alert's e-mail is still chosen after it was turned off")
	}
	if _, on := doc.Find(`[data-testid="sub-budget"]`).Attr("checked"); !on {
		t.Error("the budget alerts' e-mail is not chosen")
	}
	snapshot(t, e.srv.URL, b, "budgets")
}

// snapshot writes a page, with its stylesheet beside it, to $GPUMARKET_PAGE_SNAPSHOTS (when set),
// to be looked at in a browser at any width.
func snapshot(t *testing.T, base string, b *http.Client, page string) {
	t.Helper()
	dir := os.Getenv("GPUMARKET_PAGE_SNAPSHOTS")
	if dir == "" {
		return
	}
	read := func(path string) string {
		res, err := b.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return string(raw)
	}
	html := strings.ReplaceAll(read("/"+page), `href="/static/app.css"`, `href="app.css"`)
	if err := os.WriteFile(filepath.Join(dir, page+".html"), []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.css"), []byte(read("/static/app.css")), 0o644); err != nil {
		t.Fatal(err)
	}
}
