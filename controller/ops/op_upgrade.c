/*
 * upgrade.rolling: see op_upgrade.h for the sequence and the rules it keeps.
 *
 * Parallelism: the pre-stage runs PRESTAGE_PARALLEL slots that each stage the next node; then
 * min(max_unavailable, nodes left, UPGRADE_MAX_PARALLEL) threads ("slots") each take the next node
 * and carry it all the way (maintenance, activate, health, exit maintenance, resync), then take the
 * next (hc_parallel_for, common/parallel.h). Each slot has its own forked operation context (its
 * own database connection) and its own agent client, made at its first node. Taking a node down
 * (budget, ok-to-stop, drain, stop) is done by one thread at a time under `admit`, so the budget
 * of the next node counts this one as down and the service answers ok-to-stop for it knowing
 * that this one is down; the rest runs in parallel. Nodes already down (a restart mid-way) are
 * taken first, so a resumed run brings them back before it takes any other node down. The first
 * failure or pause stops the taking of new nodes; the nodes already down are brought back.
 */
#include "controller/ops/op_upgrade.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/util.h"
#include "controller/api/auth.h"
#include "controller/ops/op_maintenance.h"
#include "controller/ops/ops.h"
#include "controller/ops/sw_steps.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/remote/storage_peers.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"
#include "controller/state/software.h"

#define UPGRADE_MAX_PARALLEL 32
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
    if (hc_nodes_rows(db, NULL, &nodes, &n, err) < 0)
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
    plan = json_pack("{s:s, s:s?, s:I, s:o}", "to_version", to, "min_upgrade_from",
                     min[0] ? min : NULL, "max_unavailable",
                     (json_int_t)hc_json_int(params, "max_unavailable", 1), "nodes", list);
cleanup:
    json_decref(bundle);
    hc_node_rows_free(nodes, n);
    return plan;
}

/* --- progress rows ------------------------------------------------------------------------ */

static void progress(struct hc_op_ctx *ctx, const char *node, const char *state, const char *step)
{
    struct hc_error err = {0};
    if (hc_db_run(hc_op_db(ctx), &err,
                  "UPDATE upgrade_nodes SET state = COALESCE(?, state), "
                  "step = ?, updated_at = ? WHERE op_id = ? AND node = ?",
                  "ssiss", state, step, hc_now_ms(), hc_op_id(ctx), node) < 0)
        HC_WARN("upgrade %s: cannot record progress of %s: %s", hc_op_id(ctx), node, err.message);
}

/* The per-node rows, made once (the first run) so that from_version is what ran before. */
static int progress_init(struct hc_op_ctx *ctx, const json_t *nodes, const char *to,
                         struct hc_error *err)
{
    struct hc_db *db = hc_op_db(ctx);
    size_t i;
    json_t *row;
    if (hc_db_begin(db, err) < 0)
        return -1;
    json_array_foreach(nodes, i, row)
    {
        const char *from = hc_json_str(row, "software_version", NULL);
        int done = from && !strcmp(from, to);
        if (hc_db_run(db, err,
                      "INSERT OR IGNORE INTO upgrade_nodes (op_id, node, seq, "
                      "from_version, to_version, state, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      "ssisssi", hc_op_id(ctx), hc_json_str(row, "name", ""), (int64_t)i, from, to,
                      done ? "done" : "pending", hc_now_ms()) < 0) {
            hc_db_rollback(db);
            return -1;
        }
    }
    return hc_db_commit(db, err);
}

/* --- the run ------------------------------------------------------------------------------ */

struct upgrade;

/* One slot (a thread of run_slots): its own context and agent client, kept from node to node. */
struct slot {
    struct upgrade *u;
    struct hc_op_ctx *ctx;
    struct hc_http_client *client;
};

/* What a slot does with one node of the queue. */
typedef enum hc_op_result (*node_work_fn)(struct slot *w, const json_t *row, struct hc_error *err);

