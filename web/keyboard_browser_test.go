package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
)

// tabTo presses Tab, as a person without a mouse does, until the element that sel matches has
// the focus, and fails the test when it is not reached within a page's worth of stops.
func (b *browser) tabTo(sel string) {
	b.t.Helper()
	const most = 60
	focused := fmt.Sprintf(`document.activeElement !== null && document.activeElement.matches(%q)`, sel)
	for range most {
		if browserRun(b, "is "+sel+" focused", chromedp.Evaluate[bool](focused)) {
			return
		}
		b.do("press Tab", chromedp.KeyEvent("\t"))
	}
	b.t.Fatalf("%s: %s is not reached with %d presses of Tab", b.path(), sel, most)
}

// typeKeys types text into whatever has the focus.
func typeKeys(text string) chromedp.Action[chromedp.Void] { return chromedp.KeyEvent(text) }

// TestFormsWorkFromTheKeyboard logs in, creates a key and revokes it through its confirmation
// with the keyboard alone: Tab to each field, type, Enter to submit. No element is clicked and
// no field is filled by script.
func TestFormsWorkFromTheKeyboard(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := e.accounts.SignUp(context.Background(), accounts.SignUpInput{Email: "keyboard@example.com",
		Password: demo.Password, Role: accounts.RoleDeveloper, AccountName: "Keyboard Labs"}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e.srv.URL)
	b.do("a laptop's width", chromedp.EmulateViewport(1366, 900))

	if st := b.open("/login"); st != http.StatusOK {
		t.Fatalf("GET /login: %d", st)
	}
	b.tabTo("#email")
	b.do("type the e-mail address", typeKeys("keyboard@example.com"))
	b.tabTo("#password")
	b.do("type the password", typeKeys(demo.Password))
	if st := b.navigate("press Enter to log in", typeKeys("\r")); st != http.StatusOK {
		t.Fatalf("logging in from the keyboard: %d", st)
	}
	if p := b.path(); p != "/home" {
		t.Fatalf("logged in from the keyboard onto %s, want /home", p)
	}

	if st := b.open("/keys"); st != http.StatusOK {
		t.Fatalf("GET /keys: %d", st)
	}
	b.tabTo("#name")
	b.do("type the key's name", typeKeys("typed key"))
	if st := b.navigate("press Enter to create the key", typeKeys("\r")); st != http.StatusCreated {
		t.Fatalf("creating a key from the keyboard: %d", st)
	}
	if got := b.text(testID("key-name")); got != "typed key" {
		t.Fatalf("after creating a key from the keyboard the keys page lists %q", got)
	}

	b.tabTo(testID("key-revoke"))
	if st := b.navigate("press Enter on Revoke…", typeKeys("\r")); st != http.StatusOK {
		t.Fatalf("opening the revocation from the keyboard: %d", st)
	}
	b.tabTo(testID("confirm"))
	if st := b.navigate("press Enter to confirm", typeKeys("\r")); st != http.StatusOK {
		t.Fatalf("confirming the revocation from the keyboard: %d", st)
	}
	if got := browserRun(b, "read the key's status", chromedp.Evaluate[string](
		`document.querySelector('[data-testid="key"]').dataset.status`)); got != "revoked" {
		t.Errorf("the key revoked from the keyboard is %q", got)
	}
}
