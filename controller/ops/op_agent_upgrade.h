/*
 * The agent self-upgrade (operation "agent.upgrade", docs/agent-upgrade.md): a new hcagent from
 * a signed agent bundle, rolled out one node at a time without touching the storage service.
 *
 * Per node, in name order: stage (the agent fetches the agent bundle and verifies it as it
 * verifies service bundles) -> activate (the agent tries the new program, then execs it; the
 * service it supervises keeps running and is adopted) -> verify (the new agent answers, reports
 * the target version, and the service runs with the pid it had before). A node whose new agent
 * does not come up is rolled back by the agent's guardian; the step `rollback` waits until the
 * previous agent answers again, and the operation ends failed (agent_upgrade_failed_rolled_back)
 * with no further node touched. Every step is recorded with hc_op_step, so a controller killed
 * at any instant carries on: the steps that succeeded are not run again.
 *
 * It holds the cluster lease like every disruptive kind (no rolling upgrade or maintenance runs
 * beside it), but it is the one disruptive kind the agent API gate lets through: it is how an
 * agent the controller cannot otherwise drive is brought back into the supported range.
 */
#ifndef HC_CONTROLLER_OP_AGENT_UPGRADE_H
#define HC_CONTROLLER_OP_AGENT_UPGRADE_H

#include <jansson.h>

#include "common/error.h"
#include "db/db.h"

#define HC_AGENT_UPGRADE_KIND "agent.upgrade"
#define HC_AGENT_UPGRADE_CONFIRM_MS 30000      /* the agent's guardian waits that long */
#define HC_AGENT_UPGRADE_NODE_TIMEOUT_MS 60000 /* for the new (or rolled back) agent to answer */

/* The plan for params {"to_version"}: {"to_version","nodes":[{"name","from_version",
 * "api_version","api_compat","action","steps"}]}, or NULL with err: 404 unknown version, 400
 * bundle_kind_mismatch for a service bundle, 409 when the cluster has no nodes. Changes
 * nothing. */
json_t *hc_agent_upgrade_plan(struct hc_db *db, const json_t *params, struct hc_error *err);

extern const struct hc_op_kind hc_op_kind_agent_upgrade;

#endif
