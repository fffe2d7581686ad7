package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/gpumarket/gpumarket/services/demo"
)

type budgetsJSON struct {
	MemberLimits []struct {
		UserID       string `json:"user_id"`
		Email        string `json:"email"`
		LimitUSD     string `json:"limit_usd"`
		LimitPeriod  string `json:"limit_period"`
		Thresholds   []int  `json:"thresholds"`
		RemainingUSD string `json:"remaining_usd"`
	} `json:"member_limits"`
	AccountBudget *struct {
		LimitUSD   string `json:"limit_usd"`
		Thresholds []int  `json:"thresholds"`
	} `json:"account_budget"`
	Alerts alertSettingsJSON `json:"alerts"`
}

type alertSettingsJSON struct {
	CreditLowUSD  *string `json:"credit_low_usd"`
	KeyThresholds []int   `json:"key_thresholds"`
	BudgetMail    bool    `json:"budget_mail"`
	CreditLowMail bool    `json:"credit_low_mail"`
}

// The budgets API sets what the budgets page sets, in dollars and cents, under the same roles:
// who pays sets the limits, the budget and the alerts, every member reads them and chooses their
// own alert e-mails.
func TestAPIBudgets(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner := e.token(t, "developer@example.com", demo.Password)
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/account/invitations",
		map[string]string{"email": "budget-dev@example.com", "role": "developer"}, nil), http.StatusCreated)
	member := acceptInvite(t, e, "budget-dev@example.com")
	memberUser, _ := e.accounts.UserByEmail(ctx, "budget-dev@example.com")

	// A member limit, per week, with thresholds of its own.
	var limit struct {
		UserID      string `json:"user_id"`
		LimitUSD    string `json:"limit_usd"`
		LimitPeriod string `json:"limit_period"`
		Thresholds  []int  `json:"thresholds"`
		LimitPico   int64  `json:"limit_pico"`
	}
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/members/"+memberUser.ID,
		map[string]any{"limit_usd": "25.50", "limit_period": "week", "thresholds": []int{90, 50}}, &limit), http.StatusOK)
	if limit.UserID != memberUser.ID || limit.LimitUSD != "25.50" || limit.LimitPeriod != "week" ||
		!slices.Equal(limit.Thresholds, []int{50, 90}) || limit.LimitPico != 25_500_000_000_000 {
		t.Fatalf("member limit %+v", limit)
	}
	// The account's budget; then the developer member reads both.
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/account", map[string]any{"budget_usd": 500}, nil), http.StatusOK)
	var b budgetsJSON
	wantStatus(t, e.call(t, member, http.MethodGet, "/api/budgets", nil, &b), http.StatusOK)
	if len(b.MemberLimits) != 1 || b.MemberLimits[0].Email != "budget-dev@example.com" || b.MemberLimits[0].RemainingUSD != "25.50" {
		t.Fatalf("member limits %+v", b.MemberLimits)
	}
	if b.AccountBudget == nil || b.AccountBudget.LimitUSD != "500.00" || !slices.Equal(b.AccountBudget.Thresholds, []int{50, 80, 100}) {
		t.Fatalf("account budget %+v", b.AccountBudget)
	}
	if b.Alerts.CreditLowUSD != nil || !slices.Equal(b.Alerts.KeyThresholds, []int{50, 80, 100}) || !b.Alerts.BudgetMail {
		t.Fatalf("alerts before any setting %+v", b.Alerts)
	}
	// The developer member changes none of it.
	wantStatus(t, e.call(t, member, http.MethodPut, "/api/budgets/account", map[string]any{"budget_usd": nil}, nil), http.StatusForbidden)
	wantStatus(t, e.call(t, member, http.MethodPut, "/api/budgets/alerts", map[string]any{"credit_low_usd": "1"}, nil), http.StatusForbidden)

	// Refusals name the field.
	for name, tc := range map[string]struct {
		path  string
		body  map[string]any
		field string
	}{
		"a tenth of a cent":        {"/api/budgets/members/" + memberUser.ID, map[string]any{"limit_usd": "1.001"}, "limit_usd"},
		"no amount":                {"/api/budgets/members/" + memberUser.ID, map[string]any{"limit_period": "day"}, "limit_usd"},
		"a year":                   {"/api/budgets/members/" + memberUser.ID, map[string]any{"limit_usd": "5", "limit_period": "year"}, "limit_period"},
		"a zero budget":            {"/api/budgets/account", map[string]any{"budget_usd": "0"}, "budget_usd"},
		"a threshold of 0":         {"/api/budgets/alerts", map[string]any{"key_thresholds": []int{0, 50}}, "key_thresholds"},
		"a threshold over 100":     {"/api/budgets/alerts", map[string]any{"key_thresholds": []int{50, 120}}, "key_thresholds"},
		"six thresholds":           {"/api/budgets/alerts", map[string]any{"key_thresholds": []int{10, 20, 30, 40, 50, 60}}, "key_thresholds"},
		"a threshold twice":        {"/api/budgets/alerts", map[string]any{"key_thresholds": []int{80, 80, 95}}, "key_thresholds"},
		"a negative balance alert": {"/api/budgets/alerts", map[string]any{"credit_low_usd": "-1"}, "credit_low_usd"},
	} {
		var out apiErrorJSON
		res := e.call(t, owner, http.MethodPut, tc.path, tc.body, &out)
		if res.StatusCode != http.StatusUnprocessableEntity || out.Error.Fields[tc.field] == "" {
			t.Errorf("%s: %d %+v, want 422 beside %s", name, res.StatusCode, out.Error, tc.field)
		}
	}

	// The alerts: a balance alert and the keys' thresholds of the example, 80, 85 and 95 %.
	var a alertSettingsJSON
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/alerts",
		map[string]any{"credit_low_usd": "10", "key_thresholds": []int{95, 80, 85}}, &a), http.StatusOK)
	if a.CreditLowUSD == nil || *a.CreditLowUSD != "10.00" || !slices.Equal(a.KeyThresholds, []int{80, 85, 95}) {
		t.Fatalf("alerts after setting %+v", a)
	}
	// A field left out stays; null removes the balance alert; an empty list is the default again.
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/alerts", map[string]any{"credit_low_usd": nil}, &a), http.StatusOK)
	if a.CreditLowUSD != nil || !slices.Equal(a.KeyThresholds, []int{80, 85, 95}) {
		t.Fatalf("after removing the balance alert %+v", a)
	}
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/alerts", map[string]any{"key_thresholds": []int{}}, &a), http.StatusOK)
	if !slices.Equal(a.KeyThresholds, []int{50, 80, 100}) {
		t.Fatalf("after clearing the thresholds %+v", a)
	}

	// Each member chooses their own e-mails.
	wantStatus(t, e.call(t, member, http.MethodPut, "/api/budgets/subscriptions", map[string]any{"budget_mail": false}, &a), http.StatusOK)
	if a.BudgetMail || !a.CreditLowMail {
		t.Fatalf("the member's choice %+v", a)
	}
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/budgets/alerts", nil, &a), http.StatusOK)
	if !a.BudgetMail {
		t.Fatalf("the owner's choice changed with the member's: %+v", a)
	}

	// Removing: the member limit and the budget, with null.
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/members/"+memberUser.ID, map[string]any{"limit_usd": nil}, nil),
		http.StatusNoContent)
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/account", map[string]any{"budget_usd": nil}, nil), http.StatusNoContent)
	b = budgetsJSON{}
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/budgets", nil, &b), http.StatusOK)
	if len(b.MemberLimits) != 0 || b.AccountBudget != nil {
		t.Fatalf("after removing: %+v", b)
	}
	// A person of another account has no limit here.
	e.otherDeveloper(t)
	otherUser, _ := e.accounts.UserByEmail(ctx, "other-dev@example.com")
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/members/"+otherUser.ID, map[string]any{"limit_usd": "5"}, nil),
		http.StatusNotFound)
}

