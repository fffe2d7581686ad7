-- +goose Up
-- The OpenAI Batch API (docs/batches.md): uploaded files, batches and each batch's lines. A file's
-- bytes live in the file store under the data directory; the database holds what it is and whose.
CREATE TABLE batch_files (
    id          text PRIMARY KEY,            -- "file-..."
    account_id  uuid NOT NULL REFERENCES accounts (id),
    filename    text NOT NULL,
    purpose     text NOT NULL,               -- batch, batch_output
    bytes       bigint NOT NULL CHECK (bytes >= 0),
    lines       integer NOT NULL CHECK (lines >= 0),
    created_at  timestamptz NOT NULL,
    deleted_at  timestamptz
);
CREATE INDEX batch_files_account_idx ON batch_files (account_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

CREATE TABLE batches (
    id                text PRIMARY KEY,      -- "batch_..."
    account_id        uuid NOT NULL REFERENCES accounts (id),
    api_key_id        text NOT NULL,         -- whose credentials its lines go out with
    input_file_id     text NOT NULL REFERENCES batch_files (id),
    endpoint          text NOT NULL,
    completion_window text NOT NULL,
    metadata          jsonb,
    status            text NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress', 'finalizing',
                          'completed', 'expired', 'cancelling', 'cancelled')),
    errors            jsonb,                 -- validation errors: [{code, message, line, param}]
    estimate_pico     numeric(38, 0),        -- the bound on its cost, priced when it was admitted
    output_file_id    text REFERENCES batch_files (id),
    error_file_id     text REFERENCES batch_files (id),
    created_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    in_progress_at    timestamptz,
    finalizing_at     timestamptz,
    completed_at      timestamptz,
    failed_at         timestamptz,
    expired_at        timestamptz,
    cancelling_at     timestamptz,
    cancelled_at      timestamptz
);
CREATE INDEX batches_account_idx ON batches (account_id, created_at DESC, id DESC);
CREATE INDEX batches_open_idx ON batches (status) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

-- One row per line of an admitted batch. A line is claimed (FOR UPDATE SKIP LOCKED) by setting it
-- running and counting the attempt; its request ids are made from the batch, the line and the
-- attempt, so a worker that stops mid-line leaves the ids behind to look for in the usage rows.
CREATE TABLE batch_lines (
    batch_id     text NOT NULL REFERENCES batches (id),
    line         integer NOT NULL,           -- 1-based, as the validation errors name it
    custom_id    text NOT NULL,
    body_offset  bigint NOT NULL,            -- where the line's JSON starts in the input file
    body_length  integer NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    not_before   timestamptz,                -- a retry waits until then
    claimed_at   timestamptz,
    request_id   text,                       -- the gateway's request id of the answer kept
    status_code  integer,
    response     text,                       -- the answer's body, JSON
    error        jsonb,                      -- {code, message} when no answer is kept
    PRIMARY KEY (batch_id, line)
);
CREATE INDEX batch_lines_pending_idx ON batch_lines (batch_id, line) WHERE status IN ('pending', 'running');
CREATE INDEX batch_lines_running_idx ON batch_lines (claimed_at) WHERE status = 'running';
CREATE UNIQUE INDEX batch_lines_request_idx ON batch_lines (request_id) WHERE request_id IS NOT NULL;

-- +goose Down
DROP TABLE batch_lines;
DROP TABLE batches;
DROP TABLE batch_files;
