package mail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// Limits on what one message may hold, checked when it is queued so that a sender never meets a
// message it cannot send.
const (
	MaxRecipients      = 50
	MaxKeyLength       = 300
	MaxSubjectLength   = 500
	MaxAttachmentBytes = 10 << 20 // all attachments together
)

// Outbox queues messages in PostgreSQL (mail_outbox) and is what a Sender sends from.
type Outbox struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// domain is the right-hand side of every Message-ID this outbox makes: the From address's domain.
	domain string
}

// OutboxConfig is what an Outbox needs beside its pool.
type OutboxConfig struct {
	// From is the sender's address ("GPU Market <billing@gpumarket.example>"); its domain names the
	// messages' Message-IDs.
	From string
	Now  func() time.Time // nil means time.Now
}

// NewOutbox returns the outbox on pool.
func NewOutbox(pool *pgxpool.Pool, cfg OutboxConfig) (*Outbox, error) {
	from, err := netmail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("mail: the From address %q: %w", cfg.From, err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Outbox{pool: pool, now: cfg.Now, domain: from.Address[strings.LastIndex(from.Address, "@")+1:]}, nil
}

// storedAttachment is an attachment as mail_outbox keeps it (its data base64 in JSON).
type storedAttachment struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Data        []byte `json:"data"`
}

// Enqueue queues m in the caller's transaction: the message exists once tx commits, and never if
// it rolls back, so that an e-mail tells only of what happened. A message whose Key is already
// queued (in any state) is not queued again and Enqueue returns nil: a caller that retries sends
// one e-mail. A bad address or an empty message is an invalid error naming the problem.
func (o *Outbox) Enqueue(ctx context.Context, tx pgx.Tx, m Message) (err error) {
	defer services.Wrap(&err, "mail.Enqueue(%s)", m.Key)
	to, err := m.validate()
	if err != nil {
		return err
	}
	atts := make([]storedAttachment, len(m.Attachments))
	for i, a := range m.Attachments {
		atts[i] = storedAttachment{Name: a.Name, ContentType: a.ContentType, Data: a.Data}
	}
	attJSON, err := json.Marshal(atts)
	if err != nil {
		return err
	}
	now := o.now().UTC()
	_, err = tx.Exec(ctx, `
		INSERT INTO mail_outbox (key, message_id, recipients, subject, body_text, body_html, attachments,
			next_attempt_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
		ON CONFLICT (key) DO NOTHING`,
		m.Key, o.newMessageID(), to, m.Subject, m.Text, m.HTML, attJSON, now)
	return err
}

// newMessageID is a Message-ID unique to one row, which every attempt to send the row repeats; it
// is kept without its angle brackets.
func (o *Outbox) newMessageID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "@" + o.domain
}

// validate checks m and returns its recipients' bare addresses.
func (m Message) validate() ([]string, error) {
	fe := services.FieldErrors{}
	switch {
	case strings.TrimSpace(m.Key) == "":
		fe.Add("key", "A message needs a key naming what it tells of.")
	case len(m.Key) > MaxKeyLength:
		fe.Add("key", fmt.Sprintf("The key is longer than %d characters.", MaxKeyLength))
	}
	var to []string
	switch {
	case len(m.To) == 0:
		fe.Add("to", "A message needs a recipient.")
	case len(m.To) > MaxRecipients:
		fe.Add("to", fmt.Sprintf("A message goes to at most %d recipients.", MaxRecipients))
	}
	for _, raw := range m.To {
		a, err := netmail.ParseAddress(raw)
		if err != nil || !strings.Contains(a.Address[strings.LastIndex(a.Address, "@")+1:], ".") {
			fe.Add("to", fmt.Sprintf("%q is not an e-mail address like name@example.com.", raw))
			continue
		}
		to = append(to, a.Address)
	}
	switch {
	case strings.TrimSpace(m.Subject) == "":
		fe.Add("subject", "A message needs a subject.")
	case len(m.Subject) > MaxSubjectLength || strings.ContainsAny(m.Subject, "\r\n"):
		fe.Add("subject", fmt.Sprintf("The subject must be one line of at most %d characters.", MaxSubjectLength))
	}
	if strings.TrimSpace(m.Text) == "" {
		fe.Add("text", "A message needs a plain-text body.")
	}
	size := 0
	for _, a := range m.Attachments {
		size += len(a.Data)
		if a.Name == "" || strings.ContainsAny(a.Name, "/\\\r\n\"") {
			fe.Add("attachments", fmt.Sprintf("The attachment name %q must be a plain file name.", a.Name))
		}
		if a.ContentType == "" || strings.ContainsAny(a.ContentType, "\r\n") {
			fe.Add("attachments", fmt.Sprintf("The attachment %q needs a content type such as application/pdf.", a.Name))
		}
	}
	if size > MaxAttachmentBytes {
		fe.Add("attachments", fmt.Sprintf("The attachments together exceed %d MB.", MaxAttachmentBytes>>20))
	}
	if len(fe) == 0 {
		return to, nil
	}
	problems := make([]string, 0, len(fe))
	for _, field := range []string{"key", "to", "subject", "text", "attachments"} {
		if p, ok := fe[field]; ok {
			problems = append(problems, p)
		}
	}
	return nil, &services.Error{Code: services.CodeInvalid, Message: strings.Join(problems, " "), Fields: fe}
}
