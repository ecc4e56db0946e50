/*
 * upgrade.rolling: see op_upgrade.h for the sequence and the rules it keeps, and rolling.h for
 * the engine that takes the nodes down and brings them back. Here: the plan, the pre-stage
 * (PRESTAGE_PARALLEL slots, each staging the next node, before any disruption), and the change
 * of one node (activate the new version; roll back to the previous one).
 */
#include "controller/ops/op_upgrade.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bundle.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/api/auth.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/ops.h"
#include "controller/ops/rolling.h"
#include "controller/ops/sw_steps.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/remote/storage_peers.h"
#include "controller/state/config.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"
#include "controller/state/software.h"

#define PRESTAGE_PARALLEL 16 /* nodes fetching the bundle from the controller at once */

int hc_version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            long x = strtol(a, (char **)&a, 10), y = strtol(b, (char **)&b, 10);
            if (x != y)
                return x < y ? -1 : 1;
        } else if (*a != *b) {
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        } else {
            a++;
            b++;
        }
    }
    return 0;
}

/* --- plan ----------------------------------------------------------------------------------- */

/* The configuration's overrides must stay valid under the new version's schema (a setting it no
 * longer has is dropped): refused (409) naming the first that is not, before any node is
 * touched. */
static int check_settings(struct hc_db *db, const char *to, const json_t *manifest,
                          struct hc_error *err)
{
    int64_t rev;
    json_t *overrides = NULL;
    if (hc_config_desired(db, &rev, &overrides, err) < 0)
        return -1;
    struct hc_settings_schema *s = hc_settings_schema_of(manifest, err);
    int rc = s ? hc_settings_upgrade_check(s, overrides, NULL, NULL, err) : -1;
    if (rc < 0 && s) {
        hc_error_prefix(err, "%s: configuration revision %lld", to, (long long)rev);
        hc_error_hint(err, "change the setting first (hcctl config set / unset), then upgrade");
    }
    hc_settings_schema_free(s);
    json_decref(overrides);
    return rc;
}

static const char *const node_steps[] = {
    "stage",         "budget", "ok_to_stop", "drain",  "stop", "activate",
    "verify_health", "start",  "healthy",    "resync", NULL};

json_t *hc_upgrade_plan(struct hc_db *db, const json_t *params, struct hc_error *err)
{
    const char *to = hc_json_str(params, "to_version", "");
    json_t *bundle = hc_sw_bundle_row(db, to, err), *plan = NULL;
    struct hc_node_row *nodes = NULL;
    size_t n = 0;
    if (!bundle)
        return NULL;
    const char *min = hc_json_str(json_object_get(bundle, "manifest_json"), "min_upgrade_from", "");
    if (strcmp(hc_bundle_kind(json_object_get(bundle, "manifest_json")), HC_BUNDLE_KIND_SERVICE)) {
        hc_error_set(err, HC_E(BUNDLE_KIND), "%s is an agent bundle, not a storage service", to);
        hc_error_hint(err, "an agent bundle is rolled out with 'hcctl agent upgrade --to %s'", to);
        goto cleanup;
    }
    if (check_settings(db, to, json_object_get(bundle, "manifest_json"), err) < 0 ||
        hc_nodes_rows(db, NULL, &nodes, &n, err) < 0)
        goto cleanup;
    if (n == 0) {
        hc_error_set(err, HC_E(CONFLICT), "the cluster has no nodes to upgrade");
        hc_error_hint(err, "bring nodes in first: hcctl cluster create / hcctl node add");
        goto cleanup;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        const char *from = nodes[i].software_version ? nodes[i].software_version : "";
        const char *name = nodes[i].name;
        if (from[0] && min[0] && hc_version_cmp(from, min) < 0 && hc_version_cmp(from, to)) {
            json_decref(list);
            hc_error_set(err, HC_E(VERSION_INCOMPATIBLE),
                         "node '%s' runs %s, older than %s's "
                         "min_upgrade_from %s",
                         name, from, to, min);
            hc_error_hint(err, "upgrade it to %s or later first", min);
            goto cleanup;
        }
        json_t *steps = json_array();
        int done = from[0] && !strcmp(from, to);
        for (size_t s = 0; !done && node_steps[s]; s++)
            json_array_append_new(steps, json_string(node_steps[s]));
        json_array_append_new(list, json_pack("{s:s, s:s?, s:s, s:o}", "name", name, "from_version",
                                              from[0] ? from : NULL, "action",
                                              done ? "none (already on target)" : "upgrade",
                                              "steps", steps));
    }
    plan = json_pack("{s:s, s:s?, s:I, s:s, s:o}", "to_version", to, "min_upgrade_from",
                     min[0] ? min : NULL, "max_unavailable",
                     (json_int_t)hc_json_int(params, "max_unavailable", 1), "batch",
                     hc_rolling_params_domain(params) ? "domain" : "node", "nodes", list);
    if (hc_rolling_params_domain(params)) {
        /* the batches: whole domains, max_unavailable of them at a time, of the nodes to
         * upgrade; each goes one node at a time instead when the storage service refuses
         * ok-to-stop for it as a set (decided when it comes, the plan cannot know) */
        json_t *todo = json_array();
        for (size_t i = 0; i < n; i++) {
            const char *from = nodes[i].software_version ? nodes[i].software_version : "";
            if (!from[0] || strcmp(from, to) != 0)
                json_array_append_new(todo, json_pack("{s:s, s:s?}", "name", nodes[i].name,
                                                      "failure_domain", nodes[i].failure_domain));
        }
        json_object_set_new(
            plan, "batches",
            hc_rolling_plan_batches(todo, (int)hc_json_int(params, "max_unavailable", 1)));
        json_decref(todo);
    }
cleanup:
    json_decref(bundle);
    hc_node_rows_free(nodes, n);
    return plan;
}

