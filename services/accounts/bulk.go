package accounts

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Bulk loads: what the benchmarks (cmd/closebench, cmd/meterbench, cmd/reportsbench) and data loads use to write
// accounts, their people and their API keys by the thousand, with the ids the caller chose, by COPY. A load checks
// nothing and writes nothing else: no membership, role grant, audit entry or e-mail.

// Loader is what a bulk load writes through: the pool, or a caller's transaction.
type Loader = services.Loader

// LoadedAccount is an account as CopyAccounts writes it.
type LoadedAccount struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// CopyAccounts writes the accounts by one COPY, each of the default kind (customer), and returns how many it wrote.
func CopyAccounts(ctx context.Context, db Loader, accounts []LoadedAccount) (_ int64, err error) {
	defer services.Wrap(&err, "accounts.CopyAccounts")
	return db.CopyFrom(ctx, pgx.Identifier{"accounts"}, []string{"id", "name", "created_at"},
		pgx.CopyFromSlice(len(accounts), func(i int) ([]any, error) {
			a := &accounts[i]
			return []any{a.ID, a.Name, a.CreatedAt}, nil
		}))
}

// LoadedUser is a person as CopyUsers writes it.
type LoadedUser struct {
	ID, AccountID string
	Email         string // lower case
	Role          Role
	CreatedAt     time.Time
}

// CopyUsers writes the people by one COPY and returns how many it wrote. None has a password to log in with (their
// hash is no hash), nor a verified e-mail; each writes its moments in UTC.
func CopyUsers(ctx context.Context, db Loader, users []LoadedUser) (_ int64, err error) {
	defer services.Wrap(&err, "accounts.CopyUsers")
	return db.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "account_id", "email", "password_hash", "role", "created_at"},
		pgx.CopyFromSlice(len(users), func(i int) ([]any, error) {
			u := &users[i]
			return []any{u.ID, u.AccountID, u.Email, "x", string(u.Role), u.CreatedAt}, nil
		}))
}

// LoadedKey is an API key as CopyAPIKeys writes it, with the secret it is used with.
type LoadedKey struct {
	ID, AccountID string
	CreatedBy     string // the person who created it
	Name, Prefix  string
	Secret        string
	CreatedAt     time.Time
}

// CopyAPIKeys writes the keys by one COPY, each keeping the hash of its secret as CreateKey does, without a limit,
// a default tier or a preference for low carbon, and returns how many it wrote.
func CopyAPIKeys(ctx context.Context, db Loader, keys []LoadedKey) (_ int64, err error) {
	defer services.Wrap(&err, "accounts.CopyAPIKeys")
	return db.CopyFrom(ctx, pgx.Identifier{"api_keys"}, []string{"id", "account_id", "created_by", "name", "prefix", "key_hash", "created_at"},
		pgx.CopyFromSlice(len(keys), func(i int) ([]any, error) {
			k := &keys[i]
			hash := sha256.Sum256([]byte(k.Secret))
			return []any{k.ID, k.AccountID, k.CreatedBy, k.Name, k.Prefix, hash[:], k.CreatedAt}, nil
		}))
}
