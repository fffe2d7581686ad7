package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Delivery statuses.
const (
	StatusPending   = "pending"   // due, or being attempted
	StatusDelivered = "delivered" // an attempt got a 2xx
	StatusFailed    = "failed"    // every attempt of the schedule failed
)

// Delivery is one event sent to one endpoint, with its attempts.
type Delivery struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"` // the webhook-id every attempt carries
	EventType      string     `json:"event_type"`
	EndpointID     string     `json:"endpoint_id"`
	EndpointURL    string     `json:"endpoint_url"`
	Status         string     `json:"status"`
	Tries          int        `json:"tries"`   // attempts since it was made or last replayed
	Replays        int        `json:"replays"` // times its account sent it again
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	Attempts       []Attempt  `json:"attempts"` // oldest first
}

// Attempt is one request a delivery made, and what came back.
type Attempt struct {
	AttemptedAt  time.Time `json:"attempted_at"`
	URL          string    `json:"url"`
	StatusCode   *int      `json:"status_code"` // null: no answer
	DurationMs   int64     `json:"duration_ms"`
	Error        string    `json:"error"`
	ResponseBody string    `json:"response_body"` // its first 4 KB
	Replay       bool      `json:"replay"`
}

var errDeliveryNotFound = services.Errorf(services.CodeNotFound, "No such webhook delivery.")

const deliverySelect = `SELECT d.id::text, d.event_id, ev.type, d.endpoint_id::text, e.url, d.status, d.tries, d.replays,
	d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, d.finished_at
	FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id JOIN webhook_endpoints e ON e.id = d.endpoint_id`

func scanDelivery(r pgx.CollectableRow) (Delivery, error) {
	var d Delivery
	err := r.Scan(&d.ID, &d.EventID, &d.EventType, &d.EndpointID, &d.EndpointURL, &d.Status, &d.Tries, &d.Replays,
		&d.NextAttemptAt, &d.LastStatusCode, &d.LastError, &d.CreatedAt, &d.FinishedAt)
	d.Attempts = []Attempt{}
	return d, err
}

// Deliveries are the account's latest deliveries, newest first, at most limit (1 to 100), of one
// endpoint when endpointID is set, each with its attempts.
func (s *Service) Deliveries(ctx context.Context, accountID, endpointID string, limit int) (_ []Delivery, err error) {
	defer services.Wrap(&err, "webhooks.Deliveries")
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	if endpointID != "" && !services.CanonicalUUID(endpointID) {
		return nil, errEndpointNotFound
	}
	rows, err := s.pool.Query(ctx, deliverySelect+` WHERE d.account_id::text = $1 AND ($2 = '' OR d.endpoint_id::text = $2)
		ORDER BY d.created_at DESC, d.id LIMIT $3`, accountID, endpointID, limit)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, err
	}
	return list, s.withAttempts(ctx, list)
}

// Delivery is the account's delivery with its attempts.
func (s *Service) Delivery(ctx context.Context, accountID, deliveryID string) (_ Delivery, err error) {
	defer services.Wrap(&err, "webhooks.Delivery(%s)", deliveryID)
	if !services.CanonicalUUID(deliveryID) {
		return Delivery{}, errDeliveryNotFound
	}
	rows, err := s.pool.Query(ctx, deliverySelect+` WHERE d.id = $1 AND d.account_id::text = $2`, deliveryID, accountID)
	if err != nil {
		return Delivery{}, err
	}
	d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, errDeliveryNotFound
	}
	if err != nil {
		return Delivery{}, err
	}
	list := []Delivery{d}
	err = s.withAttempts(ctx, list)
	return list[0], err
}

func (s *Service) withAttempts(ctx context.Context, list []Delivery) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	at := make(map[string]int, len(list))
	for i, d := range list {
		ids[i], at[d.ID] = d.ID, i
	}
	rows, err := s.pool.Query(ctx, `SELECT delivery_id::text, attempted_at, url, status_code, duration_ms, error, response_body, replay
		FROM webhook_attempts WHERE delivery_id = ANY ($1::uuid[]) ORDER BY attempted_at, id`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var a Attempt
		if err := rows.Scan(&id, &a.AttemptedAt, &a.URL, &a.StatusCode, &a.DurationMs, &a.Error, &a.ResponseBody, &a.Replay); err != nil {
			return err
		}
		list[at[id]].Attempts = append(list[at[id]].Attempts, a)
	}
	return rows.Err()
}

// Replay sends the account's delivery again, now, with the same webhook-id: it is pending
// again with a fresh retry schedule, and its next attempts are logged as replays. A delivery
// still pending is already on its way and is refused.
func (s *Service) Replay(ctx context.Context, accountID, deliveryID string) (_ Delivery, err error) {
	defer services.Wrap(&err, "webhooks.Replay(%s)", deliveryID)
	if !services.CanonicalUUID(deliveryID) {
		return Delivery{}, errDeliveryNotFound
	}
	now := s.now().UTC()
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', tries = 0, replays = replays + 1,
			next_attempt_at = $3, finished_at = NULL, updated_at = $3
		WHERE id = $1 AND account_id::text = $2 AND status <> 'pending'`, deliveryID, accountID, now)
	if err != nil {
		return Delivery{}, err
	}
	d, err := s.Delivery(ctx, accountID, deliveryID)
	if err != nil {
		return Delivery{}, err
	}
	if tag.RowsAffected() == 0 {
		return Delivery{}, services.Errorf(services.CodeConflict, "This delivery is still being sent: wait for it to be delivered or to fail.")
	}
	s.Wake()
	return d, nil
}
