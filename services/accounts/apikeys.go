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
	"github.com/gpumarket/gpumarket/services/periods"
)

// KeyPrefix starts every API key, so that secret scanners and people recognise one.
const KeyPrefix = "gm_"

// MaxLiveKeys is the most live (unrevoked) API keys an account may hold: enough for every app
// and environment, few enough that a script gone wrong cannot fill the table. See
// docs/web-security.md ("Caps per account").
const MaxLiveKeys = 100

// APIKey is a key as its owner sees it after creation: never the key itself.
type APIKey struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	Prefix    string `json:"prefix"` // the first characters of the key, to tell keys apart
	// Limit is what the key may spend per LimitPeriod (docs/budgets.md); nil for no limit.
	Limit       *money.Pico    `json:"limit_pico,omitempty"`
	LimitPeriod periods.Period `json:"limit_period"`
	DefaultTier string         `json:"default_tier,omitempty"`
	// CreatedBy is the person who created the key: a member limit holds the keys they created.
	CreatedBy string `json:"created_by"`
	// PreferCarbon makes the gateway route the key's requests to the lowest-carbon offering that
	// keeps the tier's promise, unless a request asks otherwise.
	PreferCarbon bool       `json:"prefer_carbon"`
	CreatedAt    time.Time  `json:"created_at"`
	LastUsedAt   *time.Time `json:"last_used_at"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
}

// NewKeyInput creates a key.
type NewKeyInput struct {
	Name         string
	Limit        *money.Pico    // nil: no limit beyond the balance
	LimitPeriod  periods.Period // "" is a month
	DefaultTier  string         // "" means the gateway's default, standard
	PreferCarbon bool           // route by estimated carbon rather than by price
}

// Validate checks the input.
func (in *NewKeyInput) Validate() error {
	fe := services.FieldErrors{}
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > 100 {
		fe.Add("name", "Name the key (up to 100 characters), e.g. after the app that uses it.")
	}
	if in.Limit != nil && *in.Limit <= 0 {
		fe.Add("limit_usd", "Set a limit above $0, or leave it empty for none.")
	}
	if in.LimitPeriod == "" {
		in.LimitPeriod = periods.Month
	} else if !in.LimitPeriod.Valid() {
		fe.Add("limit_period", "Choose day, week or month.")
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
	if in.Limit != nil {
		l := int64(*in.Limit)
		limit = &l
	}
	tier := pgtype.Text{String: in.DefaultTier, Valid: in.DefaultTier != ""}
	k := APIKey{AccountID: by.AccountID, Name: in.Name, Prefix: secret[:len(KeyPrefix)+6], Limit: in.Limit,
		LimitPeriod: in.LimitPeriod, DefaultTier: in.DefaultTier, PreferCarbon: in.PreferCarbon, CreatedAt: s.now().UTC(),
		CreatedBy: by.ID}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The account's row is the lock that makes counting and inserting one step: two
		// requests at once cannot both take the last place.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, by.AccountID); err != nil {
			return err
		}
		var live int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL`,
			by.AccountID).Scan(&live); err != nil {
			return err
		}
		if live >= MaxLiveKeys {
			return services.Errorf(services.CodeConflict,
				"This account already has %d live API keys, the most it may hold. Revoke a key you no longer use, then create this one.",
				MaxLiveKeys)
		}
		return tx.QueryRow(ctx, `
			INSERT INTO api_keys (account_id, created_by, name, prefix, key_hash, limit_pico, default_tier, created_at,
				prefer_carbon, limit_period)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
			by.AccountID, by.ID, k.Name, k.Prefix, hash[:], limit, tier, k.CreatedAt, k.PreferCarbon, string(k.LimitPeriod)).Scan(&k.ID)
	})
	if err != nil {
		return APIKey{}, "", err
	}
	return k, secret, nil
}

const keyColumns = `id, account_id, name, prefix, limit_pico::bigint, coalesce(default_tier, ''), created_at, last_used_at, revoked_at,
	prefer_carbon, limit_period, created_by`

func scanKey(r pgx.CollectableRow) (APIKey, error) {
	var k APIKey
	var limit *int64
	err := r.Scan(&k.ID, &k.AccountID, &k.Name, &k.Prefix, &limit, &k.DefaultTier, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &k.PreferCarbon,
		&k.LimitPeriod, &k.CreatedBy)
	if limit != nil {
		l := money.Pico(*limit)
		k.Limit = &l
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
		return errNoKey
	}
	return err
}

// SetKeyLimit changes the spending limit of one of the account's live keys and its period (nil:
// no limit beyond the balance; the period is kept for when a limit is set again) and returns
// the key; another account's key, or a revoked one, is not found. The gateways learn of it when the web layer tells them (see
// docs/web-security.md, "Revoked and changed keys").
func (s *Service) SetKeyLimit(ctx context.Context, accountID, id string, limit *money.Pico, period periods.Period) (_ APIKey, err error) {
	defer services.Wrap(&err, "accounts.SetKeyLimit(%s)", id)
	if limit != nil && *limit <= 0 {
		return APIKey{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"limit_usd": "Set a limit above $0, or leave it empty for none."}}
	}
	if !period.Valid() {
		return APIKey{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"limit_period": "Choose day, week or month."}}
	}
	var pico *int64
	if limit != nil {
		l := int64(*limit)
		pico = &l
	}
	rows, err := s.pool.Query(ctx, `UPDATE api_keys SET limit_pico = $3, limit_period = $4
		WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL RETURNING `+keyColumns, id, accountID, pico, string(period))
	if err != nil {
		if isInvalidText(err) {
			return APIKey{}, errNoKey
		}
		return APIKey{}, err
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanKey)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return APIKey{}, errNoKey
	}
	return k, err
}

var errNoKey = services.Errorf(services.CodeNotFound, "No such key.")

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

// LimitedKeys lists the live keys that have a spending limit, of every account: the keys whose
// spend the budget alerts watch.
func (s *Service) LimitedKeys(ctx context.Context) (_ []APIKey, err error) {
	defer services.Wrap(&err, "accounts.LimitedKeys")
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE limit_pico IS NOT NULL AND revoked_at IS NULL`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanKey)
}
