/* The rolling engine (see rolling.h). */
#include "controller/ops/rolling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/parallel.h"
#include "common/util.h"
#include "controller/ops/op_maintenance.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

void hc_rolling_init(struct hc_rolling *r, struct hc_op_ctx *ctx,
                     const struct hc_rolling_change *change, const char *to, int max_unavailable,
                     int64_t node_timeout_ms)
{
    memset(r, 0, sizeof(*r));
    r->ctx = ctx;
    r->change = change;
    r->to = to;
    r->max_unavailable = max_unavailable;
    r->node_timeout_ms = node_timeout_ms;
    pthread_mutex_init(&r->admit, NULL);
    pthread_mutex_init(&r->lock, NULL);
}

void hc_rolling_clear(struct hc_rolling *r)
{
    json_decref(r->queue);
    r->queue = NULL;
    pthread_mutex_destroy(&r->admit);
    pthread_mutex_destroy(&r->lock);
}

/* --- progress rows ------------------------------------------------------------------------ */

void hc_rolling_progress(struct hc_op_ctx *ctx, const char *node, const char *state,
                         const char *step)
{
    struct hc_error err = {0};
    if (hc_db_run(hc_op_db(ctx), &err,
                  "UPDATE upgrade_nodes SET state = COALESCE(?, state), "
                  "step = ?, updated_at = ? WHERE op_id = ? AND node = ?",
                  "ssiss", state, step, hc_now_ms(), hc_op_id(ctx), node) < 0)
        HC_WARN("%s: cannot record progress of %s: %s", hc_op_id(ctx), node, err.message);
}

int hc_rolling_progress_init(struct hc_rolling *r, const json_t *rows, struct hc_error *err)
{
    struct hc_db *db = hc_op_db(r->ctx);
    size_t i;
    json_t *row;
    if (hc_db_begin(db, err) < 0)
        return -1;
    json_array_foreach(rows, i, row)
    {
        int done = json_is_true(json_object_get(row, "done"));
        if (hc_db_run(db, err,
                      "INSERT OR IGNORE INTO upgrade_nodes (op_id, node, seq, "
                      "from_version, to_version, state, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      "ssisssi", hc_op_id(r->ctx), hc_json_str(row, "name", ""), (int64_t)i,
                      hc_json_str(row, "from", NULL), r->to, done ? "done" : "pending",
                      hc_now_ms()) < 0) {
            hc_db_rollback(db);
            return -1;
        }
    }
    return hc_db_commit(db, err);
}

/* --- helpers of the steps ----------------------------------------------------------------- */

int hc_rolling_event_written(struct hc_op_ctx *ctx, const char *type, const char *node,
                             struct hc_error *err)
{
    /* Only the events since the operation started are looked at (events_ts index): the log
     * is long. */
    json_t *rows = hc_db_query_json(hc_op_db(ctx), err,
                                    "SELECT COUNT(*) AS n FROM events "
                                    "WHERE ts >= (SELECT COALESCE(started_at, created_at) FROM "
                                    "operations WHERE id = ?) AND op_id = ? AND node = ? AND "
                                    "type = ?",
                                    "ssss", hc_op_id(ctx), hc_op_id(ctx), node, type);
    if (!rows)
        return -1;
    int n = (int)hc_json_int(json_array_get(rows, 0), "n", 0);
    json_decref(rows);
    return n > 0;
}

enum hc_op_result hc_rolling_classify(struct hc_op_ctx *ctx, const char *node,
                                      const struct hc_error *err)
{
    if (!strcmp(err->code, "interrupted"))
        return hc_op_checkpoint(ctx) == HC_OP_ABORTED ? HC_OP_ABORTED : HC_OP_PAUSED;
    if (hc_agent_err_is_transport(err)) {
        hc_op_pause_until_reachable(ctx, node, err->message);
        return HC_OP_PAUSED;
    }
    char other[128];
    struct hc_error e = {0};
    if (!strcmp(err->code, HC_ERR_OTHER_UNREACHABLE) &&
        hc_avail_unreachable(hc_op_db(ctx), node, other, sizeof(other), &e) > 0) {
        hc_op_pause_until_reachable(ctx, other, err->message);
        return HC_OP_PAUSED;
    }
    return HC_OP_FAILED;
}

static int stopping(void *arg)
{
    struct hc_rolling *r = arg;
    pthread_mutex_lock(&r->lock);
    int stop = r->stop;
    pthread_mutex_unlock(&r->lock);
    return stop;
}

