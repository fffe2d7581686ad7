package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// Sender defaults; SenderConfig overrides each.
const (
	DefaultPollEvery   = 2 * time.Second
	DefaultLease       = 5 * time.Minute
	DefaultMaxAttempts = 10
	DefaultBackoff     = 30 * time.Second // after the first failure; doubled after each next one
	MaxBackoff         = 2 * time.Hour
)

// SenderConfig is what a Sender needs.
type SenderConfig struct {
	Pool *pgxpool.Pool
	SMTP SMTP
	From string // the From header: "GPU Market <billing@gpumarket.example>"
	// PollEvery is how often the outbox is looked at for due messages; Lease how long a claimed
	// message is this sender's alone; MaxAttempts how many sends are tried before the message is
	// given up; Backoff the wait after the first failure. Zero keeps the defaults.
	PollEvery   time.Duration
	Lease       time.Duration
	MaxAttempts int
	Backoff     time.Duration
	Now         func() time.Time // nil means time.Now
	Log         *slog.Logger
}

// Sender sends the outbox's due messages through SMTP. Any number of senders may run on one
// database: each claims a message with a lease (FOR UPDATE SKIP LOCKED, then status 'sending' until
// lease_until), so that two never send the same message at once; a message whose sender stopped
// mid-send is claimed again once its lease ends (docs/email.md, "Sent once").
type Sender struct {
	cfg SenderConfig
	// smtpTimeout bounds each connection; it is under the lease, so a send ends before another
	// sender may take its message.
	smtpTimeout time.Duration
}

// NewSender returns a sender; Run starts it.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Pool == nil || cfg.SMTP.Host == "" {
		return nil, errors.New("mail: a sender needs its pool and an SMTP server")
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := gomail.NewMsg().From(cfg.From); err != nil {
		return nil, fmt.Errorf("mail: the From address %q: %w", cfg.From, err)
	}
	return &Sender{cfg: cfg, smtpTimeout: min(smtpTimeout, cfg.Lease/3)}, nil
}

