-- Change counters (issue 16, docs/api.md "ETag and caching"): one row per table the API's lists
-- and shows read, bumped by a trigger on every INSERT, UPDATE and DELETE of that table, so that
-- every writer on every connection (API, workers, poller, the sqlite3 shell) invalidates the
-- API thread's cache of serialized replies, and its cache of verified tokens, without knowing
-- of either. The API reads every counter with one query per request. A counter only grows.
CREATE TABLE change_counters (
    name TEXT PRIMARY KEY,  -- the table counted
    gen  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO change_counters (name, gen) VALUES ('clusters', 0);
INSERT INTO change_counters (name, gen) VALUES ('nodes', 0);
INSERT INTO change_counters (name, gen) VALUES ('interfaces', 0);
INSERT INTO change_counters (name, gen) VALUES ('revoked_certs', 0);
INSERT INTO change_counters (name, gen) VALUES ('tokens', 0);
INSERT INTO change_counters (name, gen) VALUES ('operations', 0);
INSERT INTO change_counters (name, gen) VALUES ('operation_steps', 0);
INSERT INTO change_counters (name, gen) VALUES ('events', 0);
INSERT INTO change_counters (name, gen) VALUES ('bundles', 0);
INSERT INTO change_counters (name, gen) VALUES ('upgrade_nodes', 0);
INSERT INTO change_counters (name, gen) VALUES ('config_revisions', 0);
CREATE TRIGGER clusters_changed_insert AFTER INSERT ON clusters BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'clusters';
END;
CREATE TRIGGER clusters_changed_update AFTER UPDATE ON clusters BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'clusters';
END;
CREATE TRIGGER clusters_changed_delete AFTER DELETE ON clusters BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'clusters';
END;
CREATE TRIGGER nodes_changed_insert AFTER INSERT ON nodes BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'nodes';
END;
CREATE TRIGGER nodes_changed_update AFTER UPDATE ON nodes BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'nodes';
END;
CREATE TRIGGER nodes_changed_delete AFTER DELETE ON nodes BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'nodes';
END;
CREATE TRIGGER interfaces_changed_insert AFTER INSERT ON interfaces BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'interfaces';
END;
CREATE TRIGGER interfaces_changed_update AFTER UPDATE ON interfaces BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'interfaces';
END;
CREATE TRIGGER interfaces_changed_delete AFTER DELETE ON interfaces BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'interfaces';
END;
CREATE TRIGGER revoked_certs_changed_insert AFTER INSERT ON revoked_certs BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'revoked_certs';
END;
CREATE TRIGGER revoked_certs_changed_update AFTER UPDATE ON revoked_certs BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'revoked_certs';
END;
CREATE TRIGGER revoked_certs_changed_delete AFTER DELETE ON revoked_certs BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'revoked_certs';
END;
CREATE TRIGGER tokens_changed_insert AFTER INSERT ON tokens BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'tokens';
END;
CREATE TRIGGER tokens_changed_update AFTER UPDATE ON tokens BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'tokens';
END;
CREATE TRIGGER tokens_changed_delete AFTER DELETE ON tokens BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'tokens';
END;
CREATE TRIGGER operations_changed_insert AFTER INSERT ON operations BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'operations';
END;
CREATE TRIGGER operations_changed_update AFTER UPDATE ON operations BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'operations';
END;
CREATE TRIGGER operations_changed_delete AFTER DELETE ON operations BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'operations';
END;
CREATE TRIGGER operation_steps_changed_insert AFTER INSERT ON operation_steps BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'operation_steps';
END;
CREATE TRIGGER operation_steps_changed_update AFTER UPDATE ON operation_steps BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'operation_steps';
END;
CREATE TRIGGER operation_steps_changed_delete AFTER DELETE ON operation_steps BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'operation_steps';
END;
CREATE TRIGGER events_changed_insert AFTER INSERT ON events BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'events';
END;
CREATE TRIGGER events_changed_update AFTER UPDATE ON events BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'events';
END;
CREATE TRIGGER events_changed_delete AFTER DELETE ON events BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'events';
END;
CREATE TRIGGER bundles_changed_insert AFTER INSERT ON bundles BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'bundles';
END;
CREATE TRIGGER bundles_changed_update AFTER UPDATE ON bundles BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'bundles';
END;
CREATE TRIGGER bundles_changed_delete AFTER DELETE ON bundles BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'bundles';
END;
CREATE TRIGGER upgrade_nodes_changed_insert AFTER INSERT ON upgrade_nodes BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'upgrade_nodes';
END;
CREATE TRIGGER upgrade_nodes_changed_update AFTER UPDATE ON upgrade_nodes BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'upgrade_nodes';
END;
CREATE TRIGGER upgrade_nodes_changed_delete AFTER DELETE ON upgrade_nodes BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'upgrade_nodes';
END;
CREATE TRIGGER config_revisions_changed_insert AFTER INSERT ON config_revisions BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'config_revisions';
END;
CREATE TRIGGER config_revisions_changed_update AFTER UPDATE ON config_revisions BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'config_revisions';
END;
CREATE TRIGGER config_revisions_changed_delete AFTER DELETE ON config_revisions BEGIN
    UPDATE change_counters SET gen = gen + 1 WHERE name = 'config_revisions';
END;
