package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

var typePattern = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)+$`)

// Emit records that an event of eventType happened to the account, inside tx, the transaction
// of what happened: it is sent only if that commits. eventID names the event among the account's
// ("invoice.issued:<invoice id>"): a second Emit of the same id records nothing, so that a
// retried caller sends one event. Each endpoint of the account subscribed to the type, and
// enabled, gets a delivery, which the worker sends once tx commits. data is the event's "data",
// as JSON.
func (s *Service) Emit(ctx context.Context, tx pgx.Tx, accountID, eventType, eventID string, data any) (err error) {
	defer services.Wrap(&err, "webhooks.Emit(%s, %s)", eventType, eventID)
	switch {
	case !services.CanonicalUUID(accountID):
		return fmt.Errorf("account id %q is not a uuid", accountID)
	case !typePattern.MatchString(eventType):
		return fmt.Errorf("event type %q is not lower-case words joined by dots", eventType)
	case eventID == "" || len(eventID) > 200:
		return fmt.Errorf("an event id is 1 to 200 characters")
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return s.record(ctx, tx, accountID, eventType, eventID, payload, "")
}

// record stores the event, unless its key is stored already, and its deliveries: to every
// subscribed, enabled endpoint of the account, or only to onlyEndpoint, whatever it subscribes
// to, when it is set.
func (s *Service) record(ctx context.Context, tx pgx.Tx, accountID, eventType, key string, payload []byte, onlyEndpoint string) error {
	now := s.now().UTC()
	id := services.NewTimeOrderedID("msg_", now)
	tag, err := tx.Exec(ctx, `INSERT INTO webhook_events (id, account_id, event_key, type, payload, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, event_key) DO NOTHING`, id, accountID, key, eventType, payload, now)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, account_id, status, next_attempt_at, created_at, updated_at)
		SELECT gen_random_uuid(), $1, e.id, e.account_id, 'pending', $4, $4, $4 FROM webhook_endpoints e
		WHERE e.account_id = $2 AND e.enabled
			AND CASE WHEN $5 = '' THEN cardinality(e.event_types) = 0 OR $3 = ANY (e.event_types) ELSE e.id::text = $5 END`,
		id, accountID, eventType, now, onlyEndpoint)
	return err
}

// SendTest sends the account's endpoint a webhook.test event, whatever it subscribes to, and
// returns the event's id.
func (s *Service) SendTest(ctx context.Context, accountID, endpointID string) (_ string, err error) {
	defer services.Wrap(&err, "webhooks.SendTest(%s)", endpointID)
	if !services.CanonicalUUID(endpointID) {
		return "", errEndpointNotFound
	}
	key, err := services.NewUUID()
	if err != nil {
		return "", err
	}
	key = "test:" + key
	var id string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var enabled bool
		err := tx.QueryRow(ctx, `SELECT enabled FROM webhook_endpoints WHERE id = $1 AND account_id::text = $2`, endpointID, accountID).Scan(&enabled)
		if err == pgx.ErrNoRows {
			return errEndpointNotFound
		}
		if err != nil {
			return err
		}
		if !enabled {
			return services.Errorf(services.CodeConflict, "This endpoint is disabled: enable it to send it a test event.")
		}
		payload, _ := json.Marshal(map[string]string{"message": "A test event from gpumarket.", "endpoint_id": endpointID})
		if err := s.record(ctx, tx, accountID, TypeTest, key, payload, endpointID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT id FROM webhook_events WHERE account_id = $1 AND event_key = $2`, accountID, key).Scan(&id)
	})
	if err != nil {
		return "", err
	}
	s.Wake()
	return id, nil
}

// Wake makes the worker look for due deliveries now rather than at its next round.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
