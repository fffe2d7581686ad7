-- +goose Up
-- The time zone a user reads the pages' moments in (docs/page-text.md, "Moments"): an IANA name such
-- as 'Europe/Oslo', checked by the application against its zone database when it is set. Every user
-- starts in UTC.
ALTER TABLE users ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC' CHECK (time_zone <> '' AND length(time_zone) <= 64);

-- +goose Down
ALTER TABLE users DROP COLUMN time_zone;