/* 1 when the node is out of maintenance, 0 when this operation took it down (-1 on error, also
 * for a node another operation or the admin holds in maintenance: not this one's to bring
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
                     "not by this operation: left alone",
                     name, mn.maintenance_op);
        return hc_error_hint(err,
                             "bring it back with 'hcctl maintenance exit %s', then resume "
                             "or run the operation again",
                             name);
    }
    return 0;
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

/* --- one node ----------------------------------------------------------------------------- */

static int step_verify_health(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                              struct hc_error *err)
{
    struct hc_rolling_node *n = arg;
    int64_t t0 = hc_mono_ms();
    if (hc_maint_wait_healthy(ctx, n->svc, n->r->node_timeout_ms, err) < 0)
        return -1;
    snprintf(detail, len, "%s healthy after %lld ms", n->r->to, (long long)(hc_mono_ms() - t0));
    return 0;
}

/* Puts a node whose change failed its health check back, and brings it out of maintenance on
 * what it ran. The operation then fails with the first error. */
static enum hc_op_result roll_back(struct hc_rolling_node *n, const struct hc_error *cause,
                                   struct hc_error *err)
{
    struct hc_op_ctx *ctx = n->ctx;
    const struct hc_rolling_change *c = n->r->change;
    struct hc_error rb = {0};
    HC_WARN("%s %s: %s failed on %s: %s; rolling back", c->what, hc_op_id(ctx), n->r->to,
            n->svc->name, cause->message);
    hc_rolling_progress(ctx, n->svc->name, "rolling_back", "rollback");
    if (hc_op_step(ctx, n->svc->name, "rollback", c->rollback, n, &rb) < 0 ||
        hc_maint_exit_steps(ctx, n->client, n->svc->name, n->r->node_timeout_ms, &rb) < 0 ||
        c->done(n, 1, &rb) < 0) {
        hc_rolling_progress(ctx, n->svc->name, "failed", "rollback");
        hc_error_set(err, HC_E(ROLLBACK_FAILED),
                     "%s failed on %s (%s) and the rollback failed too: %s", n->r->to, n->svc->name,
                     cause->message, rb.message);
        hc_error_hint(err, "the node is in maintenance; see 'hcctl node show %s'", n->svc->name);
        return HC_OP_FAILED;
    }
    hc_rolling_progress(ctx, n->svc->name, "rolled_back", NULL);
    hc_error_set(err, c->rolled_back_code,
                 "%s failed its health check on %s: %s; rolled back to %s, no further node "
                 "was taken down",
                 n->r->to, n->svc->name, cause->message, n->previous);
    hc_error_hint(err, c->rolled_back_hint, n->previous);
    return HC_OP_FAILED;
}

/* Takes the node down (one slot at a time), then changes it and brings it back. Returns
 * HC_OP_SUCCEEDED also when the node was left alone because the operation stops taking nodes. */
