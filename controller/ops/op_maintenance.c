/*
 * Storage maintenance: the availability budget, the enter/exit steps (shared with the rolling
 * upgrade) and the maintenance.enter / maintenance.exit operations. See op_maintenance.h.
 */
#include "controller/ops/op_maintenance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/remote/agent_client.h"
#include "controller/remote/service_client.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define WAIT_STEP_MS 250

int hc_maint_mode_valid(const char *mode)
{
    return mode && (!strcmp(mode, "ensure-accessibility") || !strcmp(mode, "full") ||
                    !strcmp(mode, "none"));
}

const char *hc_avail_down_reason(const char *maint, const char *health, const char *svc)
{
    maint = maint ? maint : "none";
    health = health ? health : "unknown";
    svc = svc ? svc : "";
    if (strcmp(maint, "none") != 0)
        return "in maintenance";
    if (strcmp(health, "reachable") != 0)
        return health;
    if (!strcmp(svc, "stopped") || !strcmp(svc, "crashed") || !strcmp(svc, "backoff") ||
        !strcmp(svc, "starting"))
        return "service not running";
    return NULL;
}

static const char *down_reason(const struct hc_node_row *row)
{
    return hc_avail_down_reason(row->maintenance, row->health, row->service_state);
}

int hc_avail_down(struct hc_db *db, const char *except, int *count, char *who, size_t who_len,
                  struct hc_error *err)
{
    struct hc_node_filter f = {.except = except};
    struct hc_node_row *rows;
    size_t n, used = 0;
    if (hc_nodes_rows(db, &f, &rows, &n, err) < 0)
        return -1;
    *count = 0;
    if (who_len)
        who[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *why = down_reason(&rows[i]);
        if (!why)
            continue;
        if (used < who_len)
            used += (size_t)snprintf(who + used, who_len - used, "%s%s (%s)", *count ? ", " : "",
                                     rows[i].name, why);
        (*count)++;
    }
    hc_node_rows_free(rows, n);
    return 0;
}

int hc_avail_check(struct hc_db *db, const char *node, int max_unavailable, struct hc_error *err)
{
    int down;
    char who[512];
    if (hc_avail_down(db, node, &down, who, sizeof(who), err) < 0)
        return -1;
    if (down + 1 <= max_unavailable)
        return 0;
    hc_error_set(err, HC_E(BUDGET),
                 "taking '%s' down would leave %d node(s) down, more "
                 "than max_unavailable %d: already down: %s",
                 node, down + 1, max_unavailable, who);
    return hc_error_hint(err, "bring the other node(s) back first (hcctl maintenance exit), or "
                              "raise --max-unavailable if the data tolerates it");
}

/* 1 when name is one of names[0..n). */
static int listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

/* Adds key to the distinct keys[0..*n) (each up to 128 bytes); returns 1 when it was new. */
static int domain_add(char (*keys)[128], size_t *n, size_t cap, const char *key)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(keys[i], key))
            return 0;
    if (*n < cap)
        snprintf(keys[(*n)++], sizeof(keys[0]), "%s", key);
    return 1;
}

