package web_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
)

// artefactDir is where browser tests keep what a person should look at (screenshots): the
// directory GPUMARKET_TEST_ARTEFACTS names (`make test` sets .data/test-artefacts), else a
// temporary directory of the test's.
func artefactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GPUMARKET_TEST_ARTEFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Each role logs in through the login form, lands on its home with its own panels, the brand
// and the Home link leading back to it, and follows its first task's link: a new customer's
// first step (buy credits), a provider's rigs, finance's drafts to review, an admin's batch
// queue. A screenshot of each home at 1366 px wide is kept in the artefacts' directory.
func TestEachRoleLandsOnItsHomeInTheBrowser(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := e.accounts.SignUp(context.Background(), accounts.SignUpInput{Email: "home-journey@example.com",
		Password: demo.Password, Role: accounts.RoleDeveloper, AccountName: "Journey Labs"}); err != nil {
		t.Fatal(err)
	}
	dir := artefactDir(t)
	b := newBrowser(t, e.srv.URL)
	b.do("a laptop's width", chromedp.EmulateViewport(1366, 900))
	for _, r := range []struct {
		role, email, heading, panel, task, lands string
	}{
		{"developer", "home-journey@example.com", "Journey Labs", "home-steps", "step-credits-link", "/credits"},
		{"provider", "provider@example.com", "Fjord GPU Co-op", "home-rigs", "home-rigs-link", "/provider/rigs"},
		{"finance", "finance@example.com", "Finance", "home-finance", "task-draft-invoices", "/finance/invoices?status=draft"},
		{"admin", "admin@example.com", "Administration", "home-admin", "task-batch-queue", "/admin/batches"},
	} {
		if st := b.open("/login"); st != http.StatusOK {
			t.Fatalf("%s: GET /login: %d", r.role, st)
		}
		b.do("fill the login form as "+r.role, fill("#email", r.email), fill("#password", demo.Password))
		if st := b.navigate("log in as "+r.role, click(testID("login-submit"))); st != http.StatusOK {
			t.Fatalf("%s: after logging in: %d", r.role, st)
		}
		if p := b.path(); p != "/home" {
			t.Fatalf("%s: landed on %s, want /home", r.role, p)
		}
		if h := b.text(testID("home-heading")); h != r.heading {
			t.Errorf("%s: the home's heading reads %q, want %q", r.role, h, r.heading)
		}
		if n := b.count(testID(r.panel)); n != 1 {
			t.Errorf("%s: the home has %d %s panels", r.role, n, r.panel)
		}
		if n := b.count(`header a.brand[href="/home"]`) + b.count(`header nav a.active[href="/home"]`); n != 2 {
			t.Errorf("%s: the brand and an active Home link lead home: %d of 2", r.role, n)
		}
		// The window as tall as the page, so that no scroll bar takes from its 1366 px; what a
		// wider page would put beyond them is cut off, as its reader sees it.
		height := browserRun(b, "measure the page", chromedp.Evaluate[int64](`document.documentElement.scrollHeight`))
		b.do("fit the page", chromedp.EmulateViewport(1366, max(height, 900)))
		png := browserRun(b, "screenshot of the "+r.role+"'s home", chromedp.CaptureScreenshot())
		b.do("back to a laptop's height", chromedp.EmulateViewport(1366, 900))
		if err := os.WriteFile(filepath.Join(dir, "home-"+r.role+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if st := b.navigate(r.role+": follow the first task", click(testID(r.task))); st != http.StatusOK {
			t.Errorf("%s: the first task's page answered %d", r.role, st)
		}
		if p := b.path(); p != r.lands {
			t.Errorf("%s: the first task led to %s, want %s", r.role, p, r.lands)
		}
		b.do("open the account menu", click(`[data-testid="account-menu"] > summary`))
		b.navigate(r.role+" logs out", click(testID("logout")))
		if p := b.path(); !strings.HasPrefix(p, "/?") {
			t.Fatalf("%s: after logging out the browser is at %s", r.role, p)
		}
		if n := b.count(`header a.brand[href="/"]`); n != 1 {
			t.Errorf("a visitor's brand link does not lead to the public start page")
		}
	}
	t.Logf("screenshots of the homes in %s", dir)
}
