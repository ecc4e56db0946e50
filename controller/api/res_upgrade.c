/*
 * Maintenance and rolling upgrade resources:
 *   POST   /v1/nodes/{name}/maintenance  {"mode","force","timeout_seconds","max_unavailable"}
 *   DELETE /v1/nodes/{name}/maintenance  {"timeout_seconds"}
 *   GET    /v1/maintenance               nodes with their maintenance state
 *   POST   /v1/upgrade                   {"to_version","max_unavailable","node_timeout_seconds",
 *                                          "dry_run"} -> 202 operation, or 200 {"plan"} for a dry run
 *   GET    /v1/upgrade                   the latest upgrade with per-node progress
 * Pause, resume and abort go through /v1/operations/{id}/... (the CLI finds the id).
 */
#include <string.h>

#include "common/json_util.h"
#include "controller/api/api.h"
#include "controller/ops/op_maintenance.h"
#include "controller/state/nodes.h"
#include "controller/ops/op_upgrade.h"
#include "controller/ops/ops.h"

static int body_int(const json_t *body, const char *key, int64_t min, int64_t max, int64_t def,
                    int64_t *out, struct hc_error *err)
{
    const json_t *v = json_object_get(body, key);
    *out = def;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return hc_error_set(err, 400, HC_ERR_INVALID_ARGUMENT, "'%s' must be an integer from "
                            "%lld to %lld", key, (long long)min, (long long)max);
    *out = json_integer_value(v);
    return 0;
}

/* Submits kind with params and replies 202 with the operation (or the error). */
static void submit(struct hc_request *req, struct hc_api *api, const char *kind,
                   const json_t *params, struct hc_error *err)
{
    char op_id[32];
    json_t *reply = NULL;
    if (!err->code[0] && hc_ops_submit(api->db, api->ctl->cluster_id, kind, params,
                                       hc_api_actor(req), op_id, err) == 0) {
        if (api->ctl->ops)
            hc_ops_pool_kick(api->ctl->ops);
        reply = hc_res_operation_body(api->db, op_id, err);
    }
    hc_api_reply(req, 202, reply, err);
}

void hc_res_maintenance_enter(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *name = hc_req_param(req, "name");
    json_t *body = hc_api_body(req), *params = NULL, *node = NULL;
    int64_t timeout_s = 0, max_unavailable = 1;
    if (!body)
        return;
    const char *mode = hc_json_str(body, "mode", "ensure-accessibility");
    int force = hc_json_bool(body, "force", 0);
    if (!(node = hc_node_json(api->db, name, &err)))
        goto reply;
    if (!hc_maint_mode_valid(mode)) {
        hc_error_set(&err, 400, HC_ERR_INVALID_ARGUMENT, "unknown maintenance mode '%s'", mode);
        hc_error_hint(&err, "one of: ensure-accessibility, full, none");
    } else if (!strcmp(mode, "none") && !force) {
        hc_error_set(&err, 400, HC_ERR_INVALID_ARGUMENT, "mode none takes '%s' down without "
                     "asking the storage service whether its data stays available", name);
        hc_error_hint(&err, "add --force if that is what you want");
    } else if (strcmp(hc_json_str(node, "maintenance", "none"), "none") != 0) {
        hc_error_set(&err, 409, HC_ERR_CONFLICT, "node '%s' is already in maintenance (%s)", name,
                     hc_json_str(node, "maintenance", ""));
    } else if (body_int(body, "timeout_seconds", 1, 86400, HC_MAINT_DEFAULT_TIMEOUT_MS / 1000,
                        &timeout_s, &err) == 0 &&
               body_int(body, "max_unavailable", 1, 1000, 1, &max_unavailable, &err) == 0) {
        params = json_pack("{s:s, s:s, s:b, s:I, s:I}", "node", name, "mode", mode, "force", force,
                           "timeout_ms", (json_int_t)(timeout_s * 1000), "max_unavailable",
                           (json_int_t)max_unavailable);
    }
reply:
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", name);
    if (params || err.code[0])
        submit(req, api, "maintenance.enter", params, &err);
    json_decref(params);
    json_decref(node);
    json_decref(body);
}

void hc_res_maintenance_exit(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *name = hc_req_param(req, "name");
    json_t *body = hc_api_body(req), *params = NULL, *node = NULL;
    int64_t timeout_s;
    if (!body)
        return;
    if ((node = hc_node_json(api->db, name, &err)) &&
        body_int(body, "timeout_seconds", 1, 86400, HC_MAINT_DEFAULT_TIMEOUT_MS / 1000,
                 &timeout_s, &err) == 0) {
        if (!strcmp(hc_json_str(node, "maintenance", "none"), "none"))
            hc_error_set(&err, 409, HC_ERR_CONFLICT, "node '%s' is not in maintenance", name);
        else
            params = json_pack("{s:s, s:I}", "node", name, "timeout_ms",
                               (json_int_t)(timeout_s * 1000));
    }
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", name);
    submit(req, api, "maintenance.exit", params, &err);
    json_decref(params);
    json_decref(node);
    json_decref(body);
}

void hc_res_maintenance_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    hc_api_reply(req, 200, hc_nodes_maintenance_list(api->db, &err), &err);
}

void hc_res_upgrade_start(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req), *params = NULL, *plan = NULL;
    int64_t max_unavailable, node_timeout_s;
    if (!body)
        return;
    const char *to = hc_json_req_str(body, "to_version", &err);
    if (to && body_int(body, "max_unavailable", 1, 1000, 1, &max_unavailable, &err) == 0 &&
        body_int(body, "node_timeout_seconds", 1, 86400, HC_UPGRADE_NODE_TIMEOUT_MS / 1000,
                 &node_timeout_s, &err) == 0) {
        params = json_pack("{s:s, s:I, s:I}", "to_version", to, "max_unavailable",
                           (json_int_t)max_unavailable, "node_timeout_ms",
                           (json_int_t)(node_timeout_s * 1000));
        /* refusals before anything starts */
        if (hc_upgrade_check_nodes_up(api->db, &err) == 0)
            plan = hc_upgrade_plan(api->db, params, &err);
    }
    if (plan && hc_json_bool(body, "dry_run", 0))
        hc_api_reply(req, 200, json_pack("{s:O}", "plan", plan), &err);
    else if (plan)
        submit(req, api, HC_UPGRADE_KIND, params, &err);
    else
        hc_api_reply(req, 202, NULL, &err);
    json_decref(plan);
    json_decref(params);
    json_decref(body);
}

void hc_res_upgrade_status(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    hc_api_reply(req, 200, hc_upgrade_status(api->db, &err), &err);
}
