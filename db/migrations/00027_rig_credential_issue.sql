-- +goose Up
-- Which issue of its NATS credential an offering's rig holds (docs/usage-stream.md, "The rigs' entry point").
-- The password is derived from the platform's rig key, the offering and this number, and stored nowhere: a
-- provider who re-issues it moves the number on, and the rig's earlier password is refused from then on. Every
-- rig listed before starts at 1, whose password is the one it already has.
ALTER TABLE offerings ADD COLUMN rig_credential_issue integer NOT NULL DEFAULT 1
    CONSTRAINT offerings_rig_credential_issue_positive CHECK (rig_credential_issue >= 1);

-- +goose Down
ALTER TABLE offerings DROP COLUMN rig_credential_issue;
