-- +goose Up
-- Accounts are organisations: billing hangs on them. Users belong to exactly one.
CREATE TABLE accounts (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL
);

CREATE TABLE users (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id    uuid NOT NULL REFERENCES accounts (id),
    email         text NOT NULL CHECK (email = lower(email)),
    password_hash text NOT NULL,
    role          text NOT NULL CHECK (role IN ('developer', 'provider', 'finance', 'admin')),
    created_at    timestamptz NOT NULL
);
CREATE UNIQUE INDEX users_email_key ON users (email);
CREATE INDEX users_account_id_idx ON users (account_id);

-- A session is one signed-in browser or API token. Its id is the JWT's jti; logging out
-- sets revoked_at, and a token whose session is revoked or expired is refused.
CREATE TABLE sessions (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);

-- Role grants of finance and admin are recorded with who made them.
CREATE TABLE role_grants (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id),
    role       text NOT NULL,
    granted_by uuid NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE role_grants;
DROP TABLE sessions;
DROP TABLE users;
DROP TABLE accounts;
