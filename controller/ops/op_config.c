/*
 * Applying a configuration revision (docs/config.md "Applying"):
 *
 *   config.apply    only live settings change: every node is handed the revision at once (up to
 *                   HC_ROLLING_MAX_PARALLEL calls in flight); its agent writes the values and the
 *                   service reloads them, no restart. Not disruptive. A node that does not answer
 *                   is left to the poller, which hands it the revision when it is back (drift
 *                   repair) — the operation says which.
 *   config.rolling  a restart setting changes: the rolling engine (rolling.h) takes each node
 *                   down (ok-to-stop, drain, stop), hands it the revision, starts the service,
 *                   waits for health (on failure: the node's previous revision back, restarted,
 *                   and the operation fails with the cluster healthy), resync, next node.
 *                   Disruptive (holds the cluster lease).
 *
 * params {"revision", "max_unavailable"?, "node_timeout_ms"?, "nodes"? (names: only those)}.
 * The result document: {"revision", "nodes": [{"name","state","detail"}]}.
 */
#include "controller/ops/op_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/op_upgrade.h"
#include "controller/ops/rolling.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/state/config.h"
#include "controller/state/events.h"

struct apply {
    struct hc_rolling r;
    int64_t revision;
    json_t *overrides; /* of revision */
    char to[32];       /* "revision N" */
    pthread_mutex_t lock;
    json_t *outcome; /* {name: {"state","detail"}}, guarded by lock */
};

static void note(struct apply *a, const char *node, const char *state, const char *detail)
{
    pthread_mutex_lock(&a->lock);
    json_object_set_new(a->outcome, node,
                        json_pack("{s:s, s:s}", "state", state, "detail", detail));
    pthread_mutex_unlock(&a->lock);
}

/* What a node answered, judged and stored as its config state. */
static void record_answer(struct hc_op_ctx *ctx, const char *node, const json_t *answer)
{
    struct hc_config_judge j;
    struct hc_error err = {0};
    char detail[400];
    if (hc_config_judge_init(&j, hc_op_db(ctx), &err) == 0) {
        const char *state = hc_config_judge_node(&j, answer, detail, sizeof(detail));
        hc_config_node_store(hc_op_db(ctx), node, answer, state, detail, &err);
    }
    if (err.code[0])
        HC_WARN("%s: cannot record the settings of %s: %s", hc_op_id(ctx), node, err.message);
    hc_config_judge_clear(&j);
}

/* Hands the node revision (overrides). */
static int push(struct hc_rolling_node *n, int64_t revision, const json_t *overrides, char *detail,
                size_t len, struct hc_error *err)
{
    json_t *answer = NULL;
    if (hc_cfg_push(n->svc, revision, overrides, &answer, err) < 0)
        return -1;
    record_answer(n->ctx, n->svc->name, answer);
    snprintf(detail, len, "revision %lld written (%zu changed%s)", (long long)revision,
             json_array_size(json_object_get(answer, "changed")),
             json_is_true(json_object_get(answer, "reloaded")) ? ", reloaded" : "");
    json_decref(answer);
    return 0;
}

/* --- config.apply: live, every node at once ---------------------------------------------- */

static int step_push_live(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                          struct hc_error *err)
{
    (void)ctx;
    struct hc_rolling_node *n = arg;
    struct apply *a = n->r->change->arg;
    return push(n, a->revision, a->overrides, detail, len, err);
}

static enum hc_op_result live_node(struct hc_rolling_node *n, const json_t *row,
                                   struct hc_error *err)
{
    (void)row;
    struct apply *a = n->r->change->arg;
    if (hc_op_step(n->ctx, n->svc->name, "settings", step_push_live, n, err) == 0) {
        note(a, n->svc->name, "applied", "");
        return HC_OP_SUCCEEDED;
    }
    if (!strcmp(err->code, "interrupted"))
        return hc_rolling_classify(n->ctx, n->svc->name, err);
    /* A node that is away or refuses does not hold the others back: it shows as drift (or
     * not_applied) and the poller repairs it when it can. */
    note(a, n->svc->name, hc_agent_err_is_transport(err) ? "unreachable" : "failed", err->message);
    return HC_OP_SUCCEEDED;
}

/* --- config.rolling: through the rolling engine ------------------------------------------ */

static int step_settings(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    (void)ctx;
    struct hc_rolling_node *n = arg;
    struct apply *a = n->r->change->arg;
    if (push(n, a->revision, a->overrides, detail, len, err) < 0 || hc_svc_start(n->svc, err) < 0)
        return -1;
    return 0;
}

