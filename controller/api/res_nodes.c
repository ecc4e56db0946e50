/*
 * /v1/nodes: list and show from the database, and DELETE, which starts a node.remove operation
 * (the removal itself runs on the operation workers). DELETE takes an optional body
 * {"force","reason","purge","max_unavailable"} (controller/ops/op_node_remove.h), like
 * DELETE /v1/nodes/{name}/maintenance takes one. PUT /v1/nodes/{name}/failure-domain
 * {"failure_domain": NAME|null} starts a node.set operation (controller/ops/op_node_set.h).
 * POST /v1/nodes/{name}/renew-cert asks the poller to renew the node's certificate at its next
 * cycle, also one that has expired (controller/remote/cert_renew.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"

#include "controller/api/api.h"
#include "controller/ops/op_node_remove.h"
#include "controller/ops/op_node_set.h"
#include "controller/ops/ops.h"
#include "controller/state/nodes.h"

/* Paged by name, served from the reply cache while no nodes row changed (the poller rewrites
 * them once per cycle). */
void hc_res_nodes_list(struct hc_request *req, void *arg)
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
    json_t *body = hc_api_page_apply(hc_nodes_list(api->db, &err), "nodes", "name",
                                     HC_API_ORDER_BYTES, &page, &err);
    hc_api_reply_etag(api, req, HC_DEP(NODES), body, &err);
}

void hc_res_node_get(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    unsigned deps = HC_DEP(NODES) | HC_DEP(INTERFACES);
    if (hc_api_cached(api, req, deps))
        return;
    hc_api_reply_etag(api, req, deps, hc_node_get(api->db, hc_req_param(req, "name"), &err), &err);
}

/* A node operation of `kind` whose params make_params draws from the request's body: 202 with
 * the operation, or 404 (unknown node), 400 (bad body), 409 (another disruptive operation). */
static void node_op(struct hc_request *req, struct hc_api *api, const char *kind,
                    json_t *(*make_params)(const char *, const json_t *, struct hc_error *))
{
    struct hc_error err = {0};
    const char *name = hc_req_param(req, "name");
    json_t *body = NULL, *params = NULL;
    char op_id[32];
    /* The audit event names the node; the before-hook has pointed the request at api->caller. */
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", name);
    json_t *in = hc_api_body(req); /* answered 400 when it is not JSON */
    if (!in)
        return;
    json_t *node = hc_node_json(api->db, name, &err); /* 404 with its hint when unknown */
    if (!node || !(params = make_params(name, in, &err)))
        goto cleanup;
    if (hc_ops_submit(api->db, api->ctl->cluster_id, kind, params, hc_api_actor(req), op_id, &err) <
        0)
        goto cleanup;
    if (api->ctl->ops)
        hc_ops_pool_kick(api->ctl->ops);
    body = hc_res_operation_body(api->db, op_id, &err);
cleanup:
    json_decref(node);
    json_decref(in);
    json_decref(params);
    hc_api_reply(req, 202, body, &err);
}

void hc_res_node_renew_cert(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *name = hc_req_param(req, "name");
    json_t *body = NULL;
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", name);
    json_t *node = hc_node_json(api->db, name, &err); /* 404 with its hint when unknown */
    if (!node)
        goto reply;
    if (strcmp(hc_json_str(node, "state", ""), "joined") != 0) {
        hc_error_set(&err, HC_E(CONFLICT), "node '%s' is being removed", name);
        goto reply;
    }
    if (hc_node_cert_ask(api->db, name, hc_now_ms(), &err) < 0)
        goto reply;
    body = json_pack("{s:s, s:O, s:s}", "node", name, "cert_serial",
                     json_object_get(node, "cert_serial"), "state", "asked");
reply:
    json_decref(node);
    hc_api_reply(req, 202, body, &err);
}

void hc_res_node_delete(struct hc_request *req, void *arg)
{
    node_op(req, arg, HC_OP_NODE_REMOVE, hc_node_remove_params);
}

void hc_res_node_set_domain(struct hc_request *req, void *arg)
{
    node_op(req, arg, HC_OP_NODE_SET, hc_node_set_params);
}
