package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Message is the body of every request: the event's type, when it happened and its data.
type Message struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"` // RFC 3339, UTC, milliseconds
	Data      json.RawMessage `json:"data"`
}

// claimed is a delivery a worker holds.
type claimed struct {
	id, accountID, eventID, eventType, endpointID, url string
	tries, replays                                     int
	payload                                            []byte
	happened                                           time.Time
	sealed                                             []byte
}

// Run delivers due deliveries until ctx ends: every PollEvery, or at once when woken, it claims
// up to DefaultBatch of them and attempts each, several at a time.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.pollEvery)
	defer t.Stop()
	for {
		n, err := s.DeliverDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("webhooks: delivering", "err", err)
		}
		if n == DefaultBatch {
			continue // there may be more due now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// DeliverDue claims the deliveries due now, attempts each, records what happened, and returns
// how many it attempted.
func (s *Service) DeliverDue(ctx context.Context) (_ int, err error) {
	defer services.Wrap(&err, "webhooks.DeliverDue")
	if !s.sealing {
		return 0, errNoKey
	}
	lease, err := services.NewUUID()
	if err != nil {
		return 0, err
	}
	now := s.now().UTC()
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
			WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until <= $1) AND e.enabled
			ORDER BY d.next_attempt_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED)
		UPDATE webhook_deliveries d SET lease = $3, lease_until = $4
		FROM due, webhook_endpoints e, webhook_events ev
		WHERE d.id = due.id AND e.id = d.endpoint_id AND ev.id = d.event_id
		RETURNING d.id::text, d.account_id::text, ev.id, ev.type, e.id::text, e.url, d.tries, d.replays, ev.payload::text,
			ev.created_at, e.secret_sealed`, now, DefaultBatch, lease, now.Add(s.lease))
	if err != nil {
		return 0, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		var payload string
		err := r.Scan(&c.id, &c.accountID, &c.eventID, &c.eventType, &c.endpointID, &c.url, &c.tries, &c.replays, &payload,
			&c.happened, &c.sealed)
		c.payload = []byte(payload)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(list))
	sem := make(chan struct{}, 8)
	for i, c := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = s.attempt(ctx, lease, c)
		}()
	}
	wg.Wait()
	return len(list), errors.Join(errs...)
}

// outcome is what one attempt got.
type outcome struct {
	status   *int
	body     string
	err      string
	duration time.Duration
}

func (o outcome) delivered() bool {
	return o.err == "" && o.status != nil && *o.status >= 200 && *o.status < 300
}

// attempt sends one claimed delivery and records the attempt and what follows from it.
func (s *Service) attempt(ctx context.Context, lease string, c claimed) error {
	o := s.send(ctx, c)
	if !o.delivered() {
		s.log.Info("webhooks: attempt failed", "delivery", c.id, "endpoint", c.endpointID, "try", c.tries+1, "problem", o.err)
	}
	return s.recordAttempt(ctx, lease, c, o)
}

// send makes the request: the message signed with the endpoint's secret, at the time of sending.
func (s *Service) send(ctx context.Context, c claimed) outcome {
	secret, err := s.open(c.endpointID, c.sealed)
	if err != nil {
		return outcome{err: err.Error()}
	}
	body, err := json.Marshal(Message{Type: c.eventType, Timestamp: c.happened.UTC().Format("2006-01-02T15:04:05.000Z"), Data: c.payload})
	if err != nil {
		return outcome{err: err.Error()}
	}
	at := s.now()
	sig, err := Sign(secret, c.eventID, at, body)
	if err != nil {
		return outcome{err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return outcome{err: "the endpoint's URL cannot be requested: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpumarket-webhooks/1")
	req.Header.Set("webhook-id", c.eventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		o := outcome{duration: time.Since(start), err: err.Error()}
		if errors.Is(err, errPrivateAddress) {
			o.err = "refused: " + errPrivateAddress.Error() + " (events are sent only to public addresses)"
		}
		return o
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, ResponseBodyLimit))
	o := outcome{status: &resp.StatusCode, body: clean(string(head)), duration: time.Since(start)}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		o.err = fmt.Sprintf("answered %d, a redirect to %q: redirects are not followed", resp.StatusCode, resp.Header.Get("Location"))
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		o.err = fmt.Sprintf("answered %d", resp.StatusCode)
	}
	return o
}

// clean makes an answer storable as text: valid UTF-8 without NUL.
func clean(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

// recordAttempt logs the attempt and moves the delivery on: delivered, due again after the
// schedule's wait for this try (with up to a fifth more at random, so that deliveries that
// failed together do not come back together), or failed once the schedule has run out. The
// delivery changes only while the lease is still this worker's; the attempt is logged either way.
func (s *Service) recordAttempt(ctx context.Context, lease string, c claimed, o outcome) error {
	id, err := services.NewUUID()
	if err != nil {
		return err
	}
	now := s.now().UTC()
	status, next, finished := "pending", (*time.Time)(nil), (*time.Time)(nil)
	switch {
	case o.delivered():
		status, finished = "delivered", &now
	case c.tries >= len(s.schedule):
		status, finished = "failed", &now
	default:
		wait := s.schedule[c.tries]
		wait += time.Duration(rand.Int64N(int64(wait)/5 + 1))
		t := now.Add(wait)
		next = &t
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_attempts (id, delivery_id, account_id, url, attempted_at, duration_ms,
				status_code, error, response_body, replay)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, id, c.id, c.accountID, c.url, now, o.duration.Milliseconds(),
			o.status, clip(o.err, 1000), o.body, c.replays > 0); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = $3, tries = tries + 1, next_attempt_at = $4,
				lease = NULL, lease_until = NULL, last_status_code = $5, last_error = $6, updated_at = $7, finished_at = $8
			WHERE id = $1 AND lease = $2`, c.id, lease, status, next, o.status, clip(o.err, 1000), now, finished)
		return err
	})
}