/* --- the run ------------------------------------------------------------------------------ */

struct upgrade {
    struct hc_rolling r;
    struct hc_http_client *client; /* the run's own thread */
    const char *to;
    struct hc_sw_target target; /* the bundle and the token the agents fetch it with */
    json_t *nodes;              /* rows: name, agent_url, software_version */
};
static int step_activate(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    struct hc_rolling_node *n = arg;
    return hc_sw_activate_node(ctx, n->svc, n->r->to, detail, len, err);
}

static int step_rollback(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    struct hc_rolling_node *n = arg;
    const char *to = n->r->to;
    struct hc_sw_state st;
    int written;
    /* A node no longer on the failed version was rolled back by this step before a restart: a
     * second rollback would find no rollback target left (409) and fail a node that is fine. */
    if (hc_sw_state(n->svc, &st, err) < 0 ||
        (!strcmp(st.current, to) &&
         (hc_sw_rollback(n->svc, err) < 0 || hc_sw_state(n->svc, &st, err) < 0)) ||
        hc_maint_wait_healthy(ctx, n->svc, n->r->node_timeout_ms, err) < 0 ||
        (written = hc_rolling_event_written(ctx, "software.rolled_back", n->svc->name, err)) < 0 ||
        (!written &&
         hc_event_add(hc_op_db(ctx), "software.rolled_back", n->svc->name, hc_op_id(ctx),
                      "controller", json_pack("{s:s, s:s}", "from", to, "to", st.current), err,
                      "node %s rolled back from %s to %s", n->svc->name, to, st.current) < 0))
        return -1;
    snprintf(n->previous, sizeof(n->previous), "%s", st.current);
    snprintf(detail, len, "rolled back to %s, healthy", st.current);
    return 0;
}

/* The version the node now runs, recorded once it is back. */
static int upgrade_done(struct hc_rolling_node *n, int rolled_back, struct hc_error *err)
{
    return hc_node_set_software_version(hc_op_db(n->ctx), n->svc->name,
                                        rolled_back ? n->previous : n->r->to, hc_now_ms(), err);
}

int hc_upgrade_check_nodes_up(struct hc_db *db, struct hc_error *err)
{
    struct hc_node_row *rows;
    size_t n, down = 0, first = 0;
    if (hc_nodes_rows(db, NULL, &rows, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].maintenance, "none") != 0 && !down++)
            first = i;
    if (down) {
        const struct hc_node_row *row = &rows[first];
        hc_error_set(err, HC_E(CONFLICT),
                     "node '%s' is in maintenance (%s, by operation "
                     "%s)%s: an upgrade takes every node down itself",
                     row->name, row->maintenance, row->maintenance_op ? row->maintenance_op : "?",
                     down > 1 ? ", and others" : "");
        hc_error_hint(err,
                      "bring it back first with 'hcctl maintenance exit %s' (see 'hcctl "
                      "maintenance status')",
                      row->name);
    }
    hc_node_rows_free(rows, n);
    return down ? -1 : 0;
}

/* One node's pre-staging (a slot's work). */
static enum hc_op_result stage_node(struct hc_rolling_node *n, const json_t *row,
                                    struct hc_error *err)
{
    (void)row;
    const char *name = n->svc->name;
    struct upgrade *u = n->r->change->arg;
    hc_rolling_progress(n->ctx, name, NULL, "stage");
    if (hc_sw_stage_step(n->ctx, n->svc, &u->target, err) < 0)
        return hc_rolling_classify(n->ctx, name, err);
    hc_rolling_progress(n->ctx, name, NULL, NULL); /* staged: pending, with no step under way */
    return HC_OP_SUCCEEDED;
}

/* Pre-stages the bundle on every node, PRESTAGE_PARALLEL at a time, before any disruption:
 * a node that cannot fetch or verify it fails the upgrade while every node still runs. */
static enum hc_op_result prestage(struct upgrade *u, struct hc_error *err)
{
    size_t i;
    json_t *row, *queue = json_array();
    json_array_foreach(u->nodes, i, row)
    {
        if (strcmp(hc_json_str(row, "software_version", ""), u->to) != 0)
            json_array_append(queue, row);
    }
    hc_op_waiting(u->r.ctx, "%zu node(s) to stage %s, up to %d at a time", json_array_size(queue),
                  u->to, PRESTAGE_PARALLEL);
    return hc_rolling_each(&u->r, queue, stage_node, PRESTAGE_PARALLEL, err);
}

