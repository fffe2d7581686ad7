-- +goose Up
-- What the gateway bounded and relayed of each attempt, which the meter reads before it bills
-- the rig's report of the same request: a rig is paid for no more than the gateway let it
-- produce and saw it send. input_bytes is the size of the body forwarded to the rig;
-- max_input_tokens and max_output_tokens are the bounds the route ticket carried; the relayed
-- output is the output text of a stream's chunks (its bytes, and how many chunks carried any)
-- or the bytes of a whole response. NULL in rows written before the gateway recorded them.
ALTER TABLE gateway_requests
    ADD COLUMN input_bytes           bigint CHECK (input_bytes >= 0),
    ADD COLUMN max_input_tokens      bigint CHECK (max_input_tokens >= 0),
    ADD COLUMN max_output_tokens     bigint CHECK (max_output_tokens >= 0),
    ADD COLUMN streamed              boolean,
    ADD COLUMN relayed_output_bytes  bigint CHECK (relayed_output_bytes >= 0),
    ADD COLUMN relayed_output_chunks bigint CHECK (relayed_output_chunks >= 0);

-- +goose Down
ALTER TABLE gateway_requests
    DROP COLUMN relayed_output_chunks,
    DROP COLUMN relayed_output_bytes,
    DROP COLUMN streamed,
    DROP COLUMN max_output_tokens,
    DROP COLUMN max_input_tokens,
    DROP COLUMN input_bytes;