// Run sends due messages until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.PollEvery)
	defer t.Stop()
	for {
		if _, err := s.SendDue(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("sending e-mail failed; the outbox keeps the messages and the next pass tries again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SendDue claims and sends due messages one by one until none is due, and says how many it
// tried. A failed send is put back for a later attempt, or given up, by the message: the error
// returned is the outbox's own (the database), not a message's.
func (s *Sender) SendDue(ctx context.Context) (tried int, err error) {
	for ctx.Err() == nil {
		c, ok, err := s.claim(ctx)
		if err != nil || !ok {
			return tried, err
		}
		tried++
		if err := s.deliver(ctx, c); err != nil {
			return tried, err
		}
	}
	return tried, ctx.Err()
}

// claimed is a message this sender holds the lease of.
type claimed struct {
	id          int64
	token       string
	attempts    int
	messageID   string
	to          []string
	subject     string
	text, html  string
	attachments []storedAttachment
}

// claim takes the next due message, queued or left mid-send by a sender whose lease ran out, and
// records before any SMTP that this sender is sending it: status 'sending', the attempt counted,
// a lease with a token of this claim's own.
func (s *Sender) claim(ctx context.Context) (c claimed, ok bool, err error) {
	defer services.Wrap(&err, "mail.claim")
	token, err := services.NewUUID()
	if err != nil {
		return c, false, err
	}
	now := s.cfg.Now().UTC()
	var atts []byte
	err = s.cfg.Pool.QueryRow(ctx, `
		UPDATE mail_outbox SET status = 'sending', attempts = attempts + 1, lease_until = $2, lease_token = $3
		WHERE id = (
			SELECT id FROM mail_outbox
			WHERE status IN ('queued', 'sending') AND next_attempt_at <= $1
				AND (status = 'queued' OR lease_until <= $1)
			ORDER BY next_attempt_at, id
			LIMIT 1
			FOR UPDATE SKIP LOCKED)
		RETURNING id, attempts, message_id, recipients, subject, body_text, body_html, attachments`,
		now, now.Add(s.cfg.Lease), token).
		Scan(&c.id, &c.attempts, &c.messageID, &c.to, &c.subject, &c.text, &c.html, &atts)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	c.token = token
	if err := json.Unmarshal(atts, &c.attachments); err != nil {
		return c, false, err
	}
	return c, true, nil
}

// deliver sends a claimed message and records the outcome under its lease. A message over its
// attempts (its last attempt was cut short mid-send) is given up without another send.
func (s *Sender) deliver(ctx context.Context, c claimed) error {
	if c.attempts > s.cfg.MaxAttempts {
		return s.giveUp(ctx, c, fmt.Sprintf("gave up after %d attempts; the last one was interrupted before its outcome was recorded", c.attempts-1))
	}
	sendErr := s.send(ctx, c)
	if ctx.Err() != nil {
		// Stopping: the outcome is unknown, so the message stays claimed and is sent again once the
		// lease ends, under the same Message-ID.
		return ctx.Err()
	}
	if sendErr == nil {
		return s.recordSent(ctx, c)
	}
	if c.attempts >= s.cfg.MaxAttempts {
		return s.giveUp(ctx, c, fmt.Sprintf("gave up after %d attempts: %v", c.attempts, sendErr))
	}
	wait := s.backoff(c.attempts)
	s.cfg.Log.Warn("an e-mail could not be sent; it is tried again later", "message", c.messageID,
		"attempt", c.attempts, "retry_in", wait, "err", sendErr)
	_, err := s.cfg.Pool.Exec(ctx, `
		UPDATE mail_outbox SET status = 'queued', next_attempt_at = $3, last_error = $4, lease_until = NULL, lease_token = NULL
		WHERE id = $1 AND lease_token = $2`,
		c.id, c.token, s.cfg.Now().UTC().Add(wait), truncate(sendErr.Error(), 2000))
	return wrapf(err, "mail: put back message %d", c.id)
}

// backoff is the wait before the attempt after the given one: Backoff, doubled after each
// failure, at most MaxBackoff.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < attempt && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

func (s *Sender) recordSent(ctx context.Context, c claimed) error {
	tag, err := s.cfg.Pool.Exec(ctx, `
		UPDATE mail_outbox SET status = 'sent', sent_at = $3, last_error = '', lease_until = NULL, lease_token = NULL
		WHERE id = $1 AND lease_token = $2`, c.id, c.token, s.cfg.Now().UTC())
	if err != nil {
		return wrapf(err, "mail: record message %d sent", c.id)
	}
	if tag.RowsAffected() == 0 {
		// The lease ran out during the send and another sender claimed the message: it sends it
		// again under the same Message-ID (docs/email.md, "Sent once").
		s.cfg.Log.Warn("an e-mail was sent after its lease ran out; another sender may send it again", "message", c.messageID)
	}
	return nil
}

func (s *Sender) giveUp(ctx context.Context, c claimed, why string) error {
	s.cfg.Log.Error("an e-mail was given up", "message", c.messageID, "to", c.to, "subject", c.subject, "why", why)
	_, err := s.cfg.Pool.Exec(ctx, `
		UPDATE mail_outbox SET status = 'failed', last_error = $3, lease_until = NULL, lease_token = NULL
		WHERE id = $1 AND lease_token = $2`, c.id, c.token, truncate(why, 2000))
	return wrapf(err, "mail: give up message %d", c.id)
}

// send runs one SMTP transaction for the message. Success is the server's final OK to the
// message's data; a failure to say goodbye after it is not a failure to send.
func (s *Sender) send(ctx context.Context, c claimed) error {
	msg, err := s.build(c)
	if err != nil {
		return err
	}
	opts := []gomail.Option{gomail.WithPort(s.cfg.SMTP.Port), gomail.WithTimeout(s.smtpTimeout)}
	switch s.cfg.SMTP.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL(), gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if s.cfg.SMTP.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.cfg.SMTP.Username), gomail.WithPassword(s.cfg.SMTP.Password))
	}
	client, err := gomail.NewClient(s.cfg.SMTP.Host, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Lease/2)
	defer cancel()
	conn, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.cfg.SMTP, err)
	}
	sendErr := client.SendWithSMTPClient(conn, msg)
	if err := client.CloseWithSMTPClient(conn); err != nil && sendErr == nil {
		s.cfg.Log.Debug("closing the SMTP connection after a send failed", "err", err)
	}
	return sendErr
}

// build makes the MIME message: the row's own Message-ID, text with its HTML alternative, the
// attachments.
func (s *Sender) build(c claimed) (*gomail.Msg, error) {
	m := gomail.NewMsg()
	if err := m.From(s.cfg.From); err != nil {
		return nil, err
	}
	if err := m.To(c.to...); err != nil {
		return nil, err
	}
	m.Subject(c.subject)
	m.SetMessageIDWithValue(c.messageID)
	m.SetDate()
	m.SetBodyString(gomail.TypeTextPlain, c.text)
	if c.html != "" {
		m.AddAlternativeString(gomail.TypeTextHTML, c.html)
	}
	for _, a := range c.attachments {
		if err := m.AttachReader(a.Name, bytes.NewReader(a.Data), gomail.WithFileContentType(gomail.ContentType(a.ContentType))); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
