package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/mail/catcher"
	"github.com/gpumarket/gpumarket/web"
)

// mailEnv is the web test environment with e-mail: an outbox, a sender to a mail catcher, and a
// clock the test moves.
type mailEnv struct {
	*env
	catcher *catcher.Catcher
	sender  *mail.Sender
	offset  *atomic.Int64 // added to the real time, in nanoseconds
}

func setupMail(t *testing.T) *mailEnv {
	t.Helper()
	c, err := catcher.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	offset := new(atomic.Int64)
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var site atomic.Pointer[string]
	var pool *pgxpool.Pool
	e := setupWith(t, func(cfg *web.Config, p *pgxpool.Pool) {
		pool = p
		outbox, err := mail.NewOutbox(p, mail.OutboxConfig{From: "GPU Market <noreply@gpumarket.test>", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Accounts, err = accounts.NewService(p, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)), Hasher: fastHasher,
			Now: now, Outbox: outbox, SiteURL: func() string { return *site.Load() }})
		if err != nil {
			t.Fatal(err)
		}
	})
	site.Store(&e.srv.URL)
	smtp, err := mail.ParseSMTPURL(c.SMTPURL())
	if err != nil {
		t.Fatal(err)
	}
	snd, err := mail.NewSender(mail.SenderConfig{Pool: pool, SMTP: smtp, From: "GPU Market <noreply@gpumarket.test>", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return &mailEnv{env: e, catcher: c, sender: snd, offset: offset}
}

// deliver sends what the outbox holds and returns the links of the received messages to the
// address whose subject holds subject.
func (m *mailEnv) deliver(t *testing.T, to, subject string) []string {
	t.Helper()
	if _, err := m.sender.SendDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	var links []string
	link := regexp.MustCompile(regexp.QuoteMeta(m.srv.URL) + `/[a-z-]+\?token=[A-Za-z0-9_-]+`)
	for _, c := range m.catcher.Messages() {
		p, err := catcher.Parse(c.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p.Subject, subject) && len(p.To) == 1 && p.To[0] == to {
			links = append(links, link.FindString(p.Text))
		}
	}
	return links
}

func TestPasswordResetByEmail(t *testing.T) {
	m := setupMail(t)
	const email = "lisboa@example.com"
	other := browserClient(t) // a session elsewhere, which the reset logs out
	wantStatus(t, postForm(t, other, m.srv.URL+"/login", url.Values{"_csrf": {csrfFromPage(t, other, m.srv.URL+"/login")},
		"email": {email}, "password": {demo.Password}}), http.StatusSeeOther)
	if doc := getPage(t, other, m.srv.URL+"/settings/billing"); doc.Find(`[data-testid="whoami"]`).Length() != 1 {
		t.Fatal("the other session is not logged in")
	}

	b := browserClient(t)
	login := getPage(t, b, m.srv.URL+"/login")
	if href, _ := login.Find(`[data-testid="forgot-password"]`).Attr("href"); href != "/forgot-password" {
		t.Fatalf("the login page links %q for a forgotten password", href)
	}
	csrf := csrfFromPage(t, b, m.srv.URL+"/forgot-password")
	// An address with an account and one without get the same answer; only the first gets mail.
	answers := map[string]string{}
	for _, addr := range []string{email, "nobody-here@example.com"} {
		res, err := b.PostForm(m.srv.URL+"/forgot-password", url.Values{"_csrf": {csrf}, "email": {addr}})
		if err != nil {
			t.Fatal(err)
		}
		doc := parseBody(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("forgot %s: status %d", addr, res.StatusCode)
		}
		answers[addr] = strings.ReplaceAll(doc.Find(`[data-testid="reset-sent"]`).Text(), addr, "ADDRESS")
	}
	if a, b := answers[email], answers["nobody-here@example.com"]; a == "" || a != b {
		t.Errorf("the answers differ or are empty: %q and %q", a, b)
	}
	links := m.deliver(t, email, "Set a new password")
	if len(links) != 1 || links[0] == "" {
		t.Fatalf("reset e-mails with a link: %q, want one", links)
	}
	if got := m.deliver(t, "nobody-here@example.com", ""); len(got) != 0 {
		t.Errorf("an address without an account got %d e-mails", len(got))
	}
	link := links[0]
	var stored int
	token := link[strings.Index(link, "token=")+6:]
	if err := m.pool.QueryRow(context.Background(), `SELECT count(*) FROM user_tokens WHERE token_hash::text LIKE '%' || $1 || '%'`, token).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("the token is stored as it is (%d, %v): only its hash may be", stored, err)
	}

	// The link opens the form; the new password is set, this browser is logged in, the other session is out.
	page := getPage(t, b, link)
	if page.Find(`[data-testid="reset-submit"]`).Length() != 1 {
		t.Fatal("the link's page has no form for the new password")
	}
	csrf, _ = page.Find(`input[name="_csrf"]`).Attr("value")
	const newPassword = "a-brand-new-password"
	res := postForm(t, b, m.srv.URL+"/reset-password", url.Values{"_csrf": {csrf}, "token": {token}, "password": {newPassword}})
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "flash=password-set") {
		t.Fatalf("setting the password: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if doc := getPage(t, b, m.srv.URL+"/settings/billing"); doc.Find(`[data-testid="whoami"]`).Length() != 1 {
		t.Error("this browser is not logged in after setting the password")
	}
	if res, _ := other.Get(m.srv.URL + "/settings/billing"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the other session still opens a page (%d): it must be logged out", res.StatusCode)
	}
	if _, err := m.accounts.Login(context.Background(), accounts.LoginInput{Email: email, Password: demo.Password}); err == nil {
		t.Error("the old password still logs in")
	}
	if _, err := m.accounts.Login(context.Background(), accounts.LoginInput{Email: email, Password: newPassword}); err != nil {
		t.Errorf("the new password does not log in: %v", err)
	}

	// Used twice: refused.
	if doc := getPage(t, browserClient(t), link); doc.Find(`[data-testid="reset-invalid"]`).Length() != 1 {
		t.Error("the used link's page offers the form again")
	}
	res = postForm(t, b, m.srv.URL+"/reset-password", url.Values{"_csrf": {csrf}, "token": {token}, "password": {"yet-another-password"}})
	if res.StatusCode != http.StatusGone {
		t.Errorf("a used link set a password: status %d, want 410", res.StatusCode)
	}

	// Expired: an hour and a minute later the link is refused.
	wantStatus(t, postForm(t, b, m.srv.URL+"/forgot-password", url.Values{"_csrf": {csrf}, "email": {email}}), http.StatusOK)
	links = m.deliver(t, email, "Set a new password")
	if len(links) != 2 {
		t.Fatalf("%d reset e-mails, want 2", len(links))
	}
	m.offset.Store(int64(accounts.PasswordResetTTL + time.Minute))
	if doc := getPage(t, browserClient(t), links[1]); doc.Find(`[data-testid="reset-invalid"]`).Length() != 1 {
		t.Error("an expired link's page offers the form")
	}
	expired := links[1][strings.Index(links[1], "token=")+6:]
	res = postForm(t, b, m.srv.URL+"/reset-password", url.Values{"_csrf": {csrf}, "token": {expired}, "password": {"yet-another-password"}})
	if res.StatusCode != http.StatusGone {
		t.Errorf("an expired link set a password: status %d, want 410", res.StatusCode)
	}
}

