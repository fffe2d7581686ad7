-- +goose Up
-- When a user proved their e-mail address by following the link sent to it (docs/email.md); NULL until then.
ALTER TABLE users ADD COLUMN email_verified_at timestamptz;

-- The single-use links e-mailed to a user: a password reset or the proof of their address. Only the SHA-256 of
-- the token is kept, so a copy of the table opens no account; a link works once (used_at) and until expires_at.
CREATE TABLE user_tokens (
    token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose    text NOT NULL CHECK (purpose IN ('password_reset', 'verify_email')),
    -- The address the token was sent to: a verification proves that address, not whichever the user has later.
    email      text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX user_tokens_user ON user_tokens (user_id, purpose);

-- +goose Down
DROP TABLE user_tokens;
ALTER TABLE users DROP COLUMN email_verified_at;
