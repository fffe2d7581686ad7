package webhooks

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Endpoint is where an account's events go, as its owner sees it: never the secret.
type Endpoint struct {
	ID          string `json:"id"`
	URL         string `json:"url"`
	Description string `json:"description"`
	// EventTypes are the types it receives; empty: every type.
	EventTypes []string  `json:"event_types"`
	SecretHint string    `json:"secret_hint"` // "whsec_AbCd", the start of the secret
	Enabled    bool      `json:"enabled"`
	CreatedBy  string    `json:"created_by"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// EndpointInput is a new endpoint.
type EndpointInput struct {
	URL         string   `json:"url"`
	Description string   `json:"description"`
	EventTypes  []string `json:"event_types"` // empty: every type
}

var errEndpointNotFound = services.Errorf(services.CodeNotFound, "No such webhook endpoint.")

// validate checks the input and returns it cleaned: the URL trimmed, the types without repeats.
func (s *Service) validate(ctx context.Context, in EndpointInput) (EndpointInput, error) {
	f := services.FieldErrors{}
	in.URL = strings.TrimSpace(in.URL)
	in.Description = strings.TrimSpace(in.Description)
	u, err := url.Parse(in.URL)
	switch {
	case in.URL == "":
		f.Add("url", "Enter the URL events are sent to.")
	case len(in.URL) > 2000:
		f.Add("url", "A URL is at most 2000 characters.")
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		f.Add("url", "Enter a full URL, such as https://example.com/webhooks.")
	case u.User != nil:
		f.Add("url", "A URL with a user name or password in it is not accepted: check the signature instead.")
	case u.Fragment != "":
		f.Add("url", "A URL with a #fragment is not accepted.")
	case u.Scheme != "https" && !s.allowPrivate:
		f.Add("url", "Use an https:// URL.")
	case !s.allowPrivate && (strings.EqualFold(u.Hostname(), "localhost") || !resolvesPublic(ctx, u.Hostname())):
		f.Add("url", "This address is not on the public internet: events are sent only to public addresses.")
	}
	if len(in.Description) > 200 {
		f.Add("description", "A description is at most 200 characters.")
	}
	var types []string
	for _, t := range in.EventTypes {
		t = strings.TrimSpace(t)
		if t == "" || slices.Contains(types, t) {
			continue
		}
		if !knownType(t) {
			f.Add("event_types", "Unknown event type "+t+".")
		}
		types = append(types, t)
	}
	in.EventTypes = types
	return in, f.Err()
}

// CreateEndpoint adds an endpoint to the account, made by the user, and returns it with its
// signing secret: the only time the secret is shown.
func (s *Service) CreateEndpoint(ctx context.Context, accountID, userID string, in EndpointInput) (_ Endpoint, secret string, err error) {
	defer services.Wrap(&err, "webhooks.CreateEndpoint")
	if !s.sealing {
		return Endpoint{}, "", errNoKey
	}
	if !services.CanonicalUUID(accountID) || !services.CanonicalUUID(userID) {
		return Endpoint{}, "", services.Errorf(services.CodeForbidden, "Webhooks belong to an account.")
	}
	if in, err = s.validate(ctx, in); err != nil {
		return Endpoint{}, "", err
	}
	id, err := services.NewUUID()
	if err != nil {
		return Endpoint{}, "", err
	}
	secret = newSecret()
	now := s.now().UTC()
	var e Endpoint
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The account's endpoints are counted under a lock on the account's first, so that two
		// additions at once cannot pass the limit together.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))`, accountID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints WHERE account_id = $1`, accountID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxEndpoints {
			return services.Errorf(services.CodeConflict, "An account has at most %d webhook endpoints: delete one first.", MaxEndpoints)
		}
		rows, err := tx.Query(ctx, `INSERT INTO webhook_endpoints (id, account_id, url, description, event_types, secret_sealed,
				secret_hint, enabled, created_by, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, true, $8, $9, $9) RETURNING `+endpointColumns,
			id, accountID, in.URL, in.Description, nonNil(in.EventTypes), s.seal(id, secret), secretHint(secret), userID, now)
		if err != nil {
			return err
		}
		e, err = pgx.CollectExactlyOneRow(rows, scanEndpoint)
		return err
	})
	if err != nil {
		return Endpoint{}, "", err
	}
	return e, secret, nil
}

const endpointColumns = `id::text, url, description, event_types, secret_hint, enabled, created_by::text, created_at, updated_at`

func scanEndpoint(r pgx.CollectableRow) (Endpoint, error) {
	var e Endpoint
	err := r.Scan(&e.ID, &e.URL, &e.Description, &e.EventTypes, &e.SecretHint, &e.Enabled, &e.CreatedBy, &e.CreatedAt, &e.UpdatedAt)
	e.EventTypes = nonNil(e.EventTypes)
	return e, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Endpoints are the account's endpoints, oldest first.
func (s *Service) Endpoints(ctx context.Context, accountID string) (_ []Endpoint, err error) {
	defer services.Wrap(&err, "webhooks.Endpoints")
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE account_id::text = $1 ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanEndpoint)
}

// SetEnabled turns the account's endpoint on or off. A disabled endpoint is made no new
// deliveries, and its pending ones wait until it is enabled again.
func (s *Service) SetEnabled(ctx context.Context, accountID, endpointID string, enabled bool) (_ Endpoint, err error) {
	defer services.Wrap(&err, "webhooks.SetEnabled(%s)", endpointID)
	if !services.CanonicalUUID(endpointID) {
		return Endpoint{}, errEndpointNotFound
	}
	rows, err := s.pool.Query(ctx, `UPDATE webhook_endpoints SET enabled = $3, updated_at = $4
		WHERE id = $1 AND account_id::text = $2 RETURNING `+endpointColumns, endpointID, accountID, enabled, s.now().UTC())
	if err != nil {
		return Endpoint{}, err
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, errEndpointNotFound
	}
	if enabled {
		s.Wake()
	}
	return e, err
}

// DeleteEndpoint removes the account's endpoint with its deliveries and their log.
func (s *Service) DeleteEndpoint(ctx context.Context, accountID, endpointID string) (err error) {
	defer services.Wrap(&err, "webhooks.DeleteEndpoint(%s)", endpointID)
	if !services.CanonicalUUID(endpointID) {
		return errEndpointNotFound
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1 AND account_id::text = $2`, endpointID, accountID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errEndpointNotFound
	}
	return nil
}
