-- Issue 18 part 3 (agent self-upgrade, docs/agent-upgrade.md): the agent API version each
-- node's agent reports in GET /v1/status ("api_version"), recorded by the poller. NULL: the
-- agent reported none (an agent from before API versions, which speaks version 1) or was never
-- polled (agent_version NULL too); the compatibility state is derived from it when read.
ALTER TABLE nodes ADD COLUMN agent_api_version INTEGER;