static enum hc_op_result change_node(struct hc_rolling_node *n, const json_t *row,
                                     struct hc_error *err)
{
    struct hc_rolling *r = n->r;
    struct hc_op_ctx *ctx = n->ctx;
    const char *name = n->svc->name;
    struct hc_maint_params mp = {.mode = "ensure-accessibility",
                                 .max_unavailable = r->max_unavailable,
                                 .timeout_ms = r->node_timeout_ms,
                                 .wait_budget_ms = r->node_timeout_ms,
                                 .wait_ok_to_stop_ms = r->node_timeout_ms,
                                 .cancelled = stopping,
                                 .cancel_arg = r,
                                 .budget_domains = r->batch_domain,
                                 .gated = r->gated};
    enum hc_op_result res = HC_OP_SUCCEEDED;
    int rc = 0;
    snprintf(n->from, sizeof(n->from), "%s", hc_json_str(row, "from", ""));
    /* One node at a time through budget .. stop, so that the next one's budget counts this one
     * down; a batch admitted as a whole (gated) passed its budget and ok-to-stop as a set, so
     * its nodes drain and stop in parallel. */
    pthread_mutex_t *admit = r->gated ? NULL : &r->admit;
    if (admit)
        pthread_mutex_lock(admit);
    int up = node_up(ctx, name, err);
    /* A node already down (a run resumed mid-way) is brought back first; one still up is taken
     * down unless the operation stops, pauses or aborts (honoured here, the safe point). */
    if (up < 0) {
        res = HC_OP_FAILED;
    } else if (up && back_already(ctx, name)) {
        /* changed and back before a restart: only the bookkeeping below is left */
    } else if (up && stopping(r)) {
        if (admit)
            pthread_mutex_unlock(admit);
        return HC_OP_SUCCEEDED; /* left alone: another slot stopped the operation */
    } else if (!up || (res = hc_op_checkpoint(ctx)) == HC_OP_SUCCEEDED) {
        hc_rolling_progress(ctx, name, r->change->node_state, "maintenance");
        rc = hc_maint_enter_steps(ctx, n->client, name, &mp, err);
    }
    if (admit)
        pthread_mutex_unlock(admit);
    if (res != HC_OP_SUCCEEDED)
        return res;
    if (rc < 0) {
        struct hc_error ignore = {0};
        if (node_up(ctx, name, &ignore) == 1)
            hc_rolling_progress(ctx, name, "pending", NULL); /* it was not taken down */
        if (!strcmp(err->code, "interrupted") && stopping(r))
            return HC_OP_SUCCEEDED; /* another slot stopped the operation and has the reason */
        return hc_rolling_classify(ctx, name, err);
    }
    hc_rolling_progress(ctx, name, r->change->node_state, r->change->change_step);
    if (hc_op_step(ctx, name, r->change->change_step, r->change->change, n, err) < 0)
        return hc_rolling_classify(ctx, name, err);
    hc_rolling_progress(ctx, name, NULL, "health");
    if (hc_op_step(ctx, name, "verify_health", step_verify_health, n, err) < 0) {
        res = hc_rolling_classify(ctx, name, err);
        if (res != HC_OP_FAILED)
            return res;
        struct hc_error cause = *err;
        return roll_back(n, &cause, err);
    }
    hc_rolling_progress(ctx, name, NULL, "resync");
    if (hc_maint_exit_steps(ctx, n->client, name, r->node_timeout_ms, err) < 0)
        return hc_rolling_classify(ctx, name, err);
    if (r->change->done(n, 0, err) < 0)
        return HC_OP_FAILED;
    hc_rolling_progress(ctx, name, "done", NULL);
    return HC_OP_SUCCEEDED;
}

/* --- slots -------------------------------------------------------------------------------- */

/* Records a slot's outcome: any outcome but success stops the taking of new nodes; the
 * operation ends with the gravest (failed > aborted > paused) and the first failure's reason. */
static void slot_outcome(struct hc_rolling *r, enum hc_op_result res, const struct hc_error *err)
{
    static const int gravity[] = {
        [HC_OP_SUCCEEDED] = 0, [HC_OP_PAUSED] = 1, [HC_OP_ABORTED] = 2, [HC_OP_FAILED] = 3};
    if (res == HC_OP_SUCCEEDED)
        return;
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    if (gravity[res] > gravity[r->result]) {
        r->result = res;
        if (res == HC_OP_FAILED)
            r->err = *err;
    }
    pthread_mutex_unlock(&r->lock);
}

/* Node i of the queue on slot `worker` (the parallel-for's item): the slot's context and agent
 * client are made at its first node. Non-zero (any outcome but success) ends the taking of
 * nodes. */
static int slot_item(void *arg, unsigned worker, size_t i)
{
    struct hc_rolling *r = arg;
    struct hc_rolling_slot *w = &r->slots[worker];
    struct hc_error err = {0};
    enum hc_op_result res = HC_OP_FAILED;
    const json_t *row = json_array_get(r->queue, i);
    w->r = r;
    if ((w->ctx || (w->ctx = hc_op_ctx_fork(r->ctx, &err))) &&
        (w->client ||
         (w->client = hc_agent_client_new(hc_op_controller(w->ctx), hc_op_db(w->ctx), &err)))) {
        struct hc_svc_node svc = {w->client, hc_json_str(row, "name", ""),
                                  hc_json_str(row, "agent_url", ""), r->node_timeout_ms};
        struct hc_rolling_node n = {.r = r, .ctx = w->ctx, .client = w->client, .svc = &svc};
        res = r->work(&n, row, &err);
    }
    if (res == HC_OP_FAILED)
        HC_WARN("%s %s: %s", r->change->what, hc_op_id(r->ctx), err.message);
    slot_outcome(r, res, &err);
    return res != HC_OP_SUCCEEDED;
}