/* The revision the node had before (its progress row's from), restarted and healthy. */
static int step_rollback(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    struct hc_rolling_node *n = arg;
    struct apply *a = n->r->change->arg;
    int64_t from = n->from[0] ? strtoll(n->from, NULL, 10) : 0;
    json_t *overrides = NULL;
    int found = hc_config_revision(hc_op_db(ctx), from, &overrides, err), rc = -1;
    if (found == 0)
        hc_error_set(err, HC_E(NOT_FOUND), "revision %lld is not recorded", (long long)from);
    if (found < 1 || push(n, from, overrides, detail, len, err) < 0 ||
        hc_svc_stop(n->svc, err) < 0 || hc_svc_start(n->svc, err) < 0 ||
        hc_maint_wait_healthy(ctx, n->svc, n->r->node_timeout_ms, err) < 0)
        goto cleanup;
    int written = hc_rolling_event_written(ctx, "config.rolled_back", n->svc->name, err);
    if (written < 0 ||
        (!written &&
         hc_event_add(
             hc_op_db(ctx), "config.rolled_back", n->svc->name, hc_op_id(ctx), "controller",
             json_pack("{s:I, s:I}", "from", (json_int_t)a->revision, "to", (json_int_t)from), err,
             "node %s put back from configuration revision %lld to %lld", n->svc->name,
             (long long)a->revision, (long long)from) < 0))
        goto cleanup;
    snprintf(n->previous, sizeof(n->previous), "revision %lld", (long long)from);
    snprintf(detail, len, "back on revision %lld, healthy", (long long)from);
    rc = 0;
cleanup:
    json_decref(overrides);
    return rc;
}

static int rolling_done(struct hc_rolling_node *n, int rolled_back, struct hc_error *err)
{
    (void)err;
    struct apply *a = n->r->change->arg;
    note(a, n->svc->name, rolled_back ? "rolled_back" : "applied", rolled_back ? n->previous : "");
    return 0;
}

/* --- the run ------------------------------------------------------------------------------- */

/* The nodes to hand the revision: every node, or those params name; progress rows made once. */
static json_t *target_nodes(struct apply *a, struct hc_error *err)
{
    struct hc_op_ctx *ctx = a->r.ctx;
    const json_t *only = json_object_get(hc_op_params(ctx), "nodes");
    json_t *rows = hc_db_query_json(hc_op_db(ctx), err,
                                    "SELECT n.name, n.agent_url, n.software_version, "
                                    "n.config_digest, COALESCE(un.from_version, "
                                    "CAST(COALESCE(n.config_revision, 0) AS TEXT)) AS \"from\" "
                                    "FROM nodes n LEFT JOIN upgrade_nodes un ON un.node = n.name "
                                    "AND un.op_id = ? ORDER BY n.name",
                                    "s", hc_op_id(ctx));
    if (!rows || !json_is_array(only))
        return rows;
    json_t *out = json_array(), *row;
    size_t i, k;
    json_array_foreach(rows, i, row)
    {
        for (k = 0; k < json_array_size(only); k++) {
            const char *want = json_string_value(json_array_get(only, k));
            if (want && !strcmp(hc_json_str(row, "name", ""), want))
                json_array_append(out, row);
        }
    }
    json_decref(rows);
    return out;
}

static enum hc_op_result finish(struct apply *a, enum hc_op_result r, struct hc_error *err)
{
    struct hc_op_ctx *ctx = a->r.ctx;
    json_t *nodes = json_array(), *v;
    const char *name;
    size_t missed = 0;
    json_object_foreach(a->outcome, name, v)
    {
        missed += strcmp(hc_json_str(v, "state", ""), "applied") != 0;
        json_array_append_new(nodes, json_pack("{s:s, s:O, s:O}", "name", name, "state",
                                               json_object_get(v, "state"), "detail",
                                               json_object_get(v, "detail")));
    }
    json_t *doc = json_pack("{s:I, s:o}", "revision", (json_int_t)a->revision, "nodes", nodes);
    struct hc_error e = {0};
    if (hc_ops_store_result(hc_op_db(ctx), hc_op_id(ctx), doc, &e) < 0)
        HC_WARN("%s: cannot store the result: %s", hc_op_id(ctx), e.message);
    json_decref(doc);
    if (r == HC_OP_SUCCEEDED)
        HC_INFO("%s: configuration revision %lld on %zu node(s)%s", hc_op_id(ctx),
                (long long)a->revision, json_object_size(a->outcome) - missed,
                missed ? ", others left to the poller's repair" : "");
    (void)err;
    return r;
}