// The budgets page sets the thresholds of every key's limit with a form of its own, which leaves
// the balance alert as it is; a wrong list is shown beside the field.
func TestBudgetsPageKeyThresholdsForm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := e.token(t, "developer@example.com", demo.Password)
	wantStatus(t, e.call(t, owner, http.MethodPut, "/api/budgets/alerts", map[string]any{"credit_low_usd": "10"}, nil), http.StatusOK)
	b, csrf := loginBrowser(t, e, "developer@example.com")
	doc := getPage(t, b, e.srv.URL+"/budgets")
	if v, _ := doc.Find(`[data-testid="key-thresholds-form"] input[name="key_thresholds"]`).Attr("value"); v != "50, 80, 100" {
		t.Fatalf("the form starts from %q, want the default 50, 80, 100", v)
	}
	res := postForm(t, b, e.srv.URL+"/budgets/alerts", url.Values{"_csrf": {csrf}, "key_thresholds": {"80, 85, 95"}})
	wantStatus(t, res, http.StatusSeeOther)
	var a alertSettingsJSON
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/budgets/alerts", nil, &a), http.StatusOK)
	if !slices.Equal(a.KeyThresholds, []int{80, 85, 95}) || a.CreditLowUSD == nil || *a.CreditLowUSD != "10.00" {
		t.Fatalf("after the form: %+v; want 80, 85, 95 and the balance alert kept", a)
	}
	doc = getPage(t, b, e.srv.URL+"/budgets")
	if v, _ := doc.Find(`input[name="key_thresholds"]`).Attr("value"); v != "80, 85, 95" {
		t.Fatalf("the form shows %q after setting", v)
	}
	for _, bad := range []string{"80, 80", "0, 50", "101", "10, 20, 30, 40, 50, 60", "lots"} {
		res := postForm(t, b, e.srv.URL+"/budgets/alerts", url.Values{"_csrf": {csrf}, "key_thresholds": {bad}})
		wantStatus(t, res, http.StatusUnprocessableEntity)
	}
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/budgets/alerts", nil, &a), http.StatusOK)
	if !slices.Equal(a.KeyThresholds, []int{80, 85, 95}) {
		t.Fatalf("refused forms changed the thresholds to %v", a.KeyThresholds)
	}
}