enum hc_op_result hc_rolling_each(struct hc_rolling *r, json_t *queue, hc_rolling_work_fn work,
                                  size_t parallel, struct hc_error *err)
{
    json_decref(r->queue);
    r->queue = queue;
    r->work = work;
    r->stop = 0;
    r->result = HC_OP_SUCCEEDED;
    if (parallel > HC_ROLLING_MAX_PARALLEL)
        parallel = HC_ROLLING_MAX_PARALLEL;
    hc_parallel_for(json_array_size(queue), (unsigned)parallel, slot_item, r);
    for (size_t i = 0; i < HC_ROLLING_MAX_PARALLEL; i++) {
        hc_http_client_free(r->slots[i].client);
        hc_op_ctx_free_fork(r->slots[i].ctx);
        r->slots[i] = (struct hc_rolling_slot){0};
    }
    if (r->result == HC_OP_FAILED)
        *err = r->err;
    return r->result;
}

/* --- batches of failure domains ------------------------------------------------------------ */

int hc_rolling_batch_check(struct hc_db *db, const json_t *body, int64_t max_unavailable,
                           const char **batch, struct hc_error *err)
{
    const json_t *v = json_object_get(body, "batch");
    *batch = "node";
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) ||
        (strcmp(json_string_value(v), "node") != 0 && strcmp(json_string_value(v), "domain") != 0))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "'batch' must be \"node\" or \"domain\"");
    if (!strcmp(json_string_value(v), "node"))
        return 0;
    int64_t domains = hc_nodes_domain_count(db, err);
    if (domains < 0)
        return -1;
    *batch = "domain";
    if (max_unavailable <= domains)
        return 0;
    hc_error_set(err, HC_E(INVALID_DOMAIN),
                 "--max-unavailable %lld counts failure domains with --batch domain, and the "
                 "cluster has %lld",
                 (long long)max_unavailable, (long long)domains);
    return hc_error_hint(err,
                         "give --max-unavailable 1 (one domain at a time) up to %lld; see "
                         "the domains with 'hcctl node list'",
                         (long long)domains);
}

json_t *hc_rolling_plan_batches(const json_t *nodes, int max_domains)
{
    json_t *batches = hc_rolling_batches(nodes, max_domains), *b, *n;
    size_t i, j;
    json_array_foreach(batches, i, b)
    {
        json_t *names = json_array();
        json_array_foreach(json_object_get(b, "nodes"), j, n)
            json_array_append_new(names, json_string(hc_json_str(n, "name", "")));
        json_object_set_new(b, "nodes", names);
    }
    return batches;
}

int hc_rolling_params_domain(const json_t *params)
{
    return !strcmp(hc_json_str(params, "batch", "node"), "domain");
}

json_t *hc_rolling_batches(const json_t *rows, int max_domains)
{
    json_t *batches = json_array(), *row;
    size_t i;
    json_array_foreach(rows, i, row)
    {
        const char *domain = hc_json_str(row, "failure_domain", NULL);
        const char *name = hc_json_str(row, "name", "");
        json_t *b, *home = NULL;
        size_t j;
        json_array_foreach(batches, j, b) /* the batch holding this domain already */
        {
            size_t k;
            json_t *n;
            json_array_foreach(json_object_get(b, "nodes"), k, n)
            {
                const char *d = hc_json_str(n, "failure_domain", NULL);
                if (domain && d && !strcmp(domain, d))
                    home = b;
            }
        }
        json_t *last = json_array_get(batches, json_array_size(batches) - 1);
        if (!home && last &&
            json_array_size(json_object_get(last, "domains")) < (size_t)max_domains)
            home = last;
        if (!home) {
            home = json_pack("{s:[], s:[]}", "domains", "nodes");
            json_array_append_new(batches, home);
        }
        json_t *domains = json_object_get(home, "domains");
        const char *key = domain ? domain : name;
        int known = 0;
        json_array_foreach(domains, j, b) known |= !strcmp(json_string_value(b), key);
        if (!known)
            json_array_append_new(domains, json_string(key));
        json_array_append(json_object_get(home, "nodes"), row);
    }
    return batches;
}

/* The names of a batch's nodes, comma-separated, into buf. */
static void batch_names(const json_t *nodes, char *buf, size_t len)
{
    size_t i, at = 0;
    const json_t *n;
    buf[0] = '\0';
    json_array_foreach(nodes, i, n)
    {
        if (at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "," : "",
                                   hc_json_str(n, "name", ""));
    }
}

enum gate { GATE_ADMIT, GATE_FALLBACK, GATE_ERROR };