static enum hc_op_result config_run(struct hc_op_ctx *ctx, int rolling, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    struct apply a = {.revision = hc_json_int(p, "revision", 0)};
    const struct hc_rolling_change change = {
        .what = "configuration change",
        .change_step = "settings",
        .node_state = "applying",
        .change = step_settings,
        .rollback = step_rollback,
        .done = rolling_done,
        .rolled_back_code = HC_E(CONFIG_ROLLED_BACK),
        .rolled_back_hint = "the cluster is healthy; fix the value and set it again, or "
                            "'hcctl config revert' to the %s",
        .arg = &a};
    enum hc_op_result r = HC_OP_FAILED;
    json_t *nodes = NULL, *rows = NULL, *row;
    size_t i;
    snprintf(a.to, sizeof(a.to), "revision %lld", (long long)a.revision);
    pthread_mutex_init(&a.lock, NULL);
    a.outcome = json_object();
    hc_rolling_init(&a.r, ctx, &change, a.to, (int)hc_json_int(p, "max_unavailable", 1),
                    hc_json_int(p, "node_timeout_ms", HC_UPGRADE_NODE_TIMEOUT_MS));
    a.r.batch_domain = hc_rolling_params_domain(p);
    int found = hc_config_revision(hc_op_db(ctx), a.revision, &a.overrides, err);
    if (found == 0)
        hc_error_set(err, HC_E(NOT_FOUND), "revision %lld is not recorded", (long long)a.revision);
    if (found < 1 || !(nodes = target_nodes(&a, err)))
        goto cleanup;
    if (!rolling) {
        hc_op_waiting(ctx, "%zu node(s) to hand revision %lld", json_array_size(nodes),
                      (long long)a.revision);
        r = hc_rolling_each(&a.r, json_incref(nodes), live_node, HC_ROLLING_MAX_PARALLEL, err);
        goto cleanup;
    }
    /* A node that already has these values (a revert to what it runs, a node repaired) is only
     * handed the revision number: no restart for nothing. */
    struct hc_config_judge j;
    json_t *same = json_array();
    if (hc_config_judge_init(&j, hc_op_db(ctx), err) < 0) {
        json_decref(same);
        goto cleanup;
    }
    rows = json_array();
    json_array_foreach(nodes, i, row)
    {
        const char *why,
            *want = hc_config_judge_digest(&j, hc_json_str(row, "software_version", ""), &why);
        int done = want[0] && !strcmp(want, hc_json_str(row, "config_digest", ""));
        if (done)
            json_array_append(same, row);
        json_array_append_new(rows,
                              json_pack("{s:O, s:s, s:b}", "name", json_object_get(row, "name"),
                                        "from", hc_json_str(row, "from", "0"), "done", done));
    }
    hc_config_judge_clear(&j);
    if (hc_rolling_progress_init(&a.r, rows, err) < 0 ||
        (r = hc_rolling_each(&a.r, same, live_node, HC_ROLLING_MAX_PARALLEL, err)) !=
            HC_OP_SUCCEEDED)
        goto cleanup;
    r = hc_rolling_nodes(&a.r, err);
cleanup:
    if (r != HC_OP_PAUSED)
        hc_op_waiting(ctx, NULL);
    r = finish(&a, r, err);
    json_decref(nodes);
    json_decref(rows);
    json_decref(a.overrides);
    json_decref(a.outcome);
    hc_rolling_clear(&a.r);
    pthread_mutex_destroy(&a.lock);
    return r;
}

static enum hc_op_result config_apply_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    return config_run(ctx, 0, err);
}

static enum hc_op_result config_rolling_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    return config_run(ctx, 1, err);
}

const struct hc_op_kind hc_op_kind_config_apply = {HC_CONFIG_APPLY_KIND, 0, config_apply_run};
const struct hc_op_kind hc_op_kind_config_rolling = {HC_CONFIG_ROLLING_KIND, 1, config_rolling_run};

int hc_config_blocked(struct hc_db *db, struct hc_error *err)
{
    json_t *ops = hc_ops_active(db, err), *op;
    size_t i;
    if (!ops)
        return -1;
    json_array_foreach(ops, i, op)
    {
        const char *kind = hc_json_str(op, "kind", ""), *id = hc_json_str(op, "id", "?");
        const struct hc_op_kind *k = hc_ops_kind(kind);
        if (!k || k->disruptive || !strcmp(k->name, HC_CONFIG_APPLY_KIND)) {
            hc_error_set(err, HC_E(CONFLICT), "operation %s (%s) is %s", id, kind,
                         hc_json_str(op, "state", "running"));
            hc_error_hint(err, "wait for it (hcctl operation wait %s) or abort it", id);
            json_decref(ops);
            return -1;
        }
    }
    json_decref(ops);
    return 0;
}