struct upgrade {
    struct hc_op_ctx *ctx;
    struct hc_http_client *client; /* the run's own thread (pre-stage) */
    const char *to;                /* target.version */
    struct hc_sw_target target;    /* the bundle, and the token the agents fetch it with */
    json_t *nodes;                 /* rows: name, agent_url, software_version */
    int max_unavailable;
    int64_t node_timeout_ms;
    /* The slots: threads taking the next row of the queue, for pre-staging and for upgrading. */
    node_work_fn work;
    json_t *queue; /* rows {name, agent_url}; to upgrade: nodes already down first */
    struct slot slots[UPGRADE_MAX_PARALLEL]; /* by worker index; each touched by its thread only */
    pthread_mutex_t admit;                   /* held while a node is taken down (budget .. stop) */
    pthread_mutex_t lock;                    /* guards stop, result and err */
    int stop;                                /* a node failed or paused: no new node is taken */
    enum hc_op_result result;                /* the gravest outcome of a slot */
    struct hc_error err;                     /* the first failure */
};

struct node_step {
    struct upgrade *u;
    struct hc_op_ctx *ctx;
    struct hc_http_client *client;
    struct hc_svc_node svc;
    char previous[64];
};

static int step_verify_health(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                              struct hc_error *err)
{
    struct node_step *s = arg;
    int64_t t0 = hc_mono_ms();
    if (hc_maint_wait_healthy(ctx, &s->svc, s->u->node_timeout_ms, err) < 0)
        return -1;
    snprintf(detail, len, "%s healthy after %lld ms", s->u->to, (long long)(hc_mono_ms() - t0));
    return 0;
}

static int step_rollback(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                         struct hc_error *err)
{
    struct node_step *s = arg;
    struct hc_sw_state st;
    int written;
    /* A node no longer on the failed version was rolled back by this step before a restart: a
     * second rollback would find no rollback target left (409) and fail a node that is fine. */
    if (hc_sw_state(&s->svc, &st, err) < 0 ||
        (!strcmp(st.current, s->u->to) &&
         (hc_sw_rollback(&s->svc, err) < 0 || hc_sw_state(&s->svc, &st, err) < 0)) ||
        hc_maint_wait_healthy(ctx, &s->svc, s->u->node_timeout_ms, err) < 0 ||
        (written = hc_sw_event_written(ctx, "software.rolled_back", s->svc.name, err)) < 0 ||
        (!written &&
         hc_event_add(hc_op_db(ctx), "software.rolled_back", s->svc.name, hc_op_id(ctx),
                      "controller", json_pack("{s:s, s:s}", "from", s->u->to, "to", st.current),
                      err, "node %s rolled back from %s to %s", s->svc.name, s->u->to,
                      st.current) < 0))
        return -1;
    snprintf(s->previous, sizeof(s->previous), "%s", st.current);
    snprintf(detail, len, "rolled back to %s, healthy", st.current);
    return 0;
}

static int record_version(struct hc_op_ctx *ctx, const char *node, const char *version,
                          struct hc_error *err)
{
    return hc_node_set_software_version(hc_op_db(ctx), node, version, hc_now_ms(), err);
}

/* Rolls a node whose new version failed its health check back, and brings it out of
 * maintenance on the old version. The operation then fails with the first error. */
static enum hc_op_result roll_back(struct node_step *s, const struct hc_error *cause,
                                   struct hc_error *err)
{
    struct hc_op_ctx *ctx = s->ctx;
    struct hc_error rb = {0};
    HC_WARN("upgrade %s: %s failed on %s: %s; rolling back", hc_op_id(ctx), s->u->to, s->svc.name,
            cause->message);
    progress(ctx, s->svc.name, "rolling_back", "rollback");
    if (hc_op_step(ctx, s->svc.name, "rollback", step_rollback, s, &rb) < 0 ||
        hc_maint_exit_steps(ctx, s->client, s->svc.name, s->u->node_timeout_ms, &rb) < 0 ||
        record_version(ctx, s->svc.name, s->previous, &rb) < 0) {
        progress(ctx, s->svc.name, "failed", "rollback");
        hc_error_set(err, HC_E(ROLLBACK_FAILED),
                     "%s failed on %s (%s) and the rollback failed "
                     "too: %s",
                     s->u->to, s->svc.name, cause->message, rb.message);
        hc_error_hint(err, "the node is in maintenance; see 'hcctl node show %s'", s->svc.name);
        return HC_OP_FAILED;
    }
    progress(ctx, s->svc.name, "rolled_back", NULL);
    hc_error_set(err, HC_E(UPGRADE_ROLLED_BACK),
                 "%s failed its health check on %s: %s; "
                 "rolled back to %s, no further node was taken down",
                 s->u->to, s->svc.name, cause->message, s->previous);
    hc_error_hint(err, "fix the bundle and upload a new version; the cluster is healthy on %s",
                  s->previous);
    return HC_OP_FAILED;
}

