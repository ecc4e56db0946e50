-- Pre-flight checks (issue 18 part 4; docs/api.md "Checks"): what the poller learns from each
-- agent's GET /v1/status beyond its health, for GET /v1/checks to judge. NULL: the agent did not
-- report it (never polled, or an agent too old to), which the checks call unknown, never ok.
ALTER TABLE nodes ADD COLUMN clock_offset_ms INTEGER;      -- the agent's time_ms minus the
                                                           -- controller's at the poll's midpoint
ALTER TABLE nodes ADD COLUMN data_dir_free_bytes INTEGER;  -- statvfs of the agent's data dir
ALTER TABLE nodes ADD COLUMN data_dir_total_bytes INTEGER;
ALTER TABLE nodes ADD COLUMN service_healthy INTEGER;      -- SERVICE "healthy": 1, 0, NULL