int hc_avail_check_set(struct hc_db *db, const char *const *names, size_t n, int max_unavailable,
                       int domains, struct hc_error *err)
{
    struct hc_node_row *rows;
    size_t nrows, ndown = 0, nkeys = 0, used = 0;
    char who[512] = "", key[128];
    if (hc_nodes_rows(db, NULL, &rows, &nrows, err) < 0)
        return -1;
    char(*keys)[128] = calloc(nrows + 1, sizeof(*keys));
    if (!keys) {
        hc_node_rows_free(rows, nrows);
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    }
    for (size_t i = 0; i < nrows; i++) { /* the domains down for other reasons */
        const char *why = down_reason(&rows[i]);
        if (!why || listed(names, n, rows[i].name))
            continue;
        hc_node_domain_key(rows[i].name, rows[i].failure_domain, key, sizeof(key));
        domain_add(keys, &nkeys, nrows, key);
        ndown++;
        if (used < sizeof(who))
            used += (size_t)snprintf(
                who + used, sizeof(who) - used, "%s%s (%s%s%s)", ndown > 1 ? ", " : "",
                rows[i].name, why, domains ? ", domain " : "",
                domains ? (rows[i].failure_domain ? rows[i].failure_domain : "of its own") : "");
    }
    size_t down_before = domains ? nkeys : ndown, after = down_before;
    for (size_t i = 0; i < nrows; i++) /* and the set's */
        if (listed(names, n, rows[i].name))
            after +=
                domains
                    ? (size_t)domain_add(keys, &nkeys, nrows,
                                         hc_node_domain_key(rows[i].name, rows[i].failure_domain,
                                                            key, sizeof(key)))
                    : 1;
    hc_node_rows_free(rows, nrows);
    free(keys);
    if (after <= (size_t)max_unavailable)
        return 0;
    const char *unit = domains ? "failure domain(s)" : "node(s)";
    if (n == 1)
        hc_error_set(err, HC_E(BUDGET),
                     "taking '%s' down would leave %zu %s down, more than max_unavailable %d: "
                     "already down: %s",
                     names[0], after, unit, max_unavailable, who);
    else
        hc_error_set(err, HC_E(BUDGET),
                     "taking %s and %zu more down would leave %zu %s down, more than "
                     "max_unavailable %d: already down: %s",
                     names[0], n - 1, after, unit, max_unavailable, who);
    return hc_error_hint(err, "bring the other node(s) back first (hcctl maintenance exit), or "
                              "raise --max-unavailable if the data tolerates it");
}

int hc_maint_node_load(struct hc_db *db, const char *name, struct hc_maint_node *mn,
                       struct hc_error *err)
{
    struct hc_node_row row;
    int found = hc_node_row_get(db, name, &row, err);
    if (found < 0)
        return -1;
    if (found) {
        snprintf(mn->name, sizeof(mn->name), "%s", name);
        snprintf(mn->agent_url, sizeof(mn->agent_url), "%s", row.agent_url);
        snprintf(mn->maintenance, sizeof(mn->maintenance), "%s", row.maintenance);
        snprintf(mn->maintenance_op, sizeof(mn->maintenance_op), "%s",
                 row.maintenance_op ? row.maintenance_op : "");
    }
    hc_node_row_clear(&row);
    if (!found) {
        hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", name);
        return hc_error_hint(err, "see 'hcctl node list'");
    }
    return 0;
}

/* Records the node's maintenance state (and an event when it settles). */
static int set_state(struct hc_op_ctx *ctx, const char *node, const char *state, const char *mode,
                     const char *event, struct hc_error *err)
{
    struct hc_db *db = hc_op_db(ctx);
    if (hc_db_begin(db, err) < 0)
        return -1;
    int none = strcmp(state, "none") == 0;
    /* A step re-run after a controller restart records the same change once: the event log
     * replays to the nodes really in maintenance. */
    struct hc_node_row now;
    int found = hc_node_row_get(db, node, &now, err);
    if (found < 0) {
        hc_db_rollback(db);
        return -1;
    }
    if (found && !strcmp(now.maintenance, state))
        event = NULL;
    hc_node_row_clear(&now);
    if (hc_node_set_maintenance(db, node, state, mode, hc_op_id(ctx), err) < 0 ||
        (event && hc_event_add(db, event, node, hc_op_id(ctx), "controller",
                               json_pack("{s:s, s:s?}", "state", state, "mode", mode), err,
                               "node %s %s maintenance%s%s", node, none ? "left" : "entered",
                               mode ? " mode " : "", mode ? mode : "") < 0) ||
        hc_db_commit(db, err) < 0) {
        hc_db_rollback(db);
        return -1;
    }
    return 0;
}

/* --- waits -------------------------------------------------------------------------------- */

