package main

import (
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/mail/catcher"
)

// openMail builds the outbox every process queues e-mail in and, where the web role runs, the
// sender that sends it (started by Run): through GPUMARKET_SMTP_URL, or under `gpumarket dev`
// without one, to a mail catcher of this process's own. A web process with neither keeps the
// e-mail queued, and says so, until a server is set (docs/email.md).
func (p *Platform) openMail() (err error) {
	from := p.cfg.MailFrom
	if from == "" {
		from = DefaultMailFrom // a Config built in code rather than read from the environment
	}
	if p.outbox, err = mail.NewOutbox(p.pool, mail.OutboxConfig{From: from}); err != nil {
		return err
	}
	if !p.cfg.Roles.Web {
		return nil
	}
	smtp := p.cfg.SMTP
	if smtp == nil && p.cfg.MailCatcher {
		if p.mailCatcher, err = catcher.Start(p.log.With("part", "mail catcher")); err != nil {
			return err
		}
		s, err := mail.ParseSMTPURL(p.mailCatcher.SMTPURL())
		if err != nil {
			return err
		}
		smtp = &s
		p.log.Info("e-mail is caught on this machine", "page", p.mailCatcher.WebURL)
	}
	if smtp == nil {
		p.log.Warn("GPUMARKET_SMTP_URL is unset: e-mail (password resets, address checks, invoices) stays queued until it is set")
		return nil
	}
	p.mailSender, err = mail.NewSender(mail.SenderConfig{Pool: p.pool, SMTP: *smtp, From: from,
		Log: p.log.With("part", "mail")})
	return err
}

// MailCatcherURL is the page of the e-mail caught on this machine; "" when it is sent for real.
func (p *Platform) MailCatcherURL() string {
	if p.mailCatcher == nil {
		return ""
	}
	return p.mailCatcher.WebURL
}

// siteURL is the site's address the e-mailed links start with: GPUMARKET_PUBLIC_URL, else where
// this process listens; never a request's Host header.
func (p *Platform) siteURL() string {
	if p.cfg.PublicURL != "" {
		return p.cfg.PublicURL
	}
	return p.URL()
}