/* Asks every node of the batch still up whether the batch may stop as a set: GATE_ADMIT, or
 * GATE_FALLBACK with why (a block whose every replica is in the batch, a service that answers
 * for one node only, or refusals that outlast the node timeout), GATE_ERROR with err (transport:
 * the caller pauses). The availability budget (domains) is waited on first. */
static enum gate batch_gate(struct hc_rolling *r, struct hc_http_client *client,
                            const json_t *batch, char *why, size_t len, struct hc_error *err)
{
    const json_t *nodes = json_object_get(batch, "nodes"), *n;
    const char *names[HC_ROLLING_MAX_PARALLEL * 8];
    char set[HC_ROLLING_SET_MAX + 100], doms[400];
    size_t count = 0, i;
    json_array_foreach(nodes, i, n)
    {
        if (count < HC_ARRAY_LEN(names))
            names[count++] = hc_json_str(n, "name", "");
    }
    batch_names(nodes, set, sizeof(set));
    doms[0] = '\0';
    for (i = 0; i < json_array_size(json_object_get(batch, "domains")); i++) {
        size_t at = strlen(doms);
        snprintf(doms + at, sizeof(doms) - at, "%s%s", i ? ", " : "",
                 json_string_value(json_array_get(json_object_get(batch, "domains"), i)));
    }
    if (strlen(set) > HC_ROLLING_SET_MAX) { /* what the agent takes in one question */
        snprintf(why, len, "the batch's %zu node names take more than %d bytes in one question",
                 json_array_size(nodes), HC_ROLLING_SET_MAX);
        return GATE_FALLBACK;
    }
    int64_t deadline = hc_mono_ms() + r->node_timeout_ms;
    for (;;) {
        if (hc_op_checkpoint(r->ctx) != HC_OP_SUCCEEDED)
            return hc_error_set(err, HC_E(INTERRUPTED), "operation %s was paused or aborted",
                                hc_op_id(r->ctx)),
                   GATE_ERROR;
        char blocked[700] = "";
        if (hc_avail_check_set(hc_op_db(r->ctx), names, count, r->max_unavailable, 1, err) < 0) {
            if (strcmp(err->code, HC_ERR_BUDGET) != 0 || hc_mono_ms() >= deadline)
                return GATE_ERROR;
            snprintf(blocked, sizeof(blocked), "%s", err->message);
            hc_error_clear(err);
            /* a node that stopped answering will not come back by waiting: pause until it is
             * back (as the per-node budget does, op_maintenance.c other_unreachable) */
            char other[128];
            if (hc_avail_unreachable(hc_op_db(r->ctx), NULL, other, sizeof(other), err) > 0)
                return hc_error_set(err, HC_E(OTHER_UNREACHABLE),
                                    "%s is unreachable while the batch of domain(s) %s waits to "
                                    "go down (%s)",
                                    other, doms, blocked),
                       GATE_ERROR;
            hc_error_clear(err);
        }
        json_array_foreach(nodes, i, n)
        {
            struct hc_svc_set_answer a = {0};
            struct hc_svc_node svc = {client, hc_json_str(n, "name", ""),
                                      hc_json_str(n, "agent_url", ""), r->node_timeout_ms};
            if (blocked[0] || strcmp(hc_json_str(n, "maintenance", "none"), "none") != 0)
                continue; /* down already (a resumed batch): it cannot answer, nor needs to */
            if (hc_svc_ok_to_stop_set(&svc, set, &a, err) < 0)
                return GATE_ERROR;
            if (!a.answered) { /* an older version, or one that refused the question */
                snprintf(why, len,
                         "the storage service on %s did not answer ok-to-stop for the set (%s)",
                         svc.name, a.reason[0] ? a.reason : "no reason given");
                return GATE_FALLBACK;
            }
            if (!a.ok && a.set_blocks > 0) {
                snprintf(why, len, "ok-to-stop for the set refused by %s: %s", svc.name, a.reason);
                return GATE_FALLBACK;
            }
            if (!a.ok) {
                snprintf(blocked, sizeof(blocked),
                         "the storage service refuses ok-to-stop for the set on %s: %s", svc.name,
                         a.reason);
                break;
            }
        }
        if (!blocked[0])
            break;
        if (hc_mono_ms() >= deadline) {
            snprintf(why, len, "still blocked after %lld s: %s",
                     (long long)(r->node_timeout_ms / 1000), blocked);
            return GATE_FALLBACK;
        }
        hc_op_waiting(r->ctx, "blocked: batch of domain(s) %s (%s): %s", doms, set, blocked);
        usleep(250 * 1000);
    }
    snprintf(r->gate_text, sizeof(r->gate_text),
             "with its batch, domain(s) %s (%s): within max_unavailable %d failure domain(s), "
             "ok-to-stop for the set",
             doms, set, r->max_unavailable);
    return GATE_ADMIT;
}