/* One tick of a wait. An interruptible wait ends early when the operation is paused or
 * aborted; the waits of a node that is already down are not (a node half-way is no safe point
 * to stop at: it is brought back first, within the wait's own bound). */
static int wait_tick(struct hc_op_ctx *ctx, int interruptible, struct hc_error *err)
{
    if (interruptible && hc_op_checkpoint(ctx) != HC_OP_SUCCEEDED)
        return hc_error_set(err, HC_E(INTERRUPTED), "operation %s was paused or aborted",
                            hc_op_id(ctx));
    usleep(WAIT_STEP_MS * 1000);
    return 0;
}

int hc_maint_wait_healthy(struct hc_op_ctx *ctx, const struct hc_svc_node *n, int64_t timeout_ms,
                          struct hc_error *err)
{
    int64_t deadline = hc_mono_ms() + timeout_ms;
    char detail[256] = "";
    hc_op_waiting(ctx, "the service on %s to pass its health check", n->name);
    for (;;) {
        int healthy = 0;
        struct hc_error call = {0};
        if (hc_svc_health(n, &healthy, detail, sizeof(detail), &call) < 0) {
            if (hc_agent_err_is_transport(&call)) {
                *err = call;
                return -1;
            }
            snprintf(detail, sizeof(detail), "%s", call.message);
        } else if (healthy) {
            return 0;
        }
        if (hc_mono_ms() > deadline) {
            hc_error_set(err, HC_E(HEALTH_TIMEOUT),
                         "service on %s did not become healthy "
                         "within %lld s: %s",
                         n->name, (long long)(timeout_ms / 1000), detail);
            return hc_error_hint(err, "see the service log on the node; --node-timeout/--timeout "
                                      "sets how long to wait");
        }
        if (wait_tick(ctx, 0, err) < 0)
            return -1;
    }
}

int hc_maint_wait_resync(struct hc_op_ctx *ctx, const struct hc_svc_node *n, int64_t timeout_ms,
                         struct hc_error *err)
{
    int64_t deadline = hc_mono_ms() + timeout_ms, pending = -1;
    for (;;) {
        if (hc_svc_resync_pending(n, &pending, err) < 0)
            return -1;
        if (pending == 0)
            return 0;
        hc_op_waiting(ctx, "%s to resync %lld block(s) from its peers", n->name,
                      (long long)pending);
        if (hc_mono_ms() > deadline) {
            hc_error_set(err, HC_E(RESYNC_TIMEOUT),
                         "%s still had %lld block(s) to resync after "
                         "%lld s",
                         n->name, (long long)pending, (long long)(timeout_ms / 1000));
            return hc_error_hint(err,
                                 "the node stays out of maintenance and keeps resyncing; "
                                 "check 'hcctl node show %s'",
                                 n->name);
        }
        if (wait_tick(ctx, 0, err) < 0)
            return -1;
    }
}

/* --- steps -------------------------------------------------------------------------------- */

struct maint_step {
    struct hc_svc_node svc;
    const struct hc_maint_params *p;
    int64_t timeout_ms;
};

/* A tick of the waits of a node that is still up: interruptible by the user's pause or abort,
 * and by the caller's cancel. */
static int admit_tick(struct hc_op_ctx *ctx, const struct maint_step *s, struct hc_error *err)
{
    if (s->p->cancelled && s->p->cancelled(s->p->cancel_arg))
        return hc_error_set(err, HC_E(INTERRUPTED), "operation %s takes no more nodes down",
                            hc_op_id(ctx));
    return wait_tick(ctx, 1, err);
}

/* Nodes other than `node` that this operation has in maintenance now (-1 on error). */
static int own_down(struct hc_op_ctx *ctx, const char *node)
{
    struct hc_error err = {0};
    struct hc_node_filter f = {.except = node};
    struct hc_node_row *rows;
    size_t n;
    if (hc_nodes_rows(hc_op_db(ctx), &f, &rows, &n, &err) < 0)
        return -1;
    int down = 0;
    for (size_t i = 0; i < n; i++)
        down += strcmp(rows[i].maintenance, "none") != 0 && rows[i].maintenance_op &&
                strcmp(rows[i].maintenance_op, hc_op_id(ctx)) == 0;
    hc_node_rows_free(rows, n);
    return down;
}

