-- +goose Up
-- A refused event is one row however often it is delivered: the same stream sequence and the
-- same bytes. The sequence alone named it only while the stream lived: a stream deleted and
-- made again numbers its messages from 1, and its refusals would have been taken for ones
-- already recorded and lost.
ALTER TABLE usage_rejections ADD COLUMN raw_sha256 bytea GENERATED ALWAYS AS (sha256(raw)) STORED;
ALTER TABLE usage_rejections DROP CONSTRAINT usage_rejections_stream_seq_key;
ALTER TABLE usage_rejections ADD CONSTRAINT usage_rejections_message_key UNIQUE (stream_seq, raw_sha256);

-- +goose Down
ALTER TABLE usage_rejections DROP CONSTRAINT usage_rejections_message_key;
ALTER TABLE usage_rejections ADD CONSTRAINT usage_rejections_stream_seq_key UNIQUE (stream_seq);
ALTER TABLE usage_rejections DROP COLUMN raw_sha256;