/* One batch: admitted as a whole (every node down at once, within the budget), or one node at a
 * time when its gate falls back. */
static enum hc_op_result run_batch(struct hc_rolling *r, struct hc_http_client *client,
                                   json_t *batch, size_t nth, size_t total, struct hc_error *err)
{
    char why[800] = "";
    json_t *nodes = json_object_get(batch, "nodes");
    enum gate g = batch_gate(r, client, batch, why, sizeof(why), err);
    if (g == GATE_ERROR) {
        if (!strcmp(err->code, "interrupted"))
            return hc_op_checkpoint(r->ctx) == HC_OP_ABORTED ? HC_OP_ABORTED : HC_OP_PAUSED;
        return hc_rolling_classify(r->ctx, hc_json_str(json_array_get(nodes, 0), "name", ""), err);
    }
    struct hc_error e = {0};
    if (g == GATE_FALLBACK) {
        HC_INFO("%s %s: batch %zu of %zu goes one node at a time: %s", r->change->what,
                hc_op_id(r->ctx), nth, total, why);
        hc_event_add(hc_op_db(r->ctx), "rolling.batch_fallback", NULL, hc_op_id(r->ctx),
                     "controller", json_pack("{s:O, s:s}", "batch", batch, "reason", why), &e,
                     "batch %zu of %zu goes one node at a time: %s", nth, total, why);
        hc_op_waiting(r->ctx, "batch %zu of %zu one node at a time: %s", nth, total, why);
        r->gated = NULL;
        return hc_rolling_each(r, json_incref(nodes), change_node, 1, err);
    }
    hc_event_add(hc_op_db(r->ctx), "rolling.batch", NULL, hc_op_id(r->ctx), "controller",
                 json_pack("{s:O}", "batch", batch), &e, "batch %zu of %zu admitted: %s", nth,
                 total, r->gate_text);
    hc_op_waiting(r->ctx, "batch %zu of %zu: %zu node(s) at once", nth, total,
                  json_array_size(nodes));
    r->gated = r->gate_text;
    enum hc_op_result res =
        hc_rolling_each(r, json_incref(nodes), change_node, json_array_size(nodes), err);
    r->gated = NULL;
    return res;
}

static enum hc_op_result rolling_domains(struct hc_rolling *r, json_t *queue, struct hc_error *err)
{
    json_t *batches = hc_rolling_batches(queue, r->max_unavailable);
    json_decref(queue);
    struct hc_http_client *client =
        hc_agent_client_new(hc_op_controller(r->ctx), hc_op_db(r->ctx), err);
    enum hc_op_result res = client ? HC_OP_SUCCEEDED : HC_OP_FAILED;
    size_t i, total = json_array_size(batches);
    json_t *b;
    json_array_foreach(batches, i, b)
    {
        if (res != HC_OP_SUCCEEDED)
            break;
        res = run_batch(r, client, b, i + 1, total, err);
    }
    hc_http_client_free(client);
    json_decref(batches);
    return res;
}

enum hc_op_result hc_rolling_nodes(struct hc_rolling *r, struct hc_error *err)
{
    json_t *queue = hc_db_query_json(hc_op_db(r->ctx), err,
                                     "SELECT n.name, n.agent_url, un.from_version AS \"from\", "
                                     "n.failure_domain, n.maintenance "
                                     "FROM upgrade_nodes un JOIN nodes n ON n.name = un.node "
                                     "WHERE un.op_id = ? AND un.state != 'done' "
                                     "ORDER BY n.maintenance = 'none', un.seq",
                                     "s", hc_op_id(r->ctx));
    if (!queue)
        return HC_OP_FAILED;
    if (r->batch_domain)
        return rolling_domains(r, queue, err);
    size_t want = (size_t)r->max_unavailable, n = json_array_size(queue);
    hc_op_waiting(r->ctx, "%zu node(s) to change, up to %zu at a time", n, want < n ? want : n);
    return hc_rolling_each(r, queue, change_node, want, err);
}