/* The budget: refused at once for a maintenance request; the rolling upgrade instead waits
 * (bounded by wait_budget_ms) for nodes that are down for other reasons to come back, and as
 * long as it takes for the nodes it has taken down itself (each within its own bounds). */
int hc_avail_unreachable(struct hc_db *db, const char *except, char *name, size_t len,
                         struct hc_error *err)
{
    struct hc_node_filter f = {.except = except};
    struct hc_node_row *rows;
    size_t n, i;
    if (hc_nodes_rows(db, &f, &rows, &n, err) < 0)
        return -1;
    for (i = 0; i < n; i++)
        if (!strcmp(rows[i].health, "unreachable") || !strcmp(rows[i].health, "stalled"))
            break;
    if (i < n)
        snprintf(name, len, "%s", rows[i].name);
    hc_node_rows_free(rows, n);
    return i < n;
}

/* While an upgrade waits to take s's node down: a node that stopped answering (an agent killed,
 * a node lost) will not come back by waiting a node timeout; the upgrade pauses until it is
 * back (HC_ERR_OTHER_UNREACHABLE) rather than fail. 0 when no other node is unreachable. */
static int other_unreachable(struct hc_op_ctx *ctx, const struct maint_step *s, const char *why,
                             struct hc_error *err)
{
    char other[128];
    int found = hc_avail_unreachable(hc_op_db(ctx), s->svc.name, other, sizeof(other), err);
    if (found <= 0)
        return found;
    return hc_error_set(err, HC_E(OTHER_UNREACHABLE),
                        "%s is unreachable while %s waits "
                        "to go down (%s)",
                        other, s->svc.name, why);
}

static int step_budget(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    struct maint_step *s = arg;
    int64_t deadline = hc_mono_ms() + s->p->wait_budget_ms;
    const char *self = s->svc.name;
    while ((s->p->budget_domains
                ? hc_avail_check_set(hc_op_db(ctx), &self, 1, s->p->max_unavailable, 1, err)
                : hc_avail_check(hc_op_db(ctx), s->svc.name, s->p->max_unavailable, err)) < 0) {
        if (strcmp(err->code, HC_ERR_BUDGET) != 0)
            return -1;
        if (s->p->wait_budget_ms <= 0)
            return s->p->force_hint ? hc_error_hint(err,
                                                    "bring the other node(s) back first "
                                                    "(hcctl maintenance exit), or %s",
                                                    s->p->force_hint)
                                    : -1;
        int own = own_down(ctx, s->svc.name);
        if (own > 0) {
            deadline = hc_mono_ms() + s->p->wait_budget_ms;
            hc_op_waiting(ctx, "%s waits for a free slot: %s", s->svc.name, err->message);
        } else if (hc_mono_ms() >= deadline) {
            return -1;
        } else if (other_unreachable(ctx, s, err->message, err) != 0) {
            return -1;
        } else {
            hc_op_waiting(ctx, "blocked: %s", err->message);
        }
        if (admit_tick(ctx, s, err) < 0)
            return -1;
    }
    snprintf(detail, len, "within max_unavailable %d%s", s->p->max_unavailable,
             s->p->budget_domains ? " failure domain(s)" : "");
    return 0;
}

/* The node was let through with its batch: the batch's gate answered (rolling.c). */
static int step_gated(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                      struct hc_error *err)
{
    const struct maint_step *s = arg;
    snprintf(detail, len, "%s", s->p->gated);
    return 0;
}

