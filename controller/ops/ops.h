/*
 * Operations: durable intent in the database plus a state machine run by a worker pool.
 *
 * States: pending -> running -> (paused) -> succeeded | failed | aborted. A terminal state is
 * never followed by another. A disruptive operation holds the cluster lease (table
 * cluster_lease) from submit until it ends; a second one is refused with 409 conflict naming the
 * first. A controller killed at any instant finds its 'running' operations at start and runs them
 * again from the top: run functions are idempotent and use hc_op_step, which skips steps already
 * recorded as succeeded.
 */
#ifndef HC_CONTROLLER_OPS_H
#define HC_CONTROLLER_OPS_H

#include <jansson.h>

#include "common/error.h"
#include "controller/controller.h"
#include "db/db.h"

struct hc_op_ctx;

/* Result of a run function. */
enum hc_op_result {
    HC_OP_SUCCEEDED = 0,
    HC_OP_FAILED,  /* err holds the reason */
    HC_OP_PAUSED,  /* a pause was requested and honoured at a safe point */
    HC_OP_ABORTED, /* an abort was requested and honoured */
};
typedef enum hc_op_result (*hc_op_run_fn)(struct hc_op_ctx *ctx, struct hc_error *err);

struct hc_op_kind {
    const char *name; /* e.g. "node.remove" */
    int disruptive;   /* takes the cluster lease */
    hc_op_run_fn run;
};
/* Every kind this controller runs, ended by NULL: one static table (controller/ops/kinds.c),
 * like the route table (controller/api/api.c); each op_*.c exports its kinds. */
extern const struct hc_op_kind *const hc_op_kinds[];
/* The kind named name: from hc_op_kinds, else from the test kinds; NULL when unknown. */
const struct hc_op_kind *hc_ops_kind(const char *name);
/* For unit tests of the framework: kinds of their own (ended by NULL, static storage), looked up
 * after hc_op_kinds; NULL removes them. Set before the pool starts. */
void hc_ops_test_kinds(const struct hc_op_kind *const *kinds);

/* Records a new pending operation (and takes the lease when disruptive) in one transaction.
 * params is borrowed. id_out receives "op-<12 hex>". 409 conflict if the lease is held. */
int hc_ops_submit(struct hc_db *db, const char *cluster_id, const char *kind, const json_t *params,
                  const char *requested_by, char id_out[32], struct hc_error *err);
/* Stores an operation's result document (operations.result_json, GET
 * /v1/operations/{id}/result). 0 or -1 with err. */
int hc_ops_store_result(struct hc_db *db, const char *op_id, const json_t *result,
                        struct hc_error *err);
/* "pause", "resume" or "abort". 404 for an unknown id, 409 when the state does not allow it. */
int hc_ops_control(struct hc_db *db, const char *id, const char *action, struct hc_error *err);
/* {"operation":OP,"steps":[...]} or NULL with err (404). */
json_t *hc_ops_show(struct hc_db *db, const char *id, struct hc_error *err);
/* {"operations":[OP...]} newest first; state filter may be NULL. */
json_t *hc_ops_list(struct hc_db *db, const char *state, struct hc_error *err);
/* Active (pending/running/paused) operations as a JSON array of OP. */
json_t *hc_ops_active(struct hc_db *db, struct hc_error *err);

/* The worker pool. Start resets operations left 'running' by a dead controller to 'pending'. */
struct hc_ops_pool *hc_ops_pool_start(struct hc_controller *ctl, int nworkers,
                                      struct hc_error *err);
/* Wakes a worker (after submit or resume). */
void hc_ops_pool_kick(struct hc_ops_pool *pool);
/* Stops claiming, lets running functions reach a safe point, joins the threads. */
void hc_ops_pool_stop(struct hc_ops_pool *pool);

/* Inside a run function. */
struct hc_db *hc_op_db(struct hc_op_ctx *ctx);
struct hc_controller *hc_op_controller(struct hc_op_ctx *ctx);
const char *hc_op_id(const struct hc_op_ctx *ctx);
const json_t *hc_op_params(const struct hc_op_ctx *ctx);
/* Records what the operation waits on now ("agent n2 to answer /v1/status"); NULL clears. */
void hc_op_waiting(struct hc_op_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Safe point: returns HC_OP_SUCCEEDED to go on, or HC_OP_PAUSED / HC_OP_ABORTED when the user
 * asked for it (or the controller is stopping: HC_OP_PAUSED, and the operation stays 'running'
 * in the database so that the next start resumes it). */
enum hc_op_result hc_op_checkpoint(struct hc_op_ctx *ctx);

/* Runs fn as step (node, step) unless that step already succeeded in this operation.
 * Records running/succeeded/failed with attempts, timestamps and detail. fn returns 0 or -1
 * with err; detail (may be NULL) is a short text stored with the step. */
typedef int (*hc_step_fn)(struct hc_op_ctx *ctx, void *arg, char *detail, size_t detail_len,
                          struct hc_error *err);
int hc_op_step(struct hc_op_ctx *ctx, const char *node, const char *step, hc_step_fn fn, void *arg,
               struct hc_error *err);

/* Like hc_op_step, but fn runs every time, even when the step succeeded before: for steps that
 * only observe (connect, preflight) and whose results later steps need after a restart. */
int hc_op_step_observe(struct hc_op_ctx *ctx, const char *node, const char *step, hc_step_fn fn,
                       void *arg, struct hc_error *err);

/* A second context on the same operation with its own database connection, for a run function
 * that spreads work over threads (one context per thread; SQLite connections are not shared).
 * NULL with err. Free with hc_op_ctx_free_fork. */
struct hc_op_ctx *hc_op_ctx_fork(struct hc_op_ctx *ctx, struct hc_error *err);
void hc_op_ctx_free_fork(struct hc_op_ctx *fork);

/* Before returning HC_OP_PAUSED because `node` stopped answering: records the reason (shown
 * as waiting_on) and that the operation resumes by itself once the poller sees the node
 * reachable again (hc_ops_resume_for_node). */
void hc_op_pause_until_reachable(struct hc_op_ctx *ctx, const char *node, const char *reason);
/* Called by the poller in its transaction when `node` turns reachable: paused operations that
 * waited for it go back to pending. 0 or -1 with err. */
int hc_ops_resume_for_node(struct hc_db *db, const char *node, struct hc_error *err);

#endif