static enum hc_op_result upgrade_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    struct upgrade u = {.to = hc_json_str(p, "to_version", "")};
    const struct hc_rolling_change change = {
        .what = "upgrade",
        .change_step = "activate",
        .node_state = "upgrading",
        .change = step_activate,
        .rollback = step_rollback,
        .done = upgrade_done,
        .rolled_back_code = HC_E(UPGRADE_ROLLED_BACK),
        .rolled_back_hint = "fix the bundle and upload a new version; the cluster is healthy on %s",
        .arg = &u};
    enum hc_op_result r = HC_OP_FAILED;
    hc_rolling_init(&u.r, ctx, &change, u.to, (int)hc_json_int(p, "max_unavailable", 1),
                    hc_json_int(p, "node_timeout_ms", HC_UPGRADE_NODE_TIMEOUT_MS));
    u.r.batch_domain = hc_rolling_params_domain(p);
    json_t *plan = hc_upgrade_plan(hc_op_db(ctx), p, err), *rows = NULL, *row;
    size_t i;
    if (!plan || hc_sw_target_load(hc_op_db(ctx), u.to, &u.target, err) < 0)
        goto cleanup;
    u.nodes = hc_db_query_json(hc_op_db(ctx), err,
                               "SELECT n.name, n.agent_url, "
                               "COALESCE(un.from_version, n.software_version) AS software_version "
                               "FROM nodes n LEFT JOIN upgrade_nodes un ON un.node = n.name AND "
                               "un.op_id = ? ORDER BY n.name",
                               "s", hc_op_id(ctx));
    if (!u.nodes || !(rows = json_array()))
        goto cleanup;
    json_array_foreach(u.nodes, i, row)
    {
        const char *from = hc_json_str(row, "software_version", NULL);
        json_array_append_new(rows,
                              json_pack("{s:s, s:s?, s:b}", "name", hc_json_str(row, "name", ""),
                                        "from", from, "done", from && !strcmp(from, u.to)));
    }
    if (hc_rolling_progress_init(&u.r, rows, err) < 0 ||
        hc_sw_target_token(ctx, &u.target, err) < 0 ||
        !(u.client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)) ||
        hc_storage_peers_step(ctx, u.client, err) < 0) /* a first install starts with peers */
        goto cleanup;
    if ((r = prestage(&u, err)) != HC_OP_SUCCEEDED)
        goto cleanup;
    r = hc_rolling_nodes(&u.r, err);
cleanup:
    if (r != HC_OP_PAUSED)
        hc_op_waiting(ctx, NULL);
    hc_sw_target_clear(ctx, &u.target);
    hc_http_client_free(u.client);
    json_decref(plan);
    json_decref(rows);
    json_decref(u.nodes);
    hc_rolling_clear(&u.r);
    return r;
}

/* --- status ------------------------------------------------------------------------------- */

json_t *hc_upgrade_status(struct hc_db *db, struct hc_error *err)
{
    json_t *ops = hc_db_query_json(db, err,
                                   "SELECT id FROM operations WHERE kind = ? "
                                   "ORDER BY created_at DESC LIMIT 1",
                                   "s", HC_UPGRADE_KIND);
    if (!ops)
        return NULL;
    const char *id = hc_json_str(json_array_get(ops, 0), "id", NULL);
    json_t *out = NULL, *show = NULL, *rows = NULL;
    if (!id) {
        /* Never ran: a status like any other (state "none", the same keys), not an error, so
         * that `hcctl upgrade status` exits 0 on a new cluster. */
        out =
            json_pack("{s:n, s:s, s:n, s:i, s:i, s:[], s:n, s:n}", "operation_id", "state", "none",
                      "to_version", "done", 0, "total", 0, "nodes", "error", "waiting_on");
        goto cleanup;
    }
    show = hc_ops_show(db, id, err);
    rows = hc_db_query_json(db, err,
                            "SELECT node AS name, from_version, to_version, state, step "
                            "FROM upgrade_nodes WHERE op_id = ? ORDER BY seq",
                            "s", id);
    if (!show || !rows)
        goto cleanup;
    const json_t *op = json_object_get(show, "operation");
    size_t i, done = 0;
    json_t *row;
    json_array_foreach(rows, i, row) done += !strcmp(hc_json_str(row, "state", ""), "done");
    out = json_pack("{s:s, s:O, s:O, s:I, s:I, s:O, s:O, s:O}", "operation_id", id, "state",
                    json_object_get(op, "state"), "to_version",
                    json_object_get(json_object_get(op, "params"), "to_version"), "done",
                    (json_int_t)done, "total", (json_int_t)json_array_size(rows), "nodes", rows,
                    "error", json_object_get(op, "error"), "waiting_on",
                    json_object_get(op, "waiting_on"));
cleanup:
    json_decref(ops);
    json_decref(show);
    json_decref(rows);
    return out;
}

const struct hc_op_kind hc_op_kind_upgrade = {HC_UPGRADE_KIND, 1, upgrade_run};
