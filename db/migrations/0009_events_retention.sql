-- Events retention (issue 16): the event log stays append-only, except that events older than
-- the retention may be pruned. The cutoff only grows; the trigger refuses to delete any event
-- at or after it, so no code path can remove recent history (controller/state/events.c,
-- hc_events_prune).
CREATE TABLE events_retention (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    cutoff_ms   INTEGER NOT NULL
);
INSERT INTO events_retention (id, cutoff_ms) VALUES (1, 0);
CREATE TRIGGER events_retention_grows BEFORE UPDATE ON events_retention
WHEN NEW.cutoff_ms < OLD.cutoff_ms
BEGIN SELECT RAISE(ABORT, 'the events retention cutoff only grows'); END;

DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN OLD.ts >= (SELECT cutoff_ms FROM events_retention WHERE id = 1)
BEGIN SELECT RAISE(ABORT, 'events are append-only: only those older than the retention are pruned'); END;
