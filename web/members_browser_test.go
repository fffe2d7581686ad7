package web_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/demo"
)

// A provider who is also a member of a customer's account opens the account menu in the header,
// at a desktop's width and a phone's, and switches to its provider account with it. The
// screenshots of the members page and the open menu are kept as the test's artifacts
// (go test -artifacts).
func TestTheAccountMenuSwitchesAccountsInTheBrowser(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner, csrf := loginBrowser(t, e, "developer@example.com")
	link := invite(t, e, owner, csrf, "lisboa@example.com", "admin")
	// Ana joins as read-only; Ben's invitation stays pending.
	ana := invite(t, e, owner, csrf, "ana@example.com", "read-only")
	invite(t, e, owner, csrf, "ben@example.com", "billing")
	c := browserClient(t)
	token := csrfFromPage(t, c, e.srv.URL+ana)
	wantStatus(t, postForm(t, c, e.srv.URL+ana, url.Values{"password": {"ana-password-1"}, "_csrf": {token}}), http.StatusSeeOther)
	lisboa, err := e.accounts.UserByEmail(ctx, "lisboa@example.com")
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, e.srv.URL)
	b.open(link)
	b.do("enter the password", fill(`input[name="password"]`, demo.Password))
	b.navigate("accept", click(testID("accept-submit")))
	if got := b.text(testID("account-current")); got != "Acme Labs" {
		t.Fatalf("the account in use reads %q", got)
	}
	dir := t.ArtifactDir()
	shoot := func(name string, width int64) {
		t.Helper()
		b.do("resize to "+name, chromedp.EmulateViewport(width, 900))
		png := browserRun(b, "screenshot "+name, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		name  string
		width int64
	}{{"1280", 1280}, {"390", 390}} {
		b.open("/account/members")
		if n := b.count(testID("member")); n != 3 {
			t.Fatalf("members listed: %d, want the owner, Lisboa and Ana", n)
		}
		shoot("members-"+w.name, w.width)
		b.do("open the account menu", click(`[data-testid="account-menu"] > summary`))
		if n := b.count(testID("account-choice")); n != 2 {
			t.Fatalf("the account menu lists %d accounts, want 2", n)
		}
		// The open menu stays on the screen.
		right := browserRun(b, "measure the menu", chromedp.Evaluate[float64](
			`document.querySelector(".account-menu-body").getBoundingClientRect().right`))
		left := browserRun(b, "measure the menu", chromedp.Evaluate[float64](
			`document.querySelector(".account-menu-body").getBoundingClientRect().left`))
		if left < 0 || right > float64(w.width) {
			t.Errorf("at %d px the open menu spans %.0f to %.0f px", w.width, left, right)
		}
		shoot("account-menu-"+w.name, w.width)
	}

	b.navigate("switch to the provider's account", click(`[data-account="`+lisboa.AccountID+`"] button`))
	if p := b.path(); p != "/home?flash=switched" {
		t.Fatalf("switched to %q", p)
	}
	if got := b.text(testID("account-current")); got != "Garage Cluster Lisboa" {
		t.Fatalf("the account in use reads %q after switching", got)
	}
}
