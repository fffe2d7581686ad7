-- +goose Up
-- The platform reaches a rig over the connection the rig's agent opened; it dials no rig, and a
-- listing names no address.
ALTER TABLE offerings DROP COLUMN agent_url;

-- What the platform observed of each rig, apart from what its provider chose (status: active,
-- paused, delisted). A listing is 'pending' until its agent has connected, sent heartbeats and
-- passed the platform's probes in a row; then 'active'; 'offline' once its heartbeats stop, until
-- probes qualify it again (docs/listing-states.md). Only an offering whose status and rig_state
-- are both 'active' is in the public catalog and routed. Owned by package catalog.
--
-- Rigs listed before the states existed were never checked: they start pending, and a rig whose
-- agent is running qualifies within seconds of the platform's start.
ALTER TABLE offerings
    ADD COLUMN rig_state text NOT NULL DEFAULT 'pending' CHECK (rig_state IN ('pending', 'active', 'offline')),
    ADD COLUMN rig_state_since timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN rig_heartbeat_at timestamptz,            -- the last heartbeat any gateway wrote down
    ADD COLUMN rig_probe_passes integer NOT NULL DEFAULT 0 CHECK (rig_probe_passes >= 0), -- in a row
    ADD COLUMN rig_probe_problem text NOT NULL DEFAULT '' CHECK (length(rig_probe_problem) <= 500), -- the last failed probe's
    ADD COLUMN rig_probe_at timestamptz,
    ADD COLUMN rig_probe_ttft_ms double precision,
    ADD COLUMN rig_probe_tokens_per_sec double precision;

-- +goose Down
ALTER TABLE offerings
    DROP COLUMN rig_probe_tokens_per_sec,
    DROP COLUMN rig_probe_ttft_ms,
    DROP COLUMN rig_probe_at,
    DROP COLUMN rig_probe_problem,
    DROP COLUMN rig_probe_passes,
    DROP COLUMN rig_heartbeat_at,
    DROP COLUMN rig_state_since,
    DROP COLUMN rig_state;
ALTER TABLE offerings ADD COLUMN agent_url text NOT NULL DEFAULT '';