static int step_ok_to_stop(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                           struct hc_error *err)
{
    struct maint_step *s = arg;
    int ok = 0;
    char reason[400] = "";
    if (!strcmp(s->p->mode, "none")) {
        snprintf(detail, len, "skipped: mode none (--force)");
        return 0;
    }
    int64_t t0 = hc_mono_ms(), deadline = t0 + s->p->wait_ok_to_stop_ms;
    hc_op_waiting(ctx, "the storage service to answer ok-to-stop for %s", s->svc.name);
    for (;;) {
        if (hc_svc_ok_to_stop(&s->svc, &ok, reason, sizeof(reason), err) < 0) {
            if (!s->p->unreachable_ok || !hc_agent_err_is_transport(err))
                return -1;
            snprintf(detail, len,
                     HC_MAINT_NOT_ASKED " (%s); within the budget, the other nodes "
                                        "hold what it served",
                     err->message);
            hc_error_clear(err);
            return 0;
        }
        if (ok)
            break;
        if (!reason[0])
            snprintf(reason, sizeof(reason), "no reason given");
        if (hc_mono_ms() >= deadline) {
            if (s->p->wait_ok_to_stop_ms > 0)
                hc_error_set(err, HC_E(NOT_OK_TO_STOP),
                             "cannot take '%s' down: ok-to-stop "
                             "still refused after %lld s: %s",
                             s->svc.name, (long long)(s->p->wait_ok_to_stop_ms / 1000), reason);
            else
                hc_error_set(err, HC_E(NOT_OK_TO_STOP),
                             "cannot take '%s' down: ok-to-stop "
                             "refused: %s",
                             s->svc.name, reason);
            return hc_error_hint(err, "wait until its data has another in-sync replica, or %s",
                                 s->p->force_hint ? s->p->force_hint
                                                  : "use --mode none --force to take it down "
                                                    "regardless");
        }
        if (other_unreachable(ctx, s, reason, err) != 0)
            return -1;
        hc_op_waiting(ctx, "blocked: the storage service refuses ok-to-stop for %s: %s",
                      s->svc.name, reason);
        if (admit_tick(ctx, s, err) < 0)
            return -1;
    }
    if (hc_mono_ms() - t0 >= WAIT_STEP_MS)
        snprintf(detail, len, "ok-to-stop after %lld ms", (long long)(hc_mono_ms() - t0));
    else
        snprintf(detail, len, "ok-to-stop");
    return 0;
}

/* The node's agent for a call that waits on the service (drain, stop, start): the agent answers
 * once the service has done it, which may take longer than a status query is given (the agent
 * timeout, as little as 500 ms): a stop that took 1.1 s failed a maintenance under load. Bounded
 * by HC_MAINT_ACTION_CALL_MS and by the operation's own timeout. */
static struct hc_svc_node action_node(const struct maint_step *s)
{
    struct hc_svc_node n = s->svc;
    int64_t t = s->timeout_ms > 0 && s->timeout_ms < HC_MAINT_ACTION_CALL_MS
                    ? s->timeout_ms
                    : HC_MAINT_ACTION_CALL_MS;
    if (t > n.timeout_ms)
        n.timeout_ms = (long)t;
    return n;
}

static int step_drain(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                      struct hc_error *err)
{
    struct maint_step *s = arg;
    struct hc_svc_node n = action_node(s);
    if (set_state(ctx, s->svc.name, "entering", s->p->mode, NULL, err) < 0)
        return -1;
    hc_op_waiting(ctx, "%s to drain its storage service", s->svc.name);
    if (hc_svc_drain(&n, err) < 0)
        return -1;
    snprintf(detail, len, "drained");
    return 0;
}

static int step_stop(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    struct maint_step *s = arg;
    struct hc_svc_node n = action_node(s);
    if (hc_svc_stop(&n, err) < 0 ||
        set_state(ctx, s->svc.name, "active", s->p->mode, "maintenance.entered", err) < 0)
        return -1;
    snprintf(detail, len, "service stopped; node in maintenance (%s)", s->p->mode);
    return 0;
}

