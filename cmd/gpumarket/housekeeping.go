package main

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/webhooks"
)

// The periodic cleanup: sent e-mail and finished webhook deliveries older than their retention
// (GPUMARKET_MAIL_RETENTION_DAYS, GPUMARKET_WEBHOOK_LOG_RETENTION_DAYS; 30 days each unless set)
// are deleted, first a minute after start, then every hour. Every web process runs it, beside
// the mail sender and the webhooks' worker; the deletes are idempotent, so two processes at once
// delete each row once.
const (
	housekeepingFirst = time.Minute
	housekeepingEvery = time.Hour
)

// retentions are the retentions in force: the configured ones, else the defaults.
func (c Config) retentions() (sentMail, webhookLog time.Duration) {
	sentMail, webhookLog = c.MailRetention, c.WebhookLogRetention
	if sentMail <= 0 {
		sentMail = mail.DefaultSentRetention // a Config built in code rather than read from the environment
	}
	if webhookLog <= 0 {
		webhookLog = webhooks.DefaultLogRetention
	}
	return sentMail, webhookLog
}

// runHousekeeping cleans up after first, then every every, until ctx ends.
func (p *Platform) runHousekeeping(ctx context.Context, first, every time.Duration) {
	wait := first
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		p.housekeep(ctx, time.Now())
		wait = every
	}
}

// housekeep deletes what is past its retention at now, and logs what it deleted or why it could
// not: the next round tries again.
func (p *Platform) housekeep(ctx context.Context, now time.Time) {
	sentMail, webhookLog := p.cfg.retentions()
	log := p.log.With("part", "housekeeping")
	if n, err := p.outbox.DeleteSent(ctx, now.Add(-sentMail)); err != nil {
		log.Warn("deleting old sent e-mail failed; the next round tries again", "err", err)
	} else if n > 0 {
		log.Info("deleted sent e-mail past its retention", "messages", n, "retention", sentMail.String())
	}
	deliveries, events, err := p.webhooks.DeleteLogBefore(ctx, now.Add(-webhookLog))
	if err != nil {
		log.Warn("deleting the old webhook log failed; the next round tries again", "err", err)
	} else if deliveries > 0 || events > 0 {
		log.Info("deleted webhook deliveries past their retention", "deliveries", deliveries, "events", events,
			"retention", webhookLog.String())
	}
}
