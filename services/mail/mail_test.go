package mail_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/mail/catcher"
)

const from = "GPU Market <noreply@gpumarket.test>"

func setup(t *testing.T) (*pgxpool.Pool, *mail.Outbox, *catcher.Catcher) {
	t.Helper()
	pool := dbtest.New(t)
	o, err := mail.NewOutbox(pool, mail.OutboxConfig{From: from})
	if err != nil {
		t.Fatal(err)
	}
	c, err := catcher.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return pool, o, c
}

func enqueue(t *testing.T, pool *pgxpool.Pool, o *mail.Outbox, m mail.Message) {
	t.Helper()
	if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return o.Enqueue(context.Background(), tx, m) }); err != nil {
		t.Fatal(err)
	}
}

func sender(t *testing.T, pool *pgxpool.Pool, url string, cfg mail.SenderConfig) *mail.Sender {
	t.Helper()
	s, err := mail.ParseSMTPURL(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pool, cfg.SMTP, cfg.From = pool, s, from
	snd, err := mail.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

type row struct {
	status    string
	attempts  int
	lastError string
	sent      bool
}

func outboxRow(t *testing.T, pool *pgxpool.Pool, key string) row {
	t.Helper()
	var r row
	if err := pool.QueryRow(context.Background(), `SELECT status, attempts, last_error, sent_at IS NOT NULL FROM mail_outbox WHERE key = $1`, key).
		Scan(&r.status, &r.attempts, &r.lastError, &r.sent); err != nil {
		t.Fatal(err)
	}
	return r
}

func caughtWithSubject(t *testing.T, c *catcher.Catcher, subject string) (catcher.Parsed, int) {
	t.Helper()
	p, n, err := c.Find(func(p catcher.Parsed) bool { return p.Subject == subject })
	if err != nil {
		t.Fatal(err)
	}
	return p, n
}

// A message queued in a transaction that rolls back is never sent; one committed is sent once,
// and queuing its key again changes nothing.
func TestEnqueueRollbackAndKey(t *testing.T) {
	pool, o, c := setup(t)
	ctx := context.Background()
	m := mail.Message{Key: "test:once", To: []string{"ada@example.com"}, Subject: "Once", Text: "Hello."}
	errRollback := errors.New("roll back")
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := o.Enqueue(ctx, tx, mail.Message{Key: "test:never", To: m.To, Subject: "Never", Text: "x"}); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	enqueue(t, pool, o, m)
	m.Subject = "Twice"
	enqueue(t, pool, o, m)
	if _, err := sender(t, pool, c.SMTPURL(), mail.SenderConfig{}).SendDue(ctx); err != nil {
		t.Fatal(err)
	}
	if _, n := caughtWithSubject(t, c, "Once"); n != 1 {
		t.Errorf("the message was received %d times, want once", n)
	}
	if got := len(c.Messages()); got != 1 {
		t.Errorf("the catcher got %d messages, want 1 (the rolled-back and the repeated key send none)", got)
	}
	if r := outboxRow(t, pool, "test:once"); r.status != "sent" || r.attempts != 1 || !r.sent {
		t.Errorf("the row is %+v, want sent after one attempt", r)
	}
}

func TestEnqueueRefusesBadMessages(t *testing.T) {
	pool, o, _ := setup(t)
	for name, m := range map[string]mail.Message{
		"bad address": {Key: "k1", To: []string{"not an address"}, Subject: "s", Text: "t"},
		"no domain":   {Key: "k2", To: []string{"ada@localhost"}, Subject: "s", Text: "t"},
		"no one":      {Key: "k3", Subject: "s", Text: "t"},
		"no key":      {To: []string{"ada@example.com"}, Subject: "s", Text: "t"},
		"two lines":   {Key: "k4", To: []string{"ada@example.com"}, Subject: "s\r\nBcc: eve@example.com", Text: "t"},
		"no body":     {Key: "k5", To: []string{"ada@example.com"}, Subject: "s"},
	} {
		err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error { return o.Enqueue(context.Background(), tx, m) })
		if services.ErrorCode(err) != services.CodeInvalid {
			t.Errorf("%s: Enqueue = %v, want an invalid error", name, err)
		}
	}
	var n int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM mail_outbox`).Scan(&n)
	if n != 0 {
		t.Errorf("%d rows queued, want none", n)
	}
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		return o.Enqueue(context.Background(), tx, mail.Message{Key: "k", To: []string{"bob@@example.com"}, Subject: "s", Text: "t"})
	})
	if err == nil || !strings.Contains(err.Error(), `"bob@@example.com" is not an e-mail address`) {
		t.Errorf("the error %v does not name the bad address", err)
	}
}

// hangingServer accepts SMTP connections and never answers: a sender talking to it is stopped
// mid-send, as a process killed before the server took the message.
func hangingServer(t *testing.T) (url string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { _, _ = io.Copy(io.Discard, conn) }()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return "smtp://" + l.Addr().String() + "?tls=none", accepted
}

// A sender stopped mid-send leaves the message claimed; a new sender takes it once the lease
// has run out, and the receiver gets it once, under the row's Message-ID.
func TestSenderStoppedMidSendIsResumedByAnother(t *testing.T) {
	pool, o, c := setup(t)
	enqueue(t, pool, o, mail.Message{Key: "test:crash", To: []string{"ada@example.com"}, Subject: "Survives", Text: "Hello."})
	var messageID string
	if err := pool.QueryRow(context.Background(), `SELECT message_id FROM mail_outbox WHERE key = 'test:crash'`).Scan(&messageID); err != nil {
		t.Fatal(err)
	}

	hang, accepted := hangingServer(t)
	lease := 2 * time.Second
	first := sender(t, pool, hang, mail.SenderConfig{Lease: lease})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = first.SendDue(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for accepted.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if accepted.Load() == 0 {
		t.Fatal("the first sender never connected")
	}
	cancel() // the sender dies mid-send
	<-done
	if r := outboxRow(t, pool, "test:crash"); r.status != "sending" || r.attempts != 1 {
		t.Fatalf("after the first sender stopped the row is %+v, want sending, one attempt", r)
	}

	second := sender(t, pool, c.SMTPURL(), mail.SenderConfig{Lease: lease})
	if n, err := second.SendDue(context.Background()); err != nil || n != 0 {
		t.Fatalf("within the first sender's lease the second tried %d (%v), want none", n, err)
	}
	time.Sleep(lease)
	if n, err := second.SendDue(context.Background()); err != nil || n != 1 {
		t.Fatalf("after the lease the second sender tried %d (%v), want 1", n, err)
	}
	// A third pass, and a restarted sender, send nothing more.
	if n, _ := sender(t, pool, c.SMTPURL(), mail.SenderConfig{}).SendDue(context.Background()); n != 0 {
		t.Errorf("a sender started after the send tried %d messages, want none", n)
	}
	p, n := caughtWithSubject(t, c, "Survives")
	if n != 1 {
		t.Fatalf("the receiver got the message %d times, want exactly once", n)
	}
	if p.MessageID != messageID {
		t.Errorf("the received Message-ID is %q, want the row's %q", p.MessageID, messageID)
	}
	if r := outboxRow(t, pool, "test:crash"); r.status != "sent" || r.attempts != 2 {
		t.Errorf("the row is %+v, want sent on the second attempt", r)
	}
}

// refusing is an SMTP server that takes the envelope and refuses every message's data with a
// temporary failure, as a server that is full or being restarted does.
type refusing struct{ tried *atomic.Int32 }

func (r refusing) NewSession(*smtp.Conn) (smtp.Session, error) { return refusingSession(r), nil }

type refusingSession refusing

func (refusingSession) Reset()                               {}
func (refusingSession) Logout() error                        { return nil }
func (refusingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (refusingSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s refusingSession) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	s.tried.Add(1)
	return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
}

func refusingServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tried := new(atomic.Int32)
	s := smtp.NewServer(refusing{tried})
	s.Domain = "localhost"
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { s.Close() })
	return "smtp://" + l.Addr().String() + "?tls=none", tried
}

// A server that refuses the message puts it back with a backoff and the reason; a working one
// then delivers it once. A message refused on every attempt is given up with why.
func TestSenderRetriesThenDeliversOnce(t *testing.T) {
	pool, o, c := setup(t)
	ctx := context.Background()
	enqueue(t, pool, o, mail.Message{Key: "test:retry", To: []string{"ada@example.com"}, Subject: "Retried", Text: "Hello."})
	bad, tried := refusingServer(t)
	backoff := 300 * time.Millisecond
	failing := sender(t, pool, bad, mail.SenderConfig{Backoff: backoff})
	if n, err := failing.SendDue(ctx); err != nil || n != 1 {
		t.Fatalf("the failing pass tried %d (%v), want 1", n, err)
	}
	r := outboxRow(t, pool, "test:retry")
	if r.status != "queued" || r.attempts != 1 || !strings.Contains(r.lastError, "try again later") || tried.Load() != 1 {
		t.Fatalf("after a refusal the row is %+v (server tried %d), want queued with the server's reason", r, tried.Load())
	}
	working := sender(t, pool, c.SMTPURL(), mail.SenderConfig{Backoff: backoff})
	if n, _ := working.SendDue(ctx); n != 0 {
		t.Fatalf("the working sender tried %d before the backoff ended, want none", n)
	}
	time.Sleep(backoff)
	if n, err := working.SendDue(ctx); err != nil || n != 1 {
		t.Fatalf("after the backoff the working sender tried %d (%v), want 1", n, err)
	}
	if _, n := caughtWithSubject(t, c, "Retried"); n != 1 {
		t.Errorf("the message was received %d times, want once", n)
	}
	if r := outboxRow(t, pool, "test:retry"); r.status != "sent" || r.attempts != 2 || r.lastError != "" {
		t.Errorf("the row is %+v, want sent on the second attempt", r)
	}

	// Given up after MaxAttempts, with the reason.
	enqueue(t, pool, o, mail.Message{Key: "test:give-up", To: []string{"bob@example.com"}, Subject: "Never", Text: "Hello."})
	quick := sender(t, pool, bad, mail.SenderConfig{Backoff: time.Millisecond, MaxAttempts: 3})
	for i := 0; i < 20 && outboxRow(t, pool, "test:give-up").status != "failed"; i++ {
		_, _ = quick.SendDue(ctx)
		time.Sleep(10 * time.Millisecond)
	}
	r = outboxRow(t, pool, "test:give-up")
	if r.status != "failed" || r.attempts != 3 || !strings.Contains(r.lastError, "gave up after 3 attempts") || !strings.Contains(r.lastError, "try again later") {
		t.Errorf("the row is %+v, want failed after 3 attempts with the server's reason", r)
	}
}

func TestParseSMTPURL(t *testing.T) {
	for raw, want := range map[string]mail.SMTP{
		"smtp://u:p%40ss@mail.example.com": {Host: "mail.example.com", Port: 587, Username: "u", Password: "p@ss", TLS: mail.TLSStartTLS},
		"smtps://u:p@mail.example.com":     {Host: "mail.example.com", Port: 465, Username: "u", Password: "p", TLS: mail.TLSImplicit},
		"smtp://127.0.0.1:1025?tls=none":   {Host: "127.0.0.1", Port: 1025, TLS: mail.TLSNone},
		"smtps://mail.example.com:2465":    {Host: "mail.example.com", Port: 2465, TLS: mail.TLSImplicit},
	} {
		got, err := mail.ParseSMTPURL(raw)
		if err != nil || got != want {
			t.Errorf("ParseSMTPURL(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"http://mail.example.com", "smtp://", "smtps://h?tls=none", "smtp://h:99999", "smtp://h?x=1", "mail.example.com:25"} {
		if _, err := mail.ParseSMTPURL(raw); err == nil {
			t.Errorf("ParseSMTPURL(%q) accepted it", raw)
		}
	}
	if _, err := mail.ParseSMTPURL("ftp://u:secret@h"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("the error %v shows the password", err)
	}
}