/* 1 when the node has no storage software active (a node joined but never upgraded): leaving
 * maintenance then has nothing to start or wait for. 0, or -1 with err. */
static int no_software(const struct maint_step *s, struct hc_error *err)
{
    struct hc_sw_state st;
    if (hc_sw_state(&s->svc, &st, err) < 0)
        return -1;
    return st.current[0] == '\0';
}

#define NO_SOFTWARE "no storage software on this node"

static int step_start(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                      struct hc_error *err)
{
    struct maint_step *s = arg;
    if (set_state(ctx, s->svc.name, "exiting", NULL, NULL, err) < 0)
        return -1;
    struct hc_svc_node n = action_node(s);
    int bare = no_software(s, err);
    if (bare < 0 || (!bare && hc_svc_start(&n, err) < 0))
        return -1;
    snprintf(detail, len, "%s", bare ? NO_SOFTWARE ": nothing to start" : "service started");
    return 0;
}

static int step_healthy(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                        struct hc_error *err)
{
    struct maint_step *s = arg;
    int64_t t0 = hc_mono_ms();
    int bare = no_software(s, err);
    if (bare) {
        snprintf(detail, len, "%s: skipped", NO_SOFTWARE);
        return bare < 0 ? -1 : 0;
    }
    if (hc_maint_wait_healthy(ctx, &s->svc, s->timeout_ms, err) < 0)
        return -1;
    snprintf(detail, len, "healthy after %lld ms", (long long)(hc_mono_ms() - t0));
    return 0;
}

static int step_resync(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                       struct hc_error *err)
{
    struct maint_step *s = arg;
    int64_t t0 = hc_mono_ms();
    int bare = no_software(s, err);
    if (bare < 0)
        return -1;
    if (bare) {
        if (set_state(ctx, s->svc.name, "none", NULL, "maintenance.exited", err) < 0)
            return -1;
        snprintf(detail, len, "%s: nothing to resync; maintenance over", NO_SOFTWARE);
        return 0;
    }
    /* The poller would learn that the service runs again only at its next cycle; the budget
     * of the next node must not count this one as down meanwhile. */
    if (hc_maint_wait_resync(ctx, &s->svc, s->timeout_ms, err) < 0 ||
        hc_node_set_service_state(hc_op_db(ctx), s->svc.name, "running", hc_now_ms(), err) < 0 ||
        set_state(ctx, s->svc.name, "none", NULL, "maintenance.exited", err) < 0)
        return -1;
    snprintf(detail, len, "in sync after %lld ms; maintenance over",
             (long long)(hc_mono_ms() - t0));
    return 0;
}

static int load_step(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                     struct hc_maint_node *mn, struct maint_step *s, struct hc_error *err)
{
    if (hc_maint_node_load(hc_op_db(ctx), node, mn, err) < 0)
        return -1;
    s->svc = (struct hc_svc_node){client, mn->name, mn->agent_url,
                                  hc_agent_timeout_ms(hc_op_controller(ctx))};
    return 0;
}

static int gate_steps(struct hc_op_ctx *ctx, const char *node, struct maint_step *s,
                      struct hc_error *err)
{
    if (s->p->gated)
        return hc_op_step_observe(ctx, node, "budget", step_gated, s, err) < 0 ||
                       hc_op_step_observe(ctx, node, "ok_to_stop", step_gated, s, err) < 0
                   ? -1
                   : 0;
    if (hc_op_step_observe(ctx, node, "budget", step_budget, s, err) < 0 ||
        hc_op_step_observe(ctx, node, "ok_to_stop", step_ok_to_stop, s, err) < 0)
        return -1;
    return 0;
}

int hc_maint_gate_steps(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                        const struct hc_maint_params *p, struct hc_error *err)
{
    struct hc_maint_node mn;
    struct maint_step s = {.p = p, .timeout_ms = p->timeout_ms};
    if (load_step(ctx, client, node, &mn, &s, err) < 0)
        return -1;
    return gate_steps(ctx, node, &s, err);
}

