/*
 * Maintenance resources (the maintenance.enter and maintenance.exit operations,
 * controller/ops/op_maintenance.c):
 *   POST   /v1/nodes/{name}/maintenance  {"mode","force","timeout_seconds","max_unavailable"}
 *   DELETE /v1/nodes/{name}/maintenance  {"timeout_seconds"}
 *   GET    /v1/maintenance               nodes with their maintenance state
 */
#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "controller/api/api.h"
#include "controller/ops/op_maintenance.h"
#include "controller/state/nodes.h"

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
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "unknown maintenance mode '%s'", mode);
        hc_error_hint(&err, "one of: ensure-accessibility, full, none");
    } else if (!strcmp(mode, "none") && !force) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT),
                     "mode none takes '%s' down without "
                     "asking the storage service whether its data stays available",
                     name);
        hc_error_hint(&err, "add --force if that is what you want");
    } else if (strcmp(hc_json_str(node, "maintenance", "none"), "none") != 0) {
        hc_error_set(&err, HC_E(CONFLICT), "node '%s' is already in maintenance (%s)", name,
                     hc_json_str(node, "maintenance", ""));
    } else if (hc_api_body_int(body, "timeout_seconds", 1, 86400,
                               HC_MAINT_DEFAULT_TIMEOUT_MS / 1000, &timeout_s, &err) == 0 &&
               hc_api_body_int(body, "max_unavailable", 1, 1000, 1, &max_unavailable, &err) == 0) {
        params = json_pack("{s:s, s:s, s:b, s:I, s:I}", "node", name, "mode", mode, "force", force,
                           "timeout_ms", (json_int_t)(timeout_s * 1000), "max_unavailable",
                           (json_int_t)max_unavailable);
    }
reply:
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", name);
    if (params || err.code[0])
        hc_res_operation_submit(req, api, "maintenance.enter", params, &err);
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
        hc_api_body_int(body, "timeout_seconds", 1, 86400, HC_MAINT_DEFAULT_TIMEOUT_MS / 1000,
                        &timeout_s, &err) == 0) {
        if (!strcmp(hc_json_str(node, "maintenance", "none"), "none"))
            hc_error_set(&err, HC_E(CONFLICT), "node '%s' is not in maintenance", name);
        else
            params =
                json_pack("{s:s, s:I}", "node", name, "timeout_ms", (json_int_t)(timeout_s * 1000));
    }
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", name);
    hc_res_operation_submit(req, api, "maintenance.exit", params, &err);
    json_decref(params);
    json_decref(node);
    json_decref(body);
}

void hc_res_maintenance_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    struct hc_api_page page;
    if (hc_api_page_parse(req, &page, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    if (hc_api_cached(api, req, HC_DEP(NODES)))
        return;
    json_t *body = hc_api_page_apply(hc_nodes_maintenance_list(api->db, &err), "nodes", "name",
                                     HC_API_ORDER_BYTES, &page, &err);
    hc_api_reply_etag(api, req, HC_DEP(NODES), body, &err);
}
