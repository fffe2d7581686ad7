// Package catcher is a mail catcher: a real SMTP server on a free port of 127.0.0.1 that keeps
// every message it accepts in memory, and a small web page listing them. `make run` sends the
// platform's e-mail to it when no SMTP server is configured, and tests read what arrived from it
// (Messages). It accepts any sender and recipient, without TLS or authentication, and is never
// reachable from another machine.
package catcher

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	netmail "net/mail"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/gpumarket/gpumarket/services/mail"
)

// Caught is one message the catcher accepted.
type Caught struct {
	N          int // its place in arrival order, from 1
	ReceivedAt time.Time
	From       string   // the envelope's sender
	To         []string // the envelope's recipients
	Raw        []byte   // the message as it arrived
}

// Catcher is a running mail catcher.
type Catcher struct {
	SMTPAddr string // host:port of the SMTP server
	WebURL   string // the page of caught messages, http://127.0.0.1:port
	smtp     *smtp.Server
	web      *http.Server
	mu       sync.Mutex
	caught   []Caught
}

// maxMessageBytes bounds one message, as a real server would.
const maxMessageBytes = 32 << 20

// Start runs the catcher's SMTP server and web page, each on a free port of 127.0.0.1.
func Start(log *slog.Logger) (*Catcher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sl.Close()
		return nil, err
	}
	c := &Catcher{SMTPAddr: sl.Addr().String(), WebURL: "http://" + wl.Addr().String()}
	c.smtp = smtp.NewServer(backend{c})
	c.smtp.Domain = "localhost"
	c.smtp.MaxMessageBytes = maxMessageBytes
	c.smtp.ReadTimeout, c.smtp.WriteTimeout = time.Minute, time.Minute
	c.web = &http.Server{Handler: c.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := c.smtp.Serve(sl); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			log.Warn("the mail catcher's SMTP server stopped", "err", err)
		}
	}()
	go func() {
		if err := c.web.Serve(wl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the mail catcher's page stopped", "err", err)
		}
	}()
	return c, nil
}

// SMTPURL is the platform's GPUMARKET_SMTP_URL for this catcher.
func (c *Catcher) SMTPURL() string { return "smtp://" + c.SMTPAddr + "?tls=none" }

// Close stops both servers; what was caught is dropped.
func (c *Catcher) Close() {
	_ = c.smtp.Close()
	_ = c.web.Close()
}

// Messages is every message caught so far, in arrival order.
func (c *Catcher) Messages() []Caught {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Caught(nil), c.caught...)
}

func (c *Catcher) keep(m Caught) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.N = len(c.caught) + 1
	c.caught = append(c.caught, m)
}

type backend struct{ c *Catcher }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{c: b.c}, nil }

// session is one SMTP connection's transaction.
type session struct {
	c    *Catcher
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.c.keep(Caught{ReceivedAt: time.Now().UTC(), From: s.from, To: s.to, Raw: raw})
	return nil
}

// Parsed is a caught message read as a person's mail program shows it.
type Parsed struct {
	MessageID   string // without angle brackets
	From        string
	To          []string
	Subject     string
	Text, HTML  string
	Attachments []mail.Attachment
}

// Parse reads a message's headers, its text and HTML bodies and its attachments.
func Parse(raw []byte) (Parsed, error) {
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Parsed{}, err
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		return Parsed{}, err
	}
	p := Parsed{MessageID: strings.Trim(m.Header.Get("Message-Id"), "<> "), From: m.Header.Get("From"), Subject: subject}
	if to, err := m.Header.AddressList("To"); err == nil {
		for _, a := range to {
			p.To = append(p.To, a.Address)
		}
	}
	return p, p.part(m.Header.Get("Content-Type"), m.Header.Get("Content-Transfer-Encoding"), "", m.Body)
}

// part reads one MIME part into p, descending into multiparts.
func (p *Parsed) part(contentType, encoding, disposition string, body io.Reader) error {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mediaType = "text/plain"
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := p.part(part.Header.Get("Content-Type"), part.Header.Get("Content-Transfer-Encoding"),
				part.Header.Get("Content-Disposition"), part); err != nil {
				return err
			}
		}
	}
	data, err := io.ReadAll(decode(encoding, body))
	if err != nil {
		return err
	}
	disp, dparams, _ := mime.ParseMediaType(disposition)
	switch {
	case disp == "attachment" || disp == "inline" && dparams["filename"] != "":
		p.Attachments = append(p.Attachments, mail.Attachment{Name: dparams["filename"], ContentType: mediaType, Data: data})
	case mediaType == "text/plain" && p.Text == "":
		p.Text = string(data)
	case mediaType == "text/html" && p.HTML == "":
		p.HTML = string(data)
	}
	return nil
}

// Find is the first caught message whose parse satisfies match, and how many did.
func (c *Catcher) Find(match func(Parsed) bool) (first Parsed, n int, err error) {
	for _, m := range c.Messages() {
		p, err := Parse(m.Raw)
		if err != nil {
			return Parsed{}, 0, fmt.Errorf("catcher: message %d: %w", m.N, err)
		}
		if match(p) {
			if n == 0 {
				first = p
			}
			n++
		}
	}
	return first, n, nil
}