int hc_maint_enter_steps(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                         const struct hc_maint_params *p, struct hc_error *err)
{
    struct hc_maint_node mn;
    struct maint_step s = {.p = p, .timeout_ms = p->timeout_ms};
    if (load_step(ctx, client, node, &mn, &s, err) < 0)
        return -1;
    /* A node already on its way down (this operation, before a restart) is not counted
     * against itself twice: the budget was checked when it started. A node still up is asked
     * both questions again: answers from before a restart may have gone stale. */
    int up = !strcmp(mn.maintenance, "none");
    if (up && gate_steps(ctx, node, &s, err) < 0)
        return -1;
    if ((!up && hc_op_step(ctx, node, "ok_to_stop", p->gated ? step_gated : step_ok_to_stop, &s,
                           err) < 0) ||
        hc_op_step(ctx, node, "drain", step_drain, &s, err) < 0 ||
        hc_op_step(ctx, node, "stop", step_stop, &s, err) < 0)
        return -1;
    return 0;
}

int hc_maint_exit_steps(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                        int64_t timeout_ms, struct hc_error *err)
{
    struct hc_maint_node mn;
    struct hc_maint_params none = {0};
    struct maint_step s = {.p = &none, .timeout_ms = timeout_ms};
    if (load_step(ctx, client, node, &mn, &s, err) < 0)
        return -1;
    if (hc_op_step(ctx, node, "start", step_start, &s, err) < 0 ||
        hc_op_step(ctx, node, "healthy", step_healthy, &s, err) < 0 ||
        hc_op_step(ctx, node, "resync", step_resync, &s, err) < 0)
        return -1;
    return 0;
}

/* --- operations --------------------------------------------------------------------------- */

/* Maps a step failure to the operation's result: an interrupted wait is the user's pause or
 * abort, everything else a failure with its reason. */
static enum hc_op_result step_result(struct hc_op_ctx *ctx, int rc, const struct hc_error *err)
{
    if (rc == 0)
        return HC_OP_SUCCEEDED;
    if (!strcmp(err->code, "interrupted"))
        return hc_op_checkpoint(ctx) == HC_OP_ABORTED ? HC_OP_ABORTED : HC_OP_PAUSED;
    return HC_OP_FAILED;
}

static enum hc_op_result enter_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    struct hc_maint_params mp = {
        .mode = hc_json_str(p, "mode", "ensure-accessibility"),
        .force = hc_json_bool(p, "force", 0),
        .max_unavailable = (int)hc_json_int(p, "max_unavailable", 1),
        .timeout_ms = hc_json_int(p, "timeout_ms", HC_MAINT_DEFAULT_TIMEOUT_MS),
    };
    const char *node = hc_json_str(p, "node", "");
    struct hc_http_client *client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err);
    if (!client)
        return HC_OP_FAILED;
    int rc = hc_maint_enter_steps(ctx, client, node, &mp, err);
    hc_http_client_free(client);
    hc_op_waiting(ctx, NULL);
    return step_result(ctx, rc, err);
}

static enum hc_op_result exit_run(struct hc_op_ctx *ctx, struct hc_error *err)
{
    const json_t *p = hc_op_params(ctx);
    const char *node = hc_json_str(p, "node", "");
    struct hc_http_client *client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err);
    if (!client)
        return HC_OP_FAILED;
    int rc = hc_maint_exit_steps(ctx, client, node,
                                 hc_json_int(p, "timeout_ms", HC_MAINT_DEFAULT_TIMEOUT_MS), err);
    hc_http_client_free(client);
    hc_op_waiting(ctx, NULL);
    return step_result(ctx, rc, err);
}

const struct hc_op_kind hc_op_kind_maintenance_enter = {"maintenance.enter", 1, enter_run};
const struct hc_op_kind hc_op_kind_maintenance_exit = {"maintenance.exit", 1, exit_run};
