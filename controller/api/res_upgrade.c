/*
 * Rolling upgrade resources:
 *   POST   /v1/upgrade                   {"to_version","max_unavailable","node_timeout_seconds",
 *                                          "dry_run","skip_checks","batch"} -> 202 operation, or
 * 200
 *                                          {"plan","checks"} for a dry
 * run GET    /v1/upgrade                   the latest upgrade with per-node progress Pause, resume
 * and abort go through /v1/operations/{id}/... (the CLI finds the id). The maintenance routes are
 * in res_maintenance.c.
 */
#include <string.h>

#include "common/json_util.h"
#include "controller/api/api.h"
#include "controller/ops/op_upgrade.h"
#include "controller/ops/ops.h"
#include "controller/ops/rolling.h"
#include "controller/state/checks.h"

void hc_res_upgrade_start(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req), *params = NULL, *plan = NULL, *checks = NULL;
    int64_t max_unavailable, node_timeout_s;
    const json_t *skip = NULL;
    if (!body)
        return;
    const char *to = hc_json_req_str(body, "to_version", &err), *batch = "node";
    if (to && hc_checks_skip_arg(body, &skip, &err) == 0 &&
        hc_api_body_int(body, "max_unavailable", 1, 1000, 1, &max_unavailable, &err) == 0 &&
        hc_api_body_int(body, "node_timeout_seconds", 1, 86400, HC_UPGRADE_NODE_TIMEOUT_MS / 1000,
                        &node_timeout_s, &err) == 0 &&
        hc_rolling_batch_check(api->db, body, max_unavailable, &batch, &err) == 0) {
        params = json_pack("{s:s, s:I, s:I, s:s}", "to_version", to, "max_unavailable",
                           (json_int_t)max_unavailable, "node_timeout_ms",
                           (json_int_t)(node_timeout_s * 1000), "batch", batch);
        /* refusals before anything starts */
        if (hc_upgrade_check_nodes_up(api->db, &err) == 0)
            plan = hc_upgrade_plan(api->db, params, &err);
        /* the pre-flight checks: shown by a dry run, refusing errors otherwise */
        if (plan && hc_json_bool(body, "dry_run", 0))
            checks = hc_api_checks(api, &err);
        else if (plan && hc_api_checks_gate(api, skip, NULL, &err) < 0) {
            json_decref(plan);
            plan = NULL;
        }
    }
    if (plan && checks)
        hc_api_reply(req, 200, json_pack("{s:O, s:O}", "plan", plan, "checks", checks), &err);
    else if (plan && hc_json_bool(body, "dry_run", 0))
        hc_api_reply(req, 202, NULL, &err); /* the checks could not run */
    else if (plan)
        hc_res_operation_submit(req, api, HC_UPGRADE_KIND, params, &err);
    else
        hc_api_reply(req, 202, NULL, &err);
    json_decref(plan);
    json_decref(checks);
    json_decref(params);
    json_decref(body);
}

void hc_res_upgrade_status(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    hc_api_reply(req, 200, hc_upgrade_status(api->db, &err), &err);
}
