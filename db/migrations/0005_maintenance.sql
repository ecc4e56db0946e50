-- Storage maintenance as its own state on the node (DESIGN.md "Maintenance mode").
-- nodes.maintenance: none | entering | active | exiting; the mode says how data was protected.
ALTER TABLE nodes ADD COLUMN maintenance_mode TEXT;  -- ensure-accessibility | full | none
ALTER TABLE nodes ADD COLUMN maintenance_since INTEGER;
ALTER TABLE nodes ADD COLUMN maintenance_op TEXT;

-- Per-node progress of a rolling upgrade (what `hcctl upgrade status` shows).
CREATE TABLE upgrade_nodes (
    op_id        TEXT NOT NULL REFERENCES operations(id) ON DELETE CASCADE,
    node         TEXT NOT NULL,
    seq          INTEGER NOT NULL,         -- upgrade order
    from_version TEXT,
    to_version   TEXT NOT NULL,
    state        TEXT NOT NULL,            -- pending | upgrading | done | rolled_back | failed
    step         TEXT,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (op_id, node)
);

-- An operation paused because a node stopped answering resumes by itself when the poller sees
-- that node reachable again.
ALTER TABLE operations ADD COLUMN resume_on_node TEXT;

-- When service_state/software_version were last learnt (epoch ms). The poller and the
-- operations both write them; the newer observation wins, so a poll that started before an
-- operation changed the service cannot overwrite what the operation knows.
ALTER TABLE nodes ADD COLUMN service_observed_at INTEGER;
