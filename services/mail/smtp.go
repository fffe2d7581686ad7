package mail

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TLSMode is how a connection to the SMTP server is secured.
type TLSMode string

const (
	TLSImplicit TLSMode = "implicit" // smtps://: TLS from the first byte (port 465)
	TLSStartTLS TLSMode = "starttls" // smtp://: STARTTLS, required; a server without it is refused
	TLSNone     TLSMode = "none"     // smtp://...?tls=none: plain text, for a catcher on this machine
)

// SMTP is where and how the platform sends its e-mail.
type SMTP struct {
	Host     string
	Port     int
	Username string // empty: no authentication
	Password string
	TLS      TLSMode
}

// ParseSMTPURL reads an SMTP server's URL: smtp://user:pass@host:587 (STARTTLS required),
// smtps://user:pass@host:465 (implicit TLS), or smtp://host:1025?tls=none (no TLS, for a local mail
// catcher). The user and password are URL-encoded; without a port, smtp is 587 and smtps 465.
func ParseSMTPURL(raw string) (SMTP, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return SMTP{}, fmt.Errorf("%q is not an SMTP URL: use smtp://user:password@host:587 or smtps://user:password@host:465", redact(raw))
	}
	s := SMTP{Host: u.Hostname()}
	switch u.Scheme {
	case "smtp":
		s.TLS, s.Port = TLSStartTLS, 587
	case "smtps":
		s.TLS, s.Port = TLSImplicit, 465
	default:
		return SMTP{}, fmt.Errorf("%s: the scheme must be smtp (STARTTLS) or smtps (TLS)", withoutUser(u))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return SMTP{}, fmt.Errorf("%s: the port must be a number from 1 to 65535", withoutUser(u))
		}
		s.Port = n
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
	}
	q := u.Query()
	switch tls := q.Get("tls"); {
	case tls == "":
	case tls == "none" && u.Scheme == "smtp":
		s.TLS = TLSNone
	default:
		return SMTP{}, fmt.Errorf("%s: the only option is tls=none, on smtp://, for a mail catcher on this machine", withoutUser(u))
	}
	if len(q) > 1 || (len(q) == 1 && !q.Has("tls")) || u.Path != "" && u.Path != "/" {
		return SMTP{}, fmt.Errorf("%s: give scheme://user:password@host:port, with tls=none as the only option", withoutUser(u))
	}
	return s, nil
}

// String is the URL without its password, for logs.
func (s SMTP) String() string {
	scheme := "smtp"
	if s.TLS == TLSImplicit {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port))}
	if s.Username != "" {
		u.User = url.User(s.Username)
	}
	if s.TLS == TLSNone {
		u.RawQuery = "tls=none"
	}
	return u.String()
}

// withoutUser is the URL without its user and password, for errors.
func withoutUser(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// redact hides what follows the scheme of a URL that could not be parsed, in case it holds a password.
func redact(raw string) string {
	if i := strings.Index(raw, "://"); i >= 0 {
		return raw[:i+3] + "…"
	}
	return "…"
}

// smtpTimeout bounds one connection's dial and each of its commands.
const smtpTimeout = 30 * time.Second
