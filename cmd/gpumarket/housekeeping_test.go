package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/webhooks"
)

// TestRetentionsComeFromTheEnvironment: GPUMARKET_MAIL_RETENTION_DAYS and
// GPUMARKET_WEBHOOK_LOG_RETENTION_DAYS are whole days, 30 unless set; anything else stops the
// start with an error naming the variable.
func TestRetentionsComeFromTheEnvironment(t *testing.T) {
	for _, name := range []string{"GPUMARKET_MAIL_RETENTION_DAYS", "GPUMARKET_WEBHOOK_LOG_RETENTION_DAYS"} {
		get := func(c Config) time.Duration {
			m, w := c.retentions()
			if name == "GPUMARKET_MAIL_RETENTION_DAYS" {
				return m
			}
			return w
		}
		for _, good := range []struct {
			env  string
			want time.Duration
		}{{"", 30 * 24 * time.Hour}, {"1", 24 * time.Hour}, {" 90 ", 90 * 24 * time.Hour}} {
			t.Setenv(name, good.env)
			c, err := configFromEnv()
			if err != nil || get(c) != good.want {
				t.Errorf("%s=%q: %s, %v; want %s", name, good.env, get(c), err, good.want)
			}
		}
		for _, bad := range []string{"0", "-3", "a month", "1.5", "4000", "30d"} {
			t.Setenv(name, bad)
			if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: error %v; want one naming the variable", name, bad, err)
			}
		}
		t.Setenv(name, "")
	}
}

// The platform's cleanup deletes the sent e-mail and the finished webhook deliveries past their
// retentions, each its own, and leaves the rest.
func TestHousekeepingDeletesWhatIsPastItsRetention(t *testing.T) {
	_, dbURL := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", DataDir: t.TempDir(),
		Payments: PaymentsTest, StripeMockBin: stripemocktest.Bin(t), MailFrom: DefaultMailFrom,
		SessionKey: []byte(strings.Repeat("k", 32)), StripeWebhookSecrets: []string{"whsec_test_housekeeping"},
		Roles: Roles{Web: true}, TicketKey: []byte(strings.Repeat("t", 32)), RigKey: []byte(strings.Repeat("r", 32)),
		WebhooksAllowPrivate: true, MailRetention: 10 * 24 * time.Hour}
	ctx := context.Background()
	p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Now()

	// Three sent e-mails, 5, 15 and 40 days old, and a queued one 40 days old: the retention is 10 days.
	for key, age := range map[string]int{"sent-5": 5, "sent-15": 15, "sent-40": 40, "queued-40": 40} {
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			return p.outbox.Enqueue(ctx, tx, mail.Message{Key: key, To: []string{"a@example.com"}, Subject: key, Text: "t"})
		})
		if err != nil {
			t.Fatal(err)
		}
		at := now.Add(-time.Duration(age) * 24 * time.Hour)
		if _, err := p.pool.Exec(ctx, `UPDATE mail_outbox SET created_at = $2,
			status = CASE WHEN key LIKE 'sent-%' THEN 'sent' ELSE status END,
			sent_at = CASE WHEN key LIKE 'sent-%' THEN $2::timestamptz END WHERE key = $1`, key, at); err != nil {
			t.Fatal(err)
		}
	}
	// Two finished webhook deliveries, 15 and 40 days old: the retention is the default 30 days.
	u, err := p.accounts.SignUp(ctx, accounts.SignUpInput{Email: "hooks@example.com", Password: "a-good-password-1",
		Role: accounts.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := p.webhooks.CreateEndpoint(ctx, u.AccountID, u.ID, webhooks.EndpointInput{URL: "http://127.0.0.1:9/hooks"})
	if err != nil {
		t.Fatal(err)
	}
	for _, age := range []int{15, 40} {
		event, err := p.webhooks.SendTest(ctx, u.AccountID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.pool.Exec(ctx, `UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = NULL,
			finished_at = $2 WHERE event_id = $1`, event, now.Add(-time.Duration(age)*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	p.housekeep(ctx, now)
	var mails []string
	rows, err := p.pool.Query(ctx, `SELECT key FROM mail_outbox WHERE key IN ('sent-5', 'sent-15', 'sent-40', 'queued-40') ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	if mails, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if strings.Join(mails, ",") != "queued-40,sent-5" {
		t.Fatalf("e-mail left: %v; want the queued one and the one sent 5 days ago", mails)
	}
	list, err := p.webhooks.Deliveries(ctx, u.AccountID, "", 100)
	if err != nil || len(list) != 1 || now.Sub(*list[0].FinishedAt) > 16*24*time.Hour {
		t.Fatalf("deliveries left: %+v, %v; want the one finished 15 days ago", list, err)
	}
}