static int stopping(void *arg)
{
    struct upgrade *u = arg;
    pthread_mutex_lock(&u->lock);
    int stop = u->stop;
    pthread_mutex_unlock(&u->lock);
    return stop;
}

/* 1 when the node is out of maintenance, 0 when this upgrade took it down (-1 on error, also
 * for a node another operation or the admin holds in maintenance: not this upgrade's to bring
 * back). */
static int node_up(struct hc_op_ctx *ctx, const char *name, struct hc_error *err)
{
    struct hc_maint_node mn;
    if (hc_maint_node_load(hc_op_db(ctx), name, &mn, err) < 0)
        return -1;
    if (!strcmp(mn.maintenance, "none"))
        return 1;
    if (mn.maintenance_op[0] && strcmp(mn.maintenance_op, hc_op_id(ctx)) != 0) {
        hc_error_set(err, HC_E(CONFLICT),
                     "node '%s' is in maintenance by operation %s, "
                     "not by this upgrade: left alone",
                     name, mn.maintenance_op);
        return hc_error_hint(err,
                             "bring it back with 'hcctl maintenance exit %s', then resume "
                             "or run the upgrade again",
                             name);
    }
    return 0;
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

/* 1 when this operation already brought the node back (its resync step succeeded). */
static int back_already(struct hc_op_ctx *ctx, const char *name)
{
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(hc_op_db(ctx), &err,
                                    "SELECT state FROM operation_steps "
                                    "WHERE op_id = ? AND node = ? AND step = 'resync'",
                                    "ss", hc_op_id(ctx), name);
    int done = !strcmp(hc_json_str(json_array_get(rows, 0), "state", ""), "succeeded");
    json_decref(rows);
    return done;
}

/* Takes the node down (one slot at a time), then upgrades it and brings it back. Returns
 * HC_OP_SUCCEEDED also when the node was left alone because the upgrade stops taking nodes. */
static enum hc_op_result upgrade_node(struct slot *w, const json_t *row, struct hc_error *err)
{
    struct upgrade *u = w->u;
    struct hc_op_ctx *ctx = w->ctx;
    struct node_step s = {.u = u, .ctx = ctx, .client = w->client};
    const char *name = hc_json_str(row, "name", "");
    s.svc = (struct hc_svc_node){w->client, name, hc_json_str(row, "agent_url", ""),
                                 hc_agent_timeout_ms(hc_op_controller(ctx))};
    struct hc_maint_params mp = {.mode = "ensure-accessibility",
                                 .max_unavailable = u->max_unavailable,
                                 .timeout_ms = u->node_timeout_ms,
                                 .wait_budget_ms = u->node_timeout_ms,
                                 .wait_ok_to_stop_ms = u->node_timeout_ms,
                                 .cancelled = stopping,
                                 .cancel_arg = u};
    enum hc_op_result r = HC_OP_SUCCEEDED;
    int rc = 0;
    pthread_mutex_lock(&u->admit);
    int up = node_up(ctx, name, err);
    /* A node already down (a run resumed mid-way) is brought back first; one still up is taken
     * down unless the upgrade stops, pauses or aborts (honoured here, the safe point). */
    if (up < 0) {
        r = HC_OP_FAILED;
    } else if (up && back_already(ctx, name)) {
        /* upgraded and back before a restart: only the bookkeeping below is left */
    } else if (up && stopping(u)) {
        pthread_mutex_unlock(&u->admit);
        return HC_OP_SUCCEEDED; /* left alone: another slot stopped the upgrade */
    } else if (!up || (r = hc_op_checkpoint(ctx)) == HC_OP_SUCCEEDED) {
        progress(ctx, name, "upgrading", "maintenance");
        rc = hc_maint_enter_steps(ctx, w->client, name, &mp, err);
    }
    pthread_mutex_unlock(&u->admit);
    if (r != HC_OP_SUCCEEDED)
        return r;
    if (rc < 0) {
        struct hc_error ignore = {0};
        if (node_up(ctx, name, &ignore) == 1)
            progress(ctx, name, "pending", NULL); /* it was not taken down */
        if (!strcmp(err->code, "interrupted") && stopping(u))
            return HC_OP_SUCCEEDED; /* another slot stopped the upgrade and has the reason */
        return hc_sw_step_result(ctx, name, err);
    }
    progress(ctx, name, "upgrading", "activate");
    if (hc_sw_activate_step(ctx, &s.svc, u->to, err) < 0)
        return hc_sw_step_result(ctx, name, err);
    progress(ctx, name, NULL, "health");
    if (hc_op_step(ctx, name, "verify_health", step_verify_health, &s, err) < 0) {
        r = hc_sw_step_result(ctx, name, err);
        if (r != HC_OP_FAILED)
            return r;
        struct hc_error cause = *err;
        return roll_back(&s, &cause, err);
    }
    progress(ctx, name, NULL, "resync");
    if (hc_maint_exit_steps(ctx, w->client, name, u->node_timeout_ms, err) < 0)
        return hc_sw_step_result(ctx, name, err);
    if (record_version(ctx, name, u->to, err) < 0)
        return HC_OP_FAILED;
    progress(ctx, name, "done", NULL);
    return HC_OP_SUCCEEDED;
}

/* Records a slot's outcome: any outcome but success stops the taking of new nodes; the
 * operation ends with the gravest (failed > aborted > paused) and the first failure's reason. */
static void slot_outcome(struct upgrade *u, enum hc_op_result r, const struct hc_error *err)
{
    static const int gravity[] = {
        [HC_OP_SUCCEEDED] = 0, [HC_OP_PAUSED] = 1, [HC_OP_ABORTED] = 2, [HC_OP_FAILED] = 3};
    if (r == HC_OP_SUCCEEDED)
        return;
    pthread_mutex_lock(&u->lock);
    u->stop = 1;
    if (gravity[r] > gravity[u->result]) {
        u->result = r;
        if (r == HC_OP_FAILED)
            u->err = *err;
    }
    pthread_mutex_unlock(&u->lock);
}

/* Node i of the queue on slot `worker` (the parallel-for's item): the slot's context and agent
 * client are made at its first node. Non-zero (any outcome but success) ends the taking of
 * nodes. */
static int slot_item(void *arg, unsigned worker, size_t i)
{
    struct upgrade *u = arg;
    struct slot *w = &u->slots[worker];
    struct hc_error err = {0};
    enum hc_op_result r = HC_OP_FAILED;
    w->u = u;
    if ((w->ctx || (w->ctx = hc_op_ctx_fork(u->ctx, &err))) &&
        (w->client ||
         (w->client = hc_agent_client_new(hc_op_controller(w->ctx), hc_op_db(w->ctx), &err))))
        r = u->work(w, json_array_get(u->queue, i), &err);
    if (r == HC_OP_FAILED)
        HC_WARN("upgrade %s: %s", hc_op_id(u->ctx), err.message);
    slot_outcome(u, r, &err);
    return r != HC_OP_SUCCEEDED;
}

/* Runs u->work on every row of u->queue (which it takes over) with up to `want` slots; the
 * outcome is the gravest of theirs. */
static enum hc_op_result run_slots(struct upgrade *u, json_t *queue, node_work_fn work, size_t want,
                                   struct hc_error *err)
{
    json_decref(u->queue);
    u->queue = queue;
    u->work = work;
    u->stop = 0;
    u->result = HC_OP_SUCCEEDED;
    if (want > UPGRADE_MAX_PARALLEL)
        want = UPGRADE_MAX_PARALLEL;
    hc_parallel_for(json_array_size(queue), (unsigned)want, slot_item, u);
    for (size_t i = 0; i < UPGRADE_MAX_PARALLEL; i++) {
        hc_http_client_free(u->slots[i].client);
        hc_op_ctx_free_fork(u->slots[i].ctx);
        u->slots[i] = (struct slot){0};
    }
    if (u->result == HC_OP_FAILED)
        *err = u->err;
    return u->result;
}

/* Upgrades every node not done yet, up to max_unavailable at a time. */
static enum hc_op_result upgrade_nodes(struct upgrade *u, struct hc_error *err)
{
    json_t *queue = hc_db_query_json(hc_op_db(u->ctx), err,
                                     "SELECT n.name, n.agent_url FROM "
                                     "upgrade_nodes un JOIN nodes n ON n.name = un.node WHERE "
                                     "un.op_id = ? AND un.state != 'done' "
                                     "ORDER BY n.maintenance = 'none', un.seq",
                                     "s", hc_op_id(u->ctx));
    if (!queue)
        return HC_OP_FAILED;
    size_t want = (size_t)u->max_unavailable;
    hc_op_waiting(u->ctx, "%zu node(s) to upgrade, up to %zu at a time", json_array_size(queue),
                  want < json_array_size(queue) ? want : json_array_size(queue));
    return run_slots(u, queue, upgrade_node, want, err);
}

/* One node's pre-staging (a slot's work). */
static enum hc_op_result stage_node(struct slot *w, const json_t *row, struct hc_error *err)
{
    const char *name = hc_json_str(row, "name", "");
    struct node_step s = {.u = w->u, .ctx = w->ctx, .client = w->client};
    s.svc = (struct hc_svc_node){w->client, name, hc_json_str(row, "agent_url", ""),
                                 w->u->node_timeout_ms};
    progress(w->ctx, name, NULL, "stage");
    if (hc_sw_stage_step(w->ctx, &s.svc, &w->u->target, err) < 0)
        return hc_sw_step_result(w->ctx, name, err);
    progress(w->ctx, name, NULL, NULL); /* staged: pending, with no step under way */
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
    hc_op_waiting(u->ctx, "%zu node(s) to stage %s, up to %d at a time", json_array_size(queue),
                  u->to, PRESTAGE_PARALLEL);
    return run_slots(u, queue, stage_node, PRESTAGE_PARALLEL, err);
}

static enum hc_op_result upgrade_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    struct upgrade u = {.ctx = ctx, .to = hc_json_str(p, "to_version", "")};
    enum hc_op_result r = HC_OP_FAILED;
    pthread_mutex_init(&u.admit, NULL);
    pthread_mutex_init(&u.lock, NULL);
    u.max_unavailable = (int)hc_json_int(p, "max_unavailable", 1);
    u.node_timeout_ms = hc_json_int(p, "node_timeout_ms", HC_UPGRADE_NODE_TIMEOUT_MS);
    json_t *plan = hc_upgrade_plan(hc_op_db(ctx), p, err);
    if (!plan || hc_sw_target_load(hc_op_db(ctx), u.to, &u.target, err) < 0)
        goto cleanup;
    u.nodes = hc_db_query_json(hc_op_db(ctx), err,
                               "SELECT n.name, n.agent_url, "
                               "COALESCE(un.from_version, n.software_version) AS software_version "
                               "FROM nodes n LEFT JOIN upgrade_nodes un ON un.node = n.name AND "
                               "un.op_id = ? ORDER BY n.name",
                               "s", hc_op_id(ctx));
    if (!u.nodes || progress_init(ctx, u.nodes, u.to, err) < 0 ||
        hc_sw_target_token(ctx, &u.target, err) < 0 ||
        !(u.client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)) ||
        hc_storage_peers_step(ctx, u.client, err) < 0) /* a first install starts with peers */
        goto cleanup;
    if ((r = prestage(&u, err)) != HC_OP_SUCCEEDED)
        goto cleanup;
    r = upgrade_nodes(&u, err);
cleanup:
    if (r != HC_OP_PAUSED)
        hc_op_waiting(ctx, NULL);
    hc_sw_target_clear(ctx, &u.target);
    hc_http_client_free(u.client);
    json_decref(plan);
    json_decref(u.nodes);
    json_decref(u.queue);
    pthread_mutex_destroy(&u.admit);
    pthread_mutex_destroy(&u.lock);
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
