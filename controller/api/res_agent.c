/*
 * The agent self-upgrade (docs/agent-upgrade.md):
 *   POST /v1/agent/upgrade  {"to_version", "dry_run", "confirm_timeout_seconds",
 *                            "node_timeout_seconds"} -> 202 operation agent.upgrade, or 200
 *                            {"plan"} for a dry run
 * Progress, pause, resume and abort go through /v1/operations/{id}.
 */
#include "common/json_util.h"
#include "controller/api/api.h"
#include "controller/ops/op_agent_upgrade.h"

void hc_res_agent_upgrade(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req), *params = NULL, *plan = NULL;
    int64_t confirm_s, node_s;
    if (!body)
        return;
    const char *to = hc_json_req_str(body, "to_version", &err);
    if (to &&
        hc_api_body_int(body, "confirm_timeout_seconds", 1, 600, HC_AGENT_UPGRADE_CONFIRM_MS / 1000,
                        &confirm_s, &err) == 0 &&
        hc_api_body_int(body, "node_timeout_seconds", 1, 3600,
                        HC_AGENT_UPGRADE_NODE_TIMEOUT_MS / 1000, &node_s, &err) == 0) {
        params = json_pack("{s:s, s:I, s:I}", "to_version", to, "confirm_timeout_ms",
                           (json_int_t)(confirm_s * 1000), "node_timeout_ms",
                           (json_int_t)(node_s * 1000));
        plan = hc_agent_upgrade_plan(api->db, params, &err);
    }
    if (plan && hc_json_bool(body, "dry_run", 0))
        hc_api_reply(req, 200, json_pack("{s:O}", "plan", plan), &err);
    else if (plan)
        hc_res_operation_submit(req, api, HC_AGENT_UPGRADE_KIND, params, &err);
    else
        hc_api_reply(req, 202, NULL, &err);
    json_decref(plan);
    json_decref(params);
    json_decref(body);
}
