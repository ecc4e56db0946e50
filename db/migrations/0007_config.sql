-- The storage service's configuration (issue 15, docs/config.md): revisions of the settings an
-- operator set, and what each node reports it applied.
-- A revision records the overrides only (the settings someone set): a version's defaults apply
-- to the rest, so an upgrade with new defaults changes what nobody chose. Revision 0 (no row)
-- is "every default". The desired revision is the highest.
CREATE TABLE config_revisions (
    revision    INTEGER PRIMARY KEY,
    overrides   TEXT NOT NULL,           -- JSON object {NAME: value}, normalized
    action      TEXT NOT NULL,           -- set | unset | revert
    reverted_to INTEGER,                 -- revert: the revision whose values it takes again
    author      TEXT NOT NULL,           -- the API token's name
    message     TEXT,
    created_at  INTEGER NOT NULL,        -- epoch ms
    op_id       TEXT                     -- the config.apply operation that applies it
);
-- What the node's agent reported (poller) and what the controller makes of it.
ALTER TABLE nodes ADD COLUMN config_revision INTEGER;    -- NULL: no settings reported
ALTER TABLE nodes ADD COLUMN config_digest TEXT;         -- SHA-256 of the values it has
ALTER TABLE nodes ADD COLUMN config_pending_restart INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN config_state TEXT;          -- in_sync | drift | pending_restart |
                                                         -- unreachable | not_applied
ALTER TABLE nodes ADD COLUMN config_detail TEXT;         -- why, for drift and not_applied
