/*
 * Storage maintenance: taking one node's storage service down safely and bringing it back, as
 * operations of their own (maintenance.enter, maintenance.exit) and as steps the rolling upgrade
 * reuses.
 *
 * Availability invariant (DESIGN.md): the number of nodes down for any reason — in maintenance,
 * unreachable, stalled, service not running — never exceeds max_unavailable, and a node is taken
 * down only after the storage service answers ok-to-stop for it. Nodes already down count
 * against the budget. nodes.maintenance is none | entering | active | exiting; it lives in the
 * database (controller restarts) and the agent keeps the service stopped (agent restarts).
 */
#ifndef HC_CONTROLLER_OP_MAINTENANCE_H
#define HC_CONTROLLER_OP_MAINTENANCE_H

#include <stdint.h>

#include "common/error.h"
#include "controller/ops/ops.h"
#include "db/db.h"

struct hc_http_client; /* common/https_client.h */
struct hc_svc_node;    /* controller/remote/service_client.h */

#define HC_MAINT_DEFAULT_TIMEOUT_MS (5 * 60 * 1000)
/* The longest a drain, stop or start call to the agent may take (it answers once the service
 * has done it); the operation's timeout when that is shorter. */
#define HC_MAINT_ACTION_CALL_MS (30 * 1000)
/* The start of the ok_to_stop step's detail when unreachable_ok let an unanswered one pass. */
#define HC_MAINT_NOT_ASKED "not asked: the agent does not answer"
/* A rolling upgrade found another node unreachable while waiting to take one down: it pauses
 * until that node is back (hc_avail_unreachable names it) instead of waiting on it. */

/* 1 when mode is ensure-accessibility, full or none. */
int hc_maint_mode_valid(const char *mode);

/* Why a node with these columns (nodes.maintenance, health, service_state; NULL as unknown)
 * counts as down — "in maintenance", its health ("unreachable", "stalled", "unknown"),
 * "service not running" — or NULL when it is up. The one rule of what "down" means. */
const char *hc_avail_down_reason(const char *maintenance, const char *health,
                                 const char *service_state);
/* Nodes down now other than `except` (may be NULL): count, and their names with why in `who`.
 * Returns 0 or -1 with err. */
int hc_avail_down(struct hc_db *db, const char *except, int *count, char *who, size_t who_len,
                  struct hc_error *err);
/* 0 when taking `node` down keeps the down count within max_unavailable, else -1 with 409
 * unavailable_budget naming the nodes already down. */
int hc_avail_check(struct hc_db *db, const char *node, int max_unavailable, struct hc_error *err);
/* 0 when taking the nodes names[0..n) down together keeps what is down within max_unavailable,
 * else -1 with 409 unavailable_budget naming what is down already. Nodes down for any reason
 * count; the set's own do not count twice. domains: the budget counts failure domains (a domain
 * is down when any of its nodes is; a node without one is a domain of its own), else nodes. */
int hc_avail_check_set(struct hc_db *db, const char *const *names, size_t n, int max_unavailable,
                       int domains, struct hc_error *err);
/* The first node other than except that the poller finds unreachable or stalled: 1 and its name
 * in name, 0 when every other node answers, -1 with err. */
int hc_avail_unreachable(struct hc_db *db, const char *except, char *name, size_t len,
                         struct hc_error *err);

/* Loads the node's agent coordinates into n (strings owned by buf). 0, or -1 with 404. */
struct hc_maint_node {
    char name[64];
    char agent_url[320];
    char maintenance[16];
    char maintenance_op[64]; /* the operation that took it down, "" when up or unknown */
};
int hc_maint_node_load(struct hc_db *db, const char *name, struct hc_maint_node *mn,
                       struct hc_error *err);

struct hc_maint_params {
    const char *mode; /* ensure-accessibility | full | none */
    int force;        /* required with mode none: skips ok-to-stop */
    int max_unavailable;
    int64_t timeout_ms; /* every wait below is bounded by this */
    /* 0: refuse at once when the budget is spent (maintenance enter); else wait up to that long
     * for nodes down for other reasons to come back. Nodes that this same operation has taken
     * down do not make the wait time out: each of them is coming back within its own bounds. */
    int64_t wait_budget_ms;
    /* 0: refuse at once when the service answers ok-to-stop false (maintenance enter); else ask
     * again until it says yes, up to that long (the rolling upgrade: a peer that has just
     * restarted and resyncs makes the service refuse for a short while). */
    int64_t wait_ok_to_stop_ms;
    /* Optional: returns 1 when the two waits above should end now, as if interrupted (409
     * "interrupted"): the rolling upgrade stops taking nodes because another one failed. */
    int (*cancelled)(void *arg);
    void *cancel_arg;
    /* Optional: how to go ahead regardless, the end of a refusal's hint (NULL: maintenance's
     * "--mode none --force"; node remove says "--force --reason TEXT"). */
    const char *force_hint;
    /* Node removal: a node whose agent does not answer is down already and cannot be asked
     * ok-to-stop; the budget (which counted the others) is then the gate, and the step says
     * so. 0 (maintenance, upgrade): a transport failure fails the step. */
    int unreachable_ok;
    /* --batch domain: max_unavailable counts failure domains (hc_avail_check_set). */
    int budget_domains;
    /* Non-NULL: the node's batch passed its gate as a whole (budget and ok-to-stop for the set,
     * rolling.c); the node's budget and ok_to_stop steps record this text instead of asking. */
    const char *gated;
};
/* The gates of taking `node` down, for maintenance, the rolling upgrade and node removal: the
 * availability budget (nodes already down count; step "budget") and the storage service's
 * ok-to-stop (step "ok_to_stop"), each recorded under the node's name and asked again on every
 * run. Refusals are 409 unavailable_budget / not_ok_to_stop with the nodes down or the
 * service's reason. 0 or -1 with err. */
int hc_maint_gate_steps(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                        const struct hc_maint_params *p, struct hc_error *err);
/* The steps of entering maintenance inside an operation: budget and ok-to-stop (refusal: 409
 * with the service's reason), drain, stop, record. Each step is recorded under the node's name.
 * Idempotent: a node already in maintenance for this operation skips what is done; while the
 * node is still up, budget and ok-to-stop are asked again on every run (an answer recorded
 * before a controller restart may no longer hold). The caller lets one node at a time through
 * these steps (the budget of the next one must see this one down). */
int hc_maint_enter_steps(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                         const struct hc_maint_params *p, struct hc_error *err);
/* Exiting: start the service, wait until it is healthy and resynced, record. */
int hc_maint_exit_steps(struct hc_op_ctx *ctx, struct hc_http_client *client, const char *node,
                        int64_t timeout_ms, struct hc_error *err);

/* Waits (bounded by timeout_ms, checkpointing) until the node's service is healthy. */
int hc_maint_wait_healthy(struct hc_op_ctx *ctx, const struct hc_svc_node *n, int64_t timeout_ms,
                          struct hc_error *err);
/* Waits until the node reports nothing left to resync. */
int hc_maint_wait_resync(struct hc_op_ctx *ctx, const struct hc_svc_node *n, int64_t timeout_ms,
                         struct hc_error *err);

/* The kinds "maintenance.enter" and "maintenance.exit" (listed in controller/ops/kinds.c). */
extern const struct hc_op_kind hc_op_kind_maintenance_enter;
extern const struct hc_op_kind hc_op_kind_maintenance_exit;

#endif
