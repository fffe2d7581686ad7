-- +goose Up
-- An account is a customer's (it buys inference) or a provider's (it lists rigs); a provider who also
-- buys inference holds one of each. Each existing account takes its kind from its users' roles.
ALTER TABLE accounts ADD COLUMN kind text NOT NULL DEFAULT 'customer' CHECK (kind IN ('customer', 'provider'));
UPDATE accounts a SET kind = 'provider'
WHERE EXISTS (SELECT 1 FROM users u WHERE u.account_id = a.id AND u.role = 'provider');

-- A login belongs to one or more accounts, with a role in each (docs/members.md). users.account_id stays
-- the account the login was made for; every existing login owns its account.
CREATE TABLE memberships (
    account_id uuid NOT NULL REFERENCES accounts (id),
    user_id    uuid NOT NULL REFERENCES users (id),
    role       text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'billing', 'read-only')),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);
INSERT INTO memberships (account_id, user_id, role, created_at) SELECT account_id, id, 'owner', created_at FROM users;

-- A session works in one account, the one in use; removing a member revokes their sessions in it.
ALTER TABLE sessions ADD COLUMN account_id uuid REFERENCES accounts (id);
UPDATE sessions s SET account_id = u.account_id FROM users u WHERE u.id = s.user_id;
ALTER TABLE sessions ALTER COLUMN account_id SET NOT NULL;
CREATE INDEX sessions_account_user_idx ON sessions (account_id, user_id) WHERE revoked_at IS NULL;

-- An invitation to join an account by e-mail: a single-use link whose token is stored only as its
-- SHA-256, until it expires, is accepted or is revoked.
CREATE TABLE invitations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id  uuid NOT NULL REFERENCES accounts (id),
    email       text NOT NULL CHECK (email = lower(email)),
    role        text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'billing', 'read-only')),
    token_hash  bytea NOT NULL UNIQUE,
    invited_by  uuid NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    accepted_by uuid REFERENCES users (id),
    revoked_at  timestamptz
);
CREATE INDEX invitations_pending_idx ON invitations (account_id) WHERE accepted_at IS NULL AND revoked_at IS NULL;

-- +goose Down
DROP TABLE invitations;
DROP INDEX sessions_account_user_idx;
ALTER TABLE sessions DROP COLUMN account_id;
DROP TABLE memberships;
ALTER TABLE accounts DROP COLUMN kind;
