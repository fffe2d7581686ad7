-- +goose Up
-- The APIs besides chat completions that a rig's engine serves natively, as its agent found them by
-- trying each upstream and said in its last heartbeat ('messages': Anthropic Messages, 'responses': OpenAI
-- Responses). The gateway passes such a request through untouched to a rig that serves its API and
-- translates it to chat completions for the others (docs/gateway.md); the provider's pages say which. The
-- column holds what the routers last wrote down; routing itself goes by the heartbeats it hears.
ALTER TABLE offerings
    ADD COLUMN rig_native_apis text[] NOT NULL DEFAULT '{}'
        CHECK (rig_native_apis <@ ARRAY['messages', 'responses']::text[]);

-- +goose Down
ALTER TABLE offerings DROP COLUMN rig_native_apis;
