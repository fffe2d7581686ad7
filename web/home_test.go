package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/web"
)

// homeText is the trimmed text of the first element with the data-testid on the home.
func homeText(doc *goquery.Document, id string) string {
	return strings.TrimSpace(doc.Find(testID(id)).First().Text())
}

// stepsDone says, for each step the home shows, whether it is ticked: "credits=true key=false …".
func stepsDone(doc *goquery.Document) string {
	var out []string
	doc.Find(`[data-testid="home-steps"] li`).Each(func(_ int, s *goquery.Selection) {
		out = append(out, strings.TrimPrefix(s.AttrOr("data-testid", ""), "step-")+"="+s.AttrOr("data-done", ""))
	})
	return strings.Join(out, " ")
}

// bill meters a request of the customer on the rig now, as the meter does: its usage row, its
// hourly rollup and its ledger transaction (the charge off the customer's credit, the payable
// to the provider, the rest to the platform).
func (w *usageWorld) bill(t *testing.T, customer string, rig catalog.Offering, charge, payable money.Pico) {
	t.Helper()
	ctx := context.Background()
	w.record(t, usageUse{at: time.Now().UTC(), customer: customer, rig: rig, in: 1000, out: 500, charge: charge, payable: payable})
	acct := func(kind ledger.AccountKind, owner string) ledger.LedgerAccountID {
		id, err := w.ledger.AccountFor(ctx, kind, owner)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if _, _, err := w.ledger.Post(ctx, ledger.TransactionInput{Kind: ledger.TransactionUsage, Memo: "Usage: 1 requests",
		Postings: []ledger.Posting{{Account: acct(ledger.AccountCustomerCredit, customer), Amount: -charge},
			{Account: acct(ledger.AccountProviderPayable, rig.ProviderAccountID), Amount: payable},
			{Account: acct(ledger.AccountPlatformRevenue, ""), Amount: charge - payable}}}); err != nil {
		t.Fatal(err)
	}
}

// A new customer's home shows the three steps to a first call, ticked one by one as credits are
// bought, a key is made and the first request is billed, and gone once all three are done; then
// the balance ($25 bought, $3.40 spent: $21.60), this month's spend beside last month's, the
// reports' figures for this month, and the alerts: a budget threshold fired this month (one of
// last month's is not news), the balance under its alert, and a failed auto top-up.
func TestCustomerHomeTicksTheFirstStepsAndShowsTheAccount(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	ctx := context.Background()
	email := "home-dev@example.com"
	u, err := w.accounts.SignUp(ctx, accounts.SignUpInput{Email: email, Password: demo.Password, Role: accounts.RoleDeveloper,
		AccountName: "Home Labs"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := loginBrowser(t, w.env, email)
	home := func() *goquery.Document {
		t.Helper()
		return getPage(t, b, w.srv.URL+"/home")
	}

	doc := home()
	if h := homeText(doc, "home-heading"); h != "Home Labs" {
		t.Errorf("heading %q, want the account's name", h)
	}
	if got := stepsDone(doc); got != "credits=false key=false call=false" {
		t.Fatalf("a new account's steps: %s", got)
	}
	if got := homeText(doc, "home-balance-value"); got != "$0.00" {
		t.Errorf("a new account's balance reads %q", got)
	}
	listed, err := w.catalog.List(ctx, catalog.ListInput{Tier: catalog.TierStandard})
	if err != nil || len(listed) == 0 {
		t.Fatalf("no standard offering listed (%v)", err)
	}
	curl := homeText(doc, "home-curl")
	if !strings.Contains(curl, "curl "+w.srv.URL+"/v1/chat/completions") || !strings.Contains(curl, `"model": "`+listed[0].Model+`"`) {
		t.Errorf("the call to paste reads %q, want the site's /v1/chat/completions and the model %s", curl, listed[0].Model)
	}
	if href := doc.Find(testID("step-credits-link")).AttrOr("href", ""); href != "/credits" {
		t.Errorf("the first step links to %q, want /credits", href)
	}

	// $25 of credits.
	token := w.token(t, email, demo.Password)
	p := w.checkout(t, token, u.AccountID, 25)
	event := paidEvent("evt_home_paid", p)
	wantStatus(t, w.postWebhook(t, event, credits.SignEvent(event, webhookSecret, time.Now())), http.StatusOK)
	doc = home()
	if got := stepsDone(doc); got != "credits=true key=false call=false" {
		t.Fatalf("after buying credits: %s", got)
	}
	if doc.Find(testID("step-credits-link")).Length() != 0 {
		t.Error("a done step still links to its page")
	}
	if got := homeText(doc, "home-balance-value"); got != "$25.00" {
		t.Errorf("after buying $25 the balance reads %q", got)
	}

	// A key.
	wantStatus(t, w.call(t, token, http.MethodPost, "/api/keys", map[string]any{"name": "home laptop"}, nil), http.StatusCreated)
	if got := stepsDone(home()); got != "credits=true key=true call=false" {
		t.Fatalf("after making a key: %s", got)
	}

	// The first request, billed $3.40.
	w.bill(t, u.AccountID, w.fjordRig, 3_400_000_000_000, 1_500_000_000_000)
	doc = home()
	if n := doc.Find(testID("home-steps")).Length(); n != 0 {
		t.Fatalf("the steps still show once all three are done: %s", stepsDone(doc))
	}
	if got := homeText(doc, "home-balance-value"); got != "$21.60" {
		t.Errorf("$25 bought, $3.40 spent: the balance reads %q, want $21.60", got)
	}
	if got := homeText(doc, "home-spend-this"); got != "$3.40" {
		t.Errorf("this month's spend reads %q, want $3.40", got)
	}
	if got := homeText(doc, "home-spend-last"); got != "$0.00" {
		t.Errorf("last month's spend reads %q, want $0.00", got)
	}
	if span := homeText(doc, "home-spend-span"); !strings.HasSuffix(span, "UTC") || !strings.Contains(span, "against") {
		t.Errorf("the spend's span reads %q", span)
	}
	for _, id := range []string{"savings", "baseline", "energy", "carbon", "carbon-baseline"} {
		fig := doc.Find(testID("home-figure-" + id))
		if fig.Length() != 1 || !strings.HasPrefix(fig.Find("dt a").AttrOr("href", ""), "/methodology#") {
			t.Errorf("the figure %s is missing or has no method link", id)
		}
	}
	// The reports' own figures for this month.
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	sav, err := reports.New(w.pool).Savings(ctx, u.AccountID, reports.Query{From: month, To: today.AddDate(0, 0, 1), Group: reports.GroupDay})
	if err != nil {
		t.Fatal(err)
	}
	if got := money.FormatBigCents(sav.Totals.Spend); got != "$3.40" {
		t.Fatalf("the savings report's spend is %s, want $3.40", got)
	}
	// As /reports prints it: the spend and the baseline rounded to the cent, the saving their
	// difference, with its share of the baseline when that is not zero.
	rounded, err := reports.RoundedSaving(sav.Totals.Spend, sav.Totals.Baseline)
	if err != nil {
		t.Fatal(err)
	}
	want := money.FormatCents(rounded.SavedCents)
	if rounded.SavedPct != "" {
		want += " (" + rounded.SavedPct + "%)"
	}
	if got := homeText(doc, "home-figure-savings"); !strings.HasSuffix(got, want) {
		t.Errorf("the savings figure reads %q, want the report's %s", got, want)
	}
	if n := doc.Find(testID("home-alerts")).Length(); n != 0 {
		t.Errorf("no alert is due, yet the home shows alerts: %s", homeText(doc, "home-alerts"))
	}

	// Alerts: the budget's 80% this month (and its 50% of last month, no longer news), the
	// balance under the $25 alert, a declined top-up.
	for _, f := range []struct {
		start     time.Time
		threshold int
	}{{month, 80}, {month.AddDate(0, -1, 0), 50}} {
		if _, err := w.pool.Exec(ctx, `INSERT INTO alert_firings (account_id, rule, period_start, threshold, spend_pico, fired_at)
			VALUES ($1, 'account', $2, $3, 3400000000000, $4)`, u.AccountID, f.start, f.threshold, f.start.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	below := money.Pico(25 * money.PicoPerUSD)
	if err := budgets.NewService(w.pool, w.accounts, nil).SetCreditLowAlert(ctx, u.AccountID, &below); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(ctx, `INSERT INTO topup_attempts (id, account_id, amount_cents, stripe_customer_id,
			payment_method_id, status, failure, next_try_at, created_at, updated_at)
		VALUES (gen_random_uuid(), $1, 2000, 'cus_home', 'pm_home', 'failed', 'Your card was declined.', $2, $2, $2)`,
		u.AccountID, now); err != nil {
		t.Fatal(err)
	}
	doc = home()
	alerts := doc.Find(`[data-testid="home-alerts"] li`)
	if alerts.Length() != 3 {
		t.Fatalf("alerts: %d, want the budget's, the balance's and the top-up's:\n%s", alerts.Length(), homeText(doc, "home-alerts"))
	}
	if got := homeText(doc, "alert-budget-0"); !strings.Contains(got, "80% of its monthly budget") ||
		!strings.Contains(got, "UTC") || !strings.Contains(got, "$3.40 spent") {
		t.Errorf("the budget alert reads %q", got)
	}
	if got := homeText(doc, "alert-low-balance"); !strings.Contains(got, "$21.60") || !strings.Contains(got, "$25.00") {
		t.Errorf("the balance alert reads %q", got)
	}
	if got := homeText(doc, "alert-topup-failed"); !strings.Contains(got, "$20.00") || !strings.Contains(got, "declined") ||
		!strings.Contains(got, "UTC") {
		t.Errorf("the top-up alert reads %q", got)
	}
}

// A member who may not buy or make keys sees the steps without the links it cannot follow.
func TestCustomerHomeLinksOnlyWhatTheMemberMayDo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, err := e.accounts.SignUp(ctx, accounts.SignUpInput{Email: "home-owner@example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper, AccountName: "Read Labs"})
	if err != nil {
		t.Fatal(err)
	}
	ownerBrowser, csrf := loginBrowser(t, e, owner.Email)
	link := invite(t, e, ownerBrowser, csrf, "home-reader@example.com", "read-only")
	c := browserClient(t)
	wantStatus(t, postForm(t, c, e.srv.URL+link, url.Values{"password": {"reader-password-1"},
		"_csrf": {csrfFromPage(t, c, e.srv.URL+link)}}), http.StatusSeeOther)
	doc := getPage(t, c, e.srv.URL+"/home")
	if got := stepsDone(doc); got != "credits=false key=false call=false" {
		t.Fatalf("steps: %s", got)
	}
	if n := doc.Find(testID("step-credits-link")).Length() + doc.Find(testID("step-key-link")).Length(); n != 0 {
		t.Errorf("a read-only member is offered %d links it may not follow", n)
	}
	if got := homeText(doc, "step-credits"); !strings.Contains(got, "billing member") {
		t.Errorf("the credits step reads %q, want who buys them", got)
	}
}

// A provider's home lists its rigs with their state (active, pending, paused), this month's
// earnings, and the next payout: none without a Stripe account, none below the minimum
// payout, else this month's amount and when its statement comes.
func TestProviderHomeShowsRigsEarningsAndTheNextPayout(t *testing.T) {
	t.Parallel()
	w := newUsageWorld(t)
	ctx := context.Background()
	email := "home-provider@example.com"
	u, err := w.accounts.SignUp(ctx, accounts.SignUpInput{Email: email, Password: demo.Password, Role: accounts.RoleProvider,
		AccountName: "Home Compute"})
	if err != nil {
		t.Fatal(err)
	}
	rig := func(model string) catalog.Offering {
		p99 := 300.0
		o, err := w.catalog.Create(ctx, u.AccountID, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 2, Region: "eu", Model: model,
			AskInput: 60_000, AskOutput: 60_000, ClaimedTTFTP99Ms: &p99})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	active, pending, paused := rig("home/active-model"), rig("home/pending-model"), rig("home/paused-model")
	w.qualify(t, active.ID)
	if err := w.catalog.SetStatus(ctx, u.AccountID, paused.ID, catalog.StatusPaused); err != nil {
		t.Fatal(err)
	}
	_ = pending
	b, _ := loginBrowser(t, w.env, email)
	home := func() *goquery.Document {
		t.Helper()
		return getPage(t, b, w.srv.URL+"/home")
	}
	doc := home()
	states := map[string]string{}
	doc.Find(testID("home-rig")).Each(func(_ int, s *goquery.Selection) {
		states[strings.TrimSpace(s.Find("td").First().Text())] = s.AttrOr("data-state", "")
	})
	if states["home/active-model"] != "active" || states["home/pending-model"] != "pending" || states["home/paused-model"] != "paused" {
		t.Errorf("rig states %v", states)
	}
	if got := homeText(doc, "home-earnings-value"); got != "$0.00" {
		t.Errorf("earnings before any traffic %q", got)
	}
	if got := homeText(doc, "home-payout-none"); !strings.Contains(got, "connect a Stripe account") {
		t.Errorf("without a Stripe account the payout reads %q", got)
	}

	a, _, err := w.payouts.Connect(ctx, payoutsConnect(w.env, u, "NO"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.payouts.Observe(ctx, stateComplete(a.StripeAccountID), time.Now()); err != nil {
		t.Fatal(err)
	}
	customer, err := w.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	w.bill(t, customer.AccountID, active, 1_000_000_000_000, 500_000_000_000) // $0.50 earned: below the $1 minimum
	doc = home()
	if got := homeText(doc, "home-earnings-value"); got != "$0.50" {
		t.Errorf("earnings %q, want $0.50", got)
	}
	if got := homeText(doc, "home-payout-none"); !strings.Contains(got, "below the minimum payout of $1.00") {
		t.Errorf("below the minimum the payout reads %q", got)
	}

	w.bill(t, customer.AccountID, active, 20_000_000_000_000, 11_840_000_000_000)
	doc = home()
	if got := homeText(doc, "home-earnings-value"); got != "$12.34" {
		t.Errorf("earnings %q, want $12.34", got)
	}
	if got := homeText(doc, "home-payout-amount"); got != "$12.34 so far" {
		t.Errorf("the next payout reads %q, want $12.34 so far", got)
	}
	if when := homeText(doc, "home-payout-when"); !strings.Contains(when, "UTC") || !strings.Contains(when, "finance approves") {
		t.Errorf("the next payout's time reads %q", when)
	}
}

// Finance's home counts the drafts to review, the flags to resolve and the failed payouts, each
// linking to its page, and says where last month's close stands.
func TestFinanceHomeCountsTheWorkWaiting(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	b, _ := loginBrowser(t, e, "finance@example.com")
	doc := getPage(t, b, e.srv.URL+"/home")
	if h := homeText(doc, "home-heading"); h != "Finance" {
		t.Errorf("heading %q", h)
	}
	if doc.Find(testID("home-steps")).Length()+doc.Find(testID("home-balance")).Length()+doc.Find(testID("home-admin")).Length() != 0 {
		t.Error("finance's home shows a customer's or an admin's panels")
	}
	if got := homeText(doc, "home-close-state"); got != "not closed yet" {
		t.Errorf("before the close: %q", got)
	}
	if got := homeText(doc, "home-close"); !strings.Contains(got, "UTC") {
		t.Errorf("the close reads %q, want when it closes by itself, in UTC", got)
	}

	m := e.closeLastMonth(t)
	invs, err := e.invoicing.Invoices(ctx, invoicing.InvoiceFilter{Status: invoicing.StatusDraft})
	if err != nil {
		t.Fatal(err)
	}
	sts, err := e.invoicing.Statements(ctx, invoicing.StatementFilter{Status: invoicing.StatusDraft})
	if err != nil {
		t.Fatal(err)
	}
	flags, err := e.invoicing.FlaggedRequests(ctx, invoicing.FlagFilter{Unresolved: true})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := e.payouts.List(ctx, payouts.ListFilter{Status: payouts.StatusFailed})
	if err != nil {
		t.Fatal(err)
	}
	if len(invs.Invoices) == 0 || len(sts.Statements) == 0 {
		t.Fatalf("the close drafted %d invoices and %d statements", len(invs.Invoices), len(sts.Statements))
	}
	doc = getPage(t, b, e.srv.URL+"/home")
	for _, c := range []struct {
		id, link string
		n        int
	}{
		{"draft-invoices", "/finance/invoices?status=draft", len(invs.Invoices)},
		{"draft-statements", "/finance/statements?status=draft", len(sts.Statements)},
		{"open-flags", "/finance/flags", len(flags)},
		{"failed-payouts", "/finance/payouts?status=failed", len(failed)},
	} {
		if got := homeText(doc, "task-"+c.id+"-count"); got != strconv.Itoa(c.n) {
			t.Errorf("%s: %s, want %d", c.id, got, c.n)
		}
		if href := doc.Find(testID("task-"+c.id)).AttrOr("href", ""); href != c.link {
			t.Errorf("%s links to %q, want %s", c.id, href, c.link)
		}
		wantStatus(t, getStatus(t, b, e.srv.URL+c.link), http.StatusOK)
	}
	if got := homeText(doc, "home-close-state"); got != "done" {
		t.Errorf("after the close of %s: %q", m.period, got)
	}
	if got := homeText(doc, "home-close"); !strings.Contains(got, m.period.Label()) || !strings.Contains(got, "UTC") {
		t.Errorf("the close reads %q", got)
	}
}

// An administrator's home counts the batch lines waiting, the rigs offline (listed on the home)
// and the discrepancies, each linking to its page, above finance's panel.
func TestAdminHomeShowsTheQueueOfflineRigsAndDiscrepancies(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		cfg.Requests = requestlog.NewRequestLog(pool, metering.GatewayReads{}, nil, nil)
	})
	ctx := context.Background()
	active, err := e.catalog.ListActive(ctx)
	if err != nil || len(active) == 0 {
		t.Fatalf("no active rigs (%v)", err)
	}
	// Every rig not heard from in the last minute goes offline: no agent runs in these tests.
	offline, err := e.catalog.MarkOffline(ctx, time.Now().Add(time.Minute), time.Now())
	if err != nil || len(offline) == 0 {
		t.Fatalf("marked %d offline (%v)", len(offline), err)
	}
	b, _ := loginBrowser(t, e, "admin@example.com")
	doc := getPage(t, b, e.srv.URL+"/home")
	if h := homeText(doc, "home-heading"); h != "Administration" {
		t.Errorf("heading %q", h)
	}
	if got := homeText(doc, "task-batch-queue-count"); got != "0" {
		t.Errorf("batch lines waiting: %s", got)
	}
	if got := homeText(doc, "task-rigs-offline-count"); got != strconv.Itoa(len(offline)) {
		t.Errorf("rigs offline: %s, want %d", got, len(offline))
	}
	if n := doc.Find(testID("home-offline-rig")).Length(); n != len(offline) {
		t.Errorf("the home lists %d offline rigs, want %d", n, len(offline))
	}
	if got := homeText(doc, "task-discrepancies-count"); got != "0" {
		t.Errorf("discrepancies: %s", got)
	}
	for id, link := range map[string]string{"batch-queue": "/admin/batches", "discrepancies": "/admin/discrepancies",
		"rigs-offline": "/home#offline-rigs"} {
		if href := doc.Find(testID("task-"+id)).AttrOr("href", ""); href != link {
			t.Errorf("%s links to %q, want %s", id, href, link)
		}
	}
	if doc.Find(testID("home-finance")).Length() != 1 {
		t.Error("an administrator's home has no finance panel")
	}
}
