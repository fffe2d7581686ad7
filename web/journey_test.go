package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// The journeys drive the pages in a real browser, the way a new user goes through them.

const journeyModel = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

// freshEmail is an address no other test (or earlier run) has used.
func freshEmail(prefix string) string {
	return fmt.Sprintf("%s-%d@example.com", prefix, time.Now().UnixNano())
}

// A new provider signs up, lists a rig, sees it on My rigs, and finds it in the catalog in
// the tier its claimed P99 earns.
func TestJourneyProviderListsRigAndFindsItInCatalog(t *testing.T) {
	e := setup(t)
	b := newBrowser(t, e.srv.URL)
	email := freshEmail("journey-provider")
	const org = "Journey Compute"

	// Sign up as a provider.
	if st := b.open("/signup"); st != http.StatusOK {
		t.Fatalf("GET /signup: status %d", st)
	}
	b.do("fill the signup form",
		click(testID("role-provider")),
		fill("#account_name", org),
		fill("#email", email),
		fill("#password", "a long enough password"),
	)
	if st := b.navigate("submit the signup form", click(testID("signup-submit"))); st != http.StatusOK {
		t.Fatalf("after signup: status %d", st)
	}
	if p := b.path(); p != "/home?flash=signed-up" {
		t.Fatalf("after signup the browser is at %s, want its home", p)
	}
	if who := b.text(testID("whoami")); !strings.Contains(who, email) || !strings.Contains(who, "provider") {
		t.Errorf("whoami = %q, want the email %s and the role provider", who, email)
	}
	if f := b.text(testID("flash")); !strings.Contains(f, "Welcome") {
		t.Errorf("flash after signup = %q, want a welcome", f)
	}
	if got := b.text(testID("nav-rigs")); got != "My rigs" {
		t.Errorf("nav-rigs link = %q, want My rigs", got)
	}
	if st := b.navigate("click My rigs", click(testID("nav-rigs"))); st != http.StatusOK {
		t.Fatalf("My rigs: status %d", st)
	}
	if n := b.count(testID("offering")); n != 0 {
		t.Fatalf("a new provider has %d rigs on My rigs, want 0", n)
	}

	// List a rig.
	if st := b.navigate("click List a rig", click(testID("new-rig"))); st != http.StatusOK {
		t.Fatalf("List a rig page: status %d", st)
	}
	if p := b.path(); p != "/provider/rigs/new" {
		t.Fatalf("List a rig went to %s, want /provider/rigs/new", p)
	}
	if h := b.text("h1"); h != "List a rig" {
		t.Errorf("heading = %q, want List a rig", h)
	}
	form := testID("listing-form")
	b.do("fill the listing form",
		choose(form+` select[name="gpu"]`, "rtx-4090"),
		fill(form+` input[name="gpu_count"]`, "4"),
		choose(form+` select[name="region"]`, "eu"),
		fill(form+` input[name="model"]`, journeyModel),
		fill(form+` input[name="ask_input_usd_per_mtok"]`, "0.123"),
		fill(form+` input[name="ask_output_usd_per_mtok"]`, "0.246"),
		fill(form+` input[name="claimed_ttft_p50_ms"]`, "133.9"),
		fill(form+` input[name="claimed_ttft_p99_ms"]`, "448.04"),
		fill(form+` input[name="claimed_tokens_per_second"]`, "1858.57"),
	)
	if st := b.navigate("submit the listing form", click(testID("listing-submit"))); st != http.StatusOK {
		t.Fatalf("after listing: status %d", st)
	}
	if p := b.path(); p != "/provider/rigs?flash=listed" {
		t.Fatalf("after listing the browser is at %s, want /provider/rigs?flash=listed", p)
	}
	if f := b.text(testID("flash")); f != "Your rig is listed." {
		t.Errorf("flash after listing = %q", f)
	}

	// My rigs shows the one rig, active, in the standard tier.
	if n := b.count(testID("offering")); n != 1 {
		t.Fatalf("My rigs shows %d rigs, want 1", n)
	}
	mine := testID("offering")
	id := browserRun(b, "read the rig's id", chromedp.AttributeValue(chromedp.CSS(mine), "data-offering-id")).Value
	if id == "" {
		t.Fatal("the rig's row on My rigs has no data-offering-id")
	}
	if st := b.text(mine + " " + testID("status")); st != "active" {
		t.Errorf("rig status on My rigs = %q, want active", st)
	}
	if tier := browserRun(b, "read the rig's tier", chromedp.AttributeValue(chromedp.CSS(mine), "data-tier")).Value; tier != "standard" {
		t.Errorf("rig tier on My rigs = %q, want standard (claimed P99 448 ms)", tier)
	}
	if m := b.text(mine + " " + testID("model")); m != journeyModel {
		t.Errorf("rig model on My rigs = %q", m)
	}

	// What was saved is what was typed.
	u, err := e.accounts.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	if u.Role != accounts.RoleProvider {
		t.Errorf("signed-up user's role = %s, want provider", u.Role)
	}
	o, err := e.catalog.Own(context.Background(), u.AccountID, id)
	if err != nil {
		t.Fatalf("the rig %s on My rigs is not the provider's: %v", id, err)
	}
	if o.GPU != "rtx-4090" || o.GPUCount != 4 || o.Region != "eu" || o.Model != journeyModel ||
		o.AskInput.Decimal() != "0.123" || o.AskOutput.Decimal() != "0.246" ||
		o.Tier != catalog.TierStandard || o.Status != catalog.StatusActive || o.ProviderName != org {
		t.Errorf("saved offering = %+v", o)
	}
	for name, c := range map[string]struct {
		got  *float64
		want float64
	}{"P50": {o.ClaimedTTFTP50Ms, 133.9}, "P99": {o.ClaimedTTFTP99Ms, 448.04}, "tokens/s": {o.ClaimedTokensPerSec, 1858.57}} {
		if c.got == nil || *c.got != c.want {
			t.Errorf("saved claimed %s = %v, want %v", name, c.got, c.want)
		}
	}

	// Pending until its agent connects and passes the platform's probes; then the catalog shows it in the
	// standard tier, to everyone.
	if rs := b.text(mine + " " + testID("rig-state")); rs != "Pending: waiting for your agent to connect" {
		t.Errorf("rig state on My rigs = %q, want pending, waiting for the agent", rs)
	}
	e.qualify(t, id)
	if st := b.navigate("click Catalog in the nav", click(`header nav a[href="/catalog"]`)); st != http.StatusOK {
		t.Fatalf("catalog: status %d", st)
	}
	if p := b.path(); p != "/catalog" {
		t.Fatalf("the Catalog link went to %s", p)
	}
	if n := b.count(fmt.Sprintf(`[data-offering-id=%q]`, id)); n != 1 {
		t.Fatalf("the catalog shows the rig %d times, want once", n)
	}
	row := fmt.Sprintf(`%s %s[data-offering-id=%q]`, testID("tier-standard"), testID("offering"), id)
	if n := b.count(row); n != 1 {
		t.Fatalf("the rig is not in the standard tier's section (%d rows match %s)", n, row)
	}
	if hw := b.text(row + " " + testID("hardware")); !strings.Contains(hw, "4x NVIDIA GeForce RTX 4090") {
		t.Errorf("catalog hardware = %q, want 4x NVIDIA GeForce RTX 4090", hw)
	}
	if in, out := b.text(row+" "+testID("ask-input")), b.text(row+" "+testID("ask-output")); in != "$0.123" || out != "$0.246" {
		t.Errorf("catalog asks = %q in, %q out; want $0.123 and $0.246", in, out)
	}
	if m := b.text(row + " " + testID("model")); m != journeyModel {
		t.Errorf("catalog model = %q, want %s", m, journeyModel)
	}
	if tier := browserRun(b, "read the catalog row's tier", chromedp.AttributeValue(chromedp.CSS(row), "data-tier")).Value; tier != "standard" {
		t.Errorf("catalog row tier = %q, want standard", tier)
	}
	// The public table names the provider: the organisation given at signup.
	if prov := b.text(row + " " + testID("provider")); prov != org {
		t.Errorf("catalog provider = %q, want %s", prov, org)
	}
	// Found by its unique ask, the row is the same one.
	byAsk := browserRun(b, "find rows by ask", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[data-testid="offering"]'))
		.filter(r => r.querySelector('[data-testid="ask-input"]').innerText.trim() === "$0.123")
		.map(r => r.closest('[data-testid^="tier-"]').dataset.testid + "/" + r.dataset.offeringId)`))
	if len(byAsk) != 1 || byAsk[0] != "tier-standard/"+id {
		t.Errorf("rows with ask $0.123 = %v, want [tier-standard/%s]", byAsk, id)
	}

	// The standard tier shows its current price.
	prices, err := e.catalog.CurrentPrices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, ok := prices[catalog.TierStandard]
	if !ok {
		t.Fatal("no current price for the standard tier")
	}
	price := b.text(testID("tier-price-standard"))
	if !strings.Contains(price, p.Input.String()) || !strings.Contains(price, p.Output.String()) {
		t.Errorf("standard tier price = %q, want %s input and %s output", price, p.Input, p.Output)
	}
}

// A provider who submits a listing with no model and an ask that is not a number sees both
// problems beside their fields, keeps what was typed, and nothing is listed.
func TestJourneyListingErrorsShowBesideFields(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	email, password := freshEmail("journey-errors"), "a long enough password"
	u, err := e.accounts.SignUp(ctx, accounts.SignUpInput{Email: email, Password: password, Role: accounts.RoleProvider,
		AccountName: "Careless Compute"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e.srv.URL)

	// Log in through the page; a provider lands on its home, and goes to My rigs.
	if st := b.open("/login"); st != http.StatusOK {
		t.Fatalf("GET /login: status %d", st)
	}
	b.do("fill the login form", fill("#email", email), fill("#password", password))
	if st := b.navigate("submit the login form", click(testID("login-submit"))); st != http.StatusOK {
		t.Fatalf("after login: status %d", st)
	}
	if p := b.path(); p != "/home" {
		t.Fatalf("after login the browser is at %s, want /home", p)
	}
	if who := b.text(testID("whoami")); !strings.Contains(who, email) {
		t.Errorf("whoami = %q, want %s", who, email)
	}
	b.navigate("click My rigs", click(testID("nav-rigs")))

	b.navigate("click List a rig", click(testID("new-rig")))
	form := testID("listing-form")
	b.do("fill the listing form with no model and a bad ask",
		fill(form+` input[name="model"]`, ""),
		fill(form+` input[name="ask_input_usd_per_mtok"]`, "cheap"),
		fill(form+` input[name="ask_output_usd_per_mtok"]`, "0.20"),
		fill(form+` input[name="claimed_ttft_p99_ms"]`, "448.04"),
	)
	if st := b.navigate("submit the listing form", click(testID("listing-submit"))); st != http.StatusUnprocessableEntity {
		t.Errorf("invalid listing: status %d, want %d", st, http.StatusUnprocessableEntity)
	}
	if p := b.path(); p != "/provider/rigs" {
		t.Errorf("after the invalid listing the browser is at %s, want the form re-shown at /provider/rigs", p)
	}
	if h := b.text("h1"); h != "List a rig" {
		t.Errorf("heading = %q, want the listing form again", h)
	}
	if msg := b.text(testID("form-error")); !strings.Contains(msg, "correct the highlighted fields") {
		t.Errorf("form error = %q", msg)
	}

	// Each error sits in its field's label, and only those two fields are marked.
	for field, want := range map[string]string{
		"model":                  "Name the model as its repository does",
		"ask_input_usd_per_mtok": "Enter dollars per million input tokens",
	} {
		beside := fmt.Sprintf(`label.field.invalid:has(#%s) %s`, field, testID("error-"+field))
		if n := b.count(beside); n != 1 {
			t.Errorf("error-%s beside its field: %d matches for %s, want 1", field, n, beside)
			continue
		}
		if got := b.text(beside); !strings.Contains(got, want) {
			t.Errorf("error-%s = %q, want it to say %q", field, got, want)
		}
		inv := browserRun(b, "read aria-invalid of "+field, chromedp.AttributeValue(chromedp.CSS("#"+field), "aria-invalid")).Value
		if inv != "true" {
			t.Errorf("#%s aria-invalid = %q, want true", field, inv)
		}
	}
	if errs := browserRun(b, "list field errors", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('[data-testid^="error-"]')).map(e => e.dataset.testid).sort()`)); strings.Join(errs, ",") != "error-ask_input_usd_per_mtok,error-model" {
		t.Errorf("field errors shown = %v, want only error-ask_input_usd_per_mtok and error-model", errs)
	}

	// What was typed is still there to fix.
	for field, want := range map[string]string{
		"ask_input_usd_per_mtok": "cheap", "ask_output_usd_per_mtok": "0.20", "claimed_ttft_p99_ms": "448.04",
		"gpu": "rtx-4090", "gpu_count": "4", "region": "eu",
	} {
		if got := browserRun(b, "read "+field, chromedp.Value(chromedp.CSS("#"+field))); got != want {
			t.Errorf("after the error %s = %q, want %q kept", field, got, want)
		}
	}

	// Nothing was saved.
	own, err := e.catalog.ListOwn(ctx, u.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 0 {
		t.Errorf("the invalid listing saved %d offerings: %+v", len(own), own)
	}
	b.navigate("click My rigs", click(testID("nav-rigs")))
	if n := b.count(testID("offering")); n != 0 {
		t.Errorf("My rigs shows %d rigs after an invalid listing, want 0", n)
	}
}
