-- Initial schema. Times are epoch milliseconds (INTEGER). Names are the API's snake_case.

CREATE TABLE clusters (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    mtu         INTEGER,                 -- cluster storage MTU; NULL until set
    created_at  INTEGER NOT NULL
);

-- The cluster CA and the controller's own certificates (PEM). One row per item.
CREATE TABLE pki (
    name        TEXT PRIMARY KEY,        -- 'ca_cert', 'ca_key_path', 'server_cert', ...
    value       TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE nodes (
    id              INTEGER PRIMARY KEY,
    cluster_id      TEXT NOT NULL REFERENCES clusters(id),
    name            TEXT NOT NULL UNIQUE,
    address         TEXT NOT NULL,       -- management address
    agent_url       TEXT NOT NULL,
    hostname        TEXT,
    ssh_endpoint    TEXT,                -- user@host:port when pushed over SSH
    ssh_host_key    TEXT,                -- pinned SHA256 fingerprint
    cert_serial     TEXT NOT NULL,
    cert_pem        TEXT NOT NULL,
    desired_state   TEXT NOT NULL DEFAULT 'member',   -- member | removed
    state           TEXT NOT NULL DEFAULT 'joined',   -- joined | removing
    health          TEXT NOT NULL DEFAULT 'unknown',  -- unknown | reachable | unreachable | stalled
    health_detail   TEXT,
    maintenance     TEXT NOT NULL DEFAULT 'none',
    agent_version   TEXT,
    software_version TEXT,
    service_state   TEXT,
    uptime_s        INTEGER,
    poll_latency_ms INTEGER,
    last_seen       INTEGER,
    joined_at       INTEGER NOT NULL
);
CREATE INDEX nodes_cluster ON nodes(cluster_id);

CREATE TABLE interfaces (
    node_id     INTEGER NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    mtu         INTEGER NOT NULL,
    state       TEXT NOT NULL,
    kind        TEXT,
    master      TEXT,
    addresses_json TEXT NOT NULL DEFAULT '[]',
    role        TEXT,                    -- storage | management | NULL
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (node_id, name)
);

CREATE TABLE revoked_certs (
    serial      TEXT PRIMARY KEY,
    node_name   TEXT NOT NULL,
    revoked_at  INTEGER NOT NULL
);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,        -- the token's public id
    kind        TEXT NOT NULL CHECK (kind IN ('api', 'join')),
    name        TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'readonly', 'join')),
    secret_hash TEXT NOT NULL,           -- SHA-256 of the secret; the secret is never stored
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,                 -- NULL: never
    used_at     INTEGER,                 -- join tokens are one-time
    used_by     TEXT
);

CREATE TABLE operations (
    id              TEXT PRIMARY KEY,    -- "op-" + 12 hex
    cluster_id      TEXT NOT NULL REFERENCES clusters(id),
    kind            TEXT NOT NULL,
    params_json     TEXT NOT NULL DEFAULT '{}',
    state           TEXT NOT NULL CHECK (state IN
                        ('pending', 'running', 'paused', 'succeeded', 'failed', 'aborted')),
    disruptive      INTEGER NOT NULL DEFAULT 0,
    requested_by    TEXT,
    control         TEXT,                -- pause | abort requested by a user, consumed by the worker
    waiting_on      TEXT,                -- what the operation waits for right now
    progress_json   TEXT NOT NULL DEFAULT '{}',
    error_code      TEXT,
    error_message   TEXT,
    error_hint      TEXT,
    lease_holder    TEXT,                -- worker that runs it
    lease_expires   INTEGER,
    created_at      INTEGER NOT NULL,
    started_at      INTEGER,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
CREATE INDEX operations_state ON operations(state);

CREATE TABLE operation_steps (
    op_id       TEXT NOT NULL REFERENCES operations(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    node        TEXT,                    -- node name, or NULL for cluster-wide steps
    step        TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN
                    ('pending', 'running', 'succeeded', 'failed', 'skipped')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER,
    finished_at INTEGER,
    detail      TEXT,
    PRIMARY KEY (op_id, seq)
);
CREATE UNIQUE INDEX operation_steps_node_step ON operation_steps(op_id, node, step);

-- One disruptive operation per cluster: the row exists while it runs.
CREATE TABLE cluster_lease (
    cluster_id  TEXT PRIMARY KEY REFERENCES clusters(id),
    op_id       TEXT NOT NULL REFERENCES operations(id),
    acquired_at INTEGER NOT NULL
);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    ts          INTEGER NOT NULL,
    type        TEXT NOT NULL,           -- e.g. node.joined, node.health, api.call, op.state
    node        TEXT,
    op_id       TEXT,
    actor       TEXT,                    -- token name, 'controller', or the agent's node name
    message     TEXT NOT NULL,
    details_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_ts ON events(ts);

-- Append-only: the database itself refuses edits of the event log.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
