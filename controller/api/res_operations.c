/*
 * /v1/operations: list (optionally by state), show with steps, the result document an operation
 * stored (GET /v1/operations/{id}/result: the pair matrix of a network check), and the pause /
 * resume / abort controls, which record the request and wake a worker to act on it. Plus the
 * submission every resource that starts an operation replies with.
 */
#include <string.h>

#include "common/json_util.h"
#include "common/op_state.h"
#include "controller/api/api.h"
#include "controller/ops/ops.h"
#include "controller/state/net.h"

/* What the operation list and show read. */
#define OPS_DEPS (HC_DEP(OPERATIONS) | HC_DEP(STEPS))

json_t *hc_res_operation_body(struct hc_db *db, const char *id, struct hc_error *err)
{
    json_t *shown = hc_ops_show(db, id, err);
    if (!shown)
        return NULL;
    json_t *body = json_pack("{s:O}", "operation", json_object_get(shown, "operation"));
    json_decref(shown);
    return body;
}

void hc_res_operation_submit(struct hc_request *req, struct hc_api *api, const char *kind,
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

void hc_res_ops_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *state = hc_req_query(req, "state");
    if (state && hc_op_state_parse(state) < 0) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "unknown operation state '%s'", state);
        hc_error_hint(&err, "use pending, running, paused, succeeded, failed or aborted");
        hc_reply_error(req, &err);
        return;
    }
    struct hc_api_page page;
    if (hc_api_page_parse(req, &page, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    if (hc_api_cached(api, req, OPS_DEPS))
        return;
    /* newest first (created_at, then rowid): the cursor is the last operation's id */
    json_t *body = hc_api_page_apply(hc_ops_list(api->db, state, &err), "operations", "id",
                                     HC_API_ORDER_LIST, &page, &err);
    hc_api_reply_etag(api, req, OPS_DEPS, body, &err);
}

void hc_res_op_get(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    if (hc_api_cached(api, req, OPS_DEPS))
        return;
    hc_api_reply_etag(api, req, OPS_DEPS, hc_ops_show(api->db, hc_req_param(req, "id"), &err),
                      &err);
}

void hc_res_op_result(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *id = hc_req_param(req, "id");
    json_t *body = hc_res_operation_body(api->db, id, &err), *rows = NULL;
    if (body && !(rows = hc_db_query_json(api->db, &err,
                                          "SELECT result_json FROM operations "
                                          "WHERE id = ?",
                                          "s", id))) {
        json_decref(body);
        body = NULL;
    }
    if (body) {
        json_t *res = json_object_get(json_array_get(rows, 0), "result_json");
        const char *fo = hc_req_query(req, "failures_only");
        if (fo && (!strcmp(fo, "1") || !strcmp(fo, "true")) && json_is_object(res))
            hc_net_result_failures_only(res);
        json_object_set(body, "result", res ? res : json_null());
    }
    json_decref(rows);
    hc_api_reply(req, 200, body, &err);
}

/* The body of a control call carries nothing yet, but it must still be a JSON object. */
static void op_control(struct hc_request *req, struct hc_api *api, const char *action)
{
    struct hc_error err = {0};
    const char *id = hc_req_param(req, "id");
    json_t *in = hc_api_body(req);
    if (!in)
        return;
    json_decref(in);
    json_t *body = NULL;
    if (hc_ops_control(api->db, id, action, &err) == 0) {
        if (api->ctl->ops)
            hc_ops_pool_kick(api->ctl->ops);
        body = hc_res_operation_body(api->db, id, &err);
    }
    hc_api_reply(req, 200, body, &err);
}

void hc_res_op_pause(struct hc_request *req, void *arg)
{
    op_control(req, arg, "pause");
}

void hc_res_op_resume(struct hc_request *req, void *arg)
{
    op_control(req, arg, "resume");
}

void hc_res_op_abort(struct hc_request *req, void *arg)
{
    op_control(req, arg, "abort");
}
