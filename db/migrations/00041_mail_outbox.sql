-- +goose Up
-- The platform's e-mail outbox (services/mail, docs/email.md). A message is queued in the transaction of what it
-- tells of, and a sender sends it through SMTP: 'queued' waits for next_attempt_at; 'sending' is claimed by one
-- sender until lease_until (a sender that stops mid-send leaves it to be claimed again once the lease ends);
-- 'sent' and 'failed' are final. message_id is the Message-ID header every attempt of the row sends, so that a
-- message sent again after a crash is the same message to the receiver.
CREATE TABLE mail_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key             text NOT NULL CHECK (length(key) BETWEEN 1 AND 300),
    message_id      text NOT NULL,
    recipients      text[] NOT NULL CHECK (cardinality(recipients) BETWEEN 1 AND 50),
    subject         text NOT NULL,
    body_text       text NOT NULL,
    body_html       text NOT NULL DEFAULT '',
    -- [{"name": ..., "content_type": ..., "data": base64}]
    attachments     jsonb NOT NULL DEFAULT '[]',
    status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sending', 'sent', 'failed')),
    attempts        int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL,
    lease_until     timestamptz,
    lease_token     uuid,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    sent_at         timestamptz,
    CHECK ((status = 'sent') = (sent_at IS NOT NULL)),
    CHECK ((status = 'sending') = (lease_until IS NOT NULL AND lease_token IS NOT NULL))
);
CREATE UNIQUE INDEX mail_outbox_key ON mail_outbox (key);
-- What a sender claims: queued and due, or sending with its lease run out.
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE status IN ('queued', 'sending');

-- +goose Down
DROP TABLE mail_outbox;
