package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// KeyPrefix starts every API key, so that secret scanners and people recognise one.
const KeyPrefix = "gm_"

// APIKey is a key as its owner sees it after creation: never the key itself.
type APIKey struct {
	ID           string      `json:"id"`
	AccountID    string      `json:"account_id"`
	Name         string      `json:"name"`
	Prefix       string      `json:"prefix"` // the first characters of the key, to tell keys apart
	MonthlyLimit *money.Pico `json:"monthly_limit_pico,omitempty"`
	DefaultTier  string      `json:"default_tier,omitempty"`
	CreatedAt    time.Time   `json:"created_at"`
	LastUsedAt   *time.Time  `json:"last_used_at"`
	RevokedAt    *time.Time  `json:"revoked_at,omitempty"`
}

// NewKeyInput creates a key.
type NewKeyInput struct {
	Name         string
	MonthlyLimit *money.Pico // nil: no limit beyond the balance
	DefaultTier  string      // "" means the gateway's default, standard
}

// Validate checks the input.
func (in *NewKeyInput) Validate() error {
	fe := services.FieldErrors{}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > 100 {
		fe.Add("name", "Name the key (up to 100 characters), e.g. after the app that uses it.")
	}
	if in.MonthlyLimit != nil && *in.MonthlyLimit <= 0 {
		fe.Add("monthly_limit_usd", "Set a limit above $0, or leave it empty for none.")
	}
	switch in.DefaultTier {
	case "", "realtime", "standard", "batch":
	default:
		fe.Add("default_tier", "Choose realtime, standard or batch.")
	}
	return fe.Err()
}

// CreateKey makes a key for the user's account and returns it with the secret, which is
// never shown again.
func (s *Service) CreateKey(ctx context.Context, by User, in NewKeyInput) (_ APIKey, secret string, err error) {
	defer services.Wrap(&err, "accounts.CreateKey")
	if err := in.Validate(); err != nil {
		return APIKey{}, "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return APIKey{}, "", err
	}
	secret = KeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	hash := sha256.Sum256([]byte(secret))
	var limit *int64
	if in.MonthlyLimit != nil {
		l := int64(*in.MonthlyLimit)
		limit = &l
	}
	tier := pgtype.Text{String: in.DefaultTier, Valid: in.DefaultTier != ""}
	k := APIKey{AccountID: by.AccountID, Name: in.Name, Prefix: secret[:len(KeyPrefix)+6], MonthlyLimit: in.MonthlyLimit,
		DefaultTier: in.DefaultTier, CreatedAt: s.now().UTC()}
	err = s.pool.QueryRow(ctx, `
		INSERT INTO api_keys (account_id, created_by, name, prefix, key_hash, monthly_limit_pico, default_tier, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		by.AccountID, by.ID, k.Name, k.Prefix, hash[:], limit, tier, k.CreatedAt).Scan(&k.ID)
	return k, secret, err
}

const keyColumns = `id, account_id, name, prefix, monthly_limit_pico::bigint, coalesce(default_tier, ''), created_at, last_used_at, revoked_at`

func scanKey(r pgx.CollectableRow) (APIKey, error) {
	var k APIKey
	var limit *int64
	err := r.Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &limit, &k.DefaultTier, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt)
	if limit != nil {
		l := money.Pico(*limit)
		k.MonthlyLimit = &l
	}
	return k, err
}

// Keys lists the account's keys, live ones first.
func (s *Service) Keys(ctx context.Context, accountID string) (_ []APIKey, err error) {
	defer services.Wrap(&err, "accounts.Keys")
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE account_id = $1
		ORDER BY revoked_at IS NOT NULL, created_at DESC`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanKey)
}

// RevokeKey revokes one of the account's keys; another account's key is not found.
func (s *Service) RevokeKey(ctx context.Context, accountID, id string) (err error) {
	defer services.Wrap(&err, "accounts.RevokeKey(%s)", id)
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = $3 WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL`,
		id, accountID, s.now().UTC())
	if isInvalidText(err) || (err == nil && tag.RowsAffected() == 0) {
		return services.Errorf(services.CodeNotFound, "No such key.")
	}
	return err
}

// KeyBySecret finds the live key a secret proves.
func (s *Service) KeyBySecret(ctx context.Context, secret string) (_ APIKey, err error) {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 100 {
		return APIKey{}, errBadKey
	}
	hash := sha256.Sum256([]byte(secret))
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`, hash[:])
	if err != nil {
		return APIKey{}, err
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, errBadKey
	}
	return k, err
}

var errBadKey = &services.Error{Code: services.CodeUnauthorized, Message: "Invalid API key."}

// TouchKeys records when keys were last used; the gateway calls it in batches.
func (s *Service) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	times := make([]time.Time, 0, len(used))
	for id, t := range used {
		ids = append(ids, id)
		times = append(times, t)
	}
	_, err := s.pool.Exec(ctx, `UPDATE api_keys k SET last_used_at = GREATEST(coalesce(k.last_used_at, u.at), u.at)
		FROM unnest($1::uuid[], $2::timestamptz[]) AS u(id, at) WHERE k.id = u.id`, ids, times)
	return err
}
