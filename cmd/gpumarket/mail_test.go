package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
)

// Under `gpumarket dev` without an SMTP server, a sign-up's e-mail arrives at the platform's own mail
// catcher, listed on its page, its link on the platform's address.
func TestDevPlatformCatchesItsEmail(t *testing.T) {
	_, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(),
		Payments: PaymentsTest, StripeMockBin: stripemocktest.Bin(t), MailCatcher: true, MailFrom: DefaultMailFrom,
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_mail"},
		Roles: Roles{Web: true}, TicketKey: []byte(strings.Repeat("t", 32)), RigKey: []byte(strings.Repeat("r", 32))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if p.MailCatcherURL() == "" {
		t.Fatal("no mail catcher under dev without an SMTP server")
	}
	res, err := http.Post(p.URL()+"/api/auth/signup", "application/json",
		strings.NewReader(`{"email": "caught@example.com", "password": "a-good-password", "role": "developer"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("sign-up: %d", res.StatusCode)
	}
	var page string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if page = pageText(t, p.MailCatcherURL()+"/"); strings.Contains(page, "Confirm your e-mail address") {
			break
		}
	}
	if !strings.Contains(page, "Confirm your e-mail address") || !strings.Contains(page, "caught@example.com") {
		t.Fatalf("the catcher's page does not list the sign-up's e-mail:\n%s", page)
	}
	msg := pageText(t, p.MailCatcherURL()+"/messages/1")
	if !strings.Contains(msg, `<a href="`+p.URL()+`/verify-email?token=`) {
		t.Errorf("the message's page has no link to %s/verify-email:\n%s", p.URL(), msg)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The catcher stops with the platform.
	p.Close()
	closed = true
	if _, err := http.Get(p.MailCatcherURL() + "/"); err == nil {
		t.Error("the mail catcher still answers after the platform closed")
	}
}

func pageText(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func TestMailSettingsComeFromTheEnvironment(t *testing.T) {
	t.Setenv("GPUMARKET_SMTP_URL", "")
	t.Setenv("GPUMARKET_MAIL_FROM", "")
	s, from, err := mailFromEnv()
	if err != nil || s != nil || from != DefaultMailFrom {
		t.Errorf("unset: %v %q %v, want no server and the default From", s, from, err)
	}
	t.Setenv("GPUMARKET_SMTP_URL", "smtps://mailer:s3cret@smtp.example.com")
	if _, _, err := mailFromEnv(); err == nil || !strings.Contains(err.Error(), "GPUMARKET_MAIL_FROM") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a server without a From: %v, want it refused by name without the password", err)
	}
	t.Setenv("GPUMARKET_MAIL_FROM", "GPU Market <billing@example.com>")
	s, from, err = mailFromEnv()
	if err != nil || s == nil || s.Host != "smtp.example.com" || s.Port != 465 || s.Password != "s3cret" || from != "GPU Market <billing@example.com>" {
		t.Errorf("set: %+v %q %v", s, from, err)
	}
	t.Setenv("GPUMARKET_SMTP_URL", "http://s3cret@smtp.example.com")
	if _, _, err := mailFromEnv(); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad URL: %v, want it refused without the password", err)
	}
}