func TestSignupVerifiesEmail(t *testing.T) {
	m := setupMail(t)
	const email = "new-verify@example.com"
	b := browserClient(t)
	csrf := csrfFromPage(t, b, m.srv.URL+"/signup")
	wantStatus(t, postForm(t, b, m.srv.URL+"/signup", url.Values{"_csrf": {csrf}, "email": {email},
		"password": {"a-good-password"}, "role": {"developer"}}), http.StatusSeeOther)
	// The site works before the address is proven, with a banner.
	page := getPage(t, b, m.srv.URL+"/keys")
	if page.Find(`[data-testid="verify-banner"]`).Length() != 1 {
		t.Fatal("no banner asks the new user to confirm their address")
	}
	links := m.deliver(t, email, "Confirm your e-mail address")
	if len(links) != 1 || links[0] == "" {
		t.Fatalf("verification e-mails with a link: %q, want one", links)
	}
	res, err := b.Get(links[0])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "flash=email-verified") {
		t.Fatalf("following the link: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if page := getPage(t, b, m.srv.URL+"/keys"); page.Find(`[data-testid="verify-banner"]`).Length() != 0 {
		t.Error("the banner stays after the address is confirmed")
	}
	u, err := m.accounts.UserByEmail(context.Background(), email)
	if err != nil || u.EmailVerifiedAt == nil {
		t.Fatalf("the user's verified_at is not recorded: %+v, %v", u, err)
	}
	if res, _ := b.Get(links[0]); res.StatusCode != http.StatusGone {
		t.Errorf("the link worked twice: status %d", res.StatusCode)
	}
	// Demo users are verified.
	if u, _ := m.accounts.UserByEmail(context.Background(), "lisboa@example.com"); u.EmailVerifiedAt == nil {
		t.Error("a demo user is not verified")
	}
}

func parseBody(t *testing.T, res *http.Response) *goquery.Document {
	t.Helper()
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// accountsWithOutbox is the web tests' accounts service queuing its e-mail in an outbox that no
// sender empties.
func accountsWithOutbox(t *testing.T, pool *pgxpool.Pool) *accounts.Service {
	t.Helper()
	outbox, err := mail.NewOutbox(pool, mail.OutboxConfig{From: "GPU Market <noreply@gpumarket.test>"})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)), Hasher: fastHasher,
		Outbox: outbox, SiteURL: func() string { return "http://gpumarket.test" }})
	if err != nil {
		t.Fatal(err)
	}
	return acc
}
