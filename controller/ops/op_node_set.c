/* The node.set operation: a node's failure domain, carried to the storage service (see
 * op_node_set.h). */
#include "controller/ops/op_node_set.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/ops.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/remote/storage_peers.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define NODE_SET_RESYNC_TIMEOUT_MS (10 * 60 * 1000)

json_t *hc_node_set_params(const char *name, const json_t *body, struct hc_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        if (strcmp(key, "failure_domain") != 0) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT), "unknown key '%.64s'", key);
            hc_error_hint(err, "PATCH /v1/nodes/NAME takes {\"failure_domain\": NAME or null}");
            return NULL;
        }
    }
    v = json_object_get(body, "failure_domain");
    if (!v) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "nothing to set: 'failure_domain' missing");
        hc_error_hint(err, "PATCH /v1/nodes/NAME takes {\"failure_domain\": NAME or null}");
        return NULL;
    }
    if (!json_is_null(v) && !(json_is_string(v) && hc_failure_domain_valid(json_string_value(v)))) {
        hc_error_set(err, HC_E(INVALID_DOMAIN), "invalid failure domain '%.80s'",
                     json_is_string(v) ? json_string_value(v) : "(not a string)");
        hc_error_hint(err, "lowercase letters, digits, '.', '-', '_', starting with a letter or "
                           "digit; up to 63 characters (null: none)");
        return NULL;
    }
    return json_pack("{s:s, s:O}", "node", name, "failure_domain", v);
}

struct node_set {
    const char *node;
    const char *domain; /* NULL: none */
    struct hc_http_client *client;
};

static int step_record(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    struct node_set *ns = arg;
    struct hc_db *db = hc_op_db(ctx);
    struct hc_node_row row;
    if (hc_db_begin(db, err) < 0)
        return -1;
    int found = hc_node_row_get(db, ns->node, &row, err);
    const char *was = found > 0 && row.failure_domain ? row.failure_domain : NULL;
    int same = (!was && !ns->domain) || (was && ns->domain && !strcmp(was, ns->domain));
    int rc = found;
    if (found == 0)
        rc = hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", ns->node);
    else if (found > 0 && !same &&
             (hc_node_set_failure_domain(db, ns->node, ns->domain, err) < 0 ||
              hc_event_add(db, "node.failure_domain", ns->node, hc_op_id(ctx), "controller",
                           json_pack("{s:s?, s:s?}", "failure_domain", ns->domain, "was", was), err,
                           "failure domain of %s: %s (was %s)", ns->node,
                           ns->domain ? ns->domain : "none", was ? was : "none") < 0))
        rc = -1;
    if (rc > 0)
        snprintf(detail, len, "%s: %s%s", ns->node, ns->domain ? ns->domain : "no failure domain",
                 same ? " (unchanged)" : "");
    hc_node_row_clear(&row);
    if (rc < 0) {
        hc_db_rollback(db);
        return -1;
    }
    return hc_db_commit(db, err);
}

/* Every member whose service runs has fetched what the new placement puts on it. */
static int step_resync(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    struct node_set *ns = arg;
    struct hc_node_filter members = {.desired_state = "member"};
    struct hc_node_row *rows;
    size_t n, waited = 0;
    int rc = 0;
    if (hc_nodes_rows(hc_op_db(ctx), &members, &rows, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!rows[i].service_state || strcmp(rows[i].service_state, "running") != 0)
            continue;
        struct hc_svc_node svc = {ns->client, rows[i].name, rows[i].agent_url,
                                  hc_agent_timeout_ms(hc_op_controller(ctx))};
        rc = hc_maint_wait_resync(ctx, &svc, NODE_SET_RESYNC_TIMEOUT_MS, err);
        waited++;
    }
    hc_node_rows_free(rows, n);
    if (rc == 0)
        snprintf(detail, len, "%zu running member(s) in sync", waited);
    return rc;
}

static enum hc_op_result node_set_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    struct node_set ns = {.node = hc_json_str(p, "node", ""),
                          .domain = hc_json_str(p, "failure_domain", NULL)};
    enum hc_op_result res = HC_OP_FAILED;
    if (!(ns.client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)))
        return HC_OP_FAILED;
    if (hc_op_step(ctx, ns.node, "record", step_record, &ns, err) == 0 &&
        hc_storage_peers_step(ctx, ns.client, err) == 0 &&
        hc_op_step_observe(ctx, NULL, "resync", step_resync, &ns, err) == 0)
        res = HC_OP_SUCCEEDED;
    else if (!strcmp(err->code, "interrupted"))
        res = hc_op_checkpoint(ctx) == HC_OP_ABORTED ? HC_OP_ABORTED : HC_OP_PAUSED;
    hc_http_client_free(ns.client);
    hc_op_waiting(ctx, NULL);
    return res;
}

const struct hc_op_kind hc_op_kind_node_set = {HC_OP_NODE_SET, 1, node_set_run};
