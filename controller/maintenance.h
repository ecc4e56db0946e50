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
#ifndef HC_CONTROLLER_MAINTENANCE_H
#define HC_CONTROLLER_MAINTENANCE_H

#include <stdint.h>

#include "common/error.h"
#include "common/https_client.h"
#include "controller/ops.h"
#include "controller/service_client.h"
#include "db/db.h"

#define HC_MAINT_DEFAULT_TIMEOUT_MS (5 * 60 * 1000)
#define HC_ERR_NOT_OK_TO_STOP "not_ok_to_stop"
#define HC_ERR_BUDGET "unavailable_budget"

/* 1 when mode is ensure-accessibility, full or none. */
int hc_maint_mode_valid(const char *mode);

/* Nodes down now other than `except` (may be NULL): count, and their names with why in `who`.
 * Returns 0 or -1 with err. */
int hc_avail_down(struct hc_db *db, const char *except, int *count, char *who, size_t who_len,
                  struct hc_error *err);
/* 0 when taking `node` down keeps the down count within max_unavailable, else -1 with 409
 * unavailable_budget naming the nodes already down. */
int hc_avail_check(struct hc_db *db, const char *node, int max_unavailable, struct hc_error *err);

/* Loads the node's agent coordinates into n (strings owned by buf). 0, or -1 with 404. */
struct hc_maint_node {
    char name[64];
    char agent_url[320];
    char maintenance[16];
};
int hc_maint_node_load(struct hc_db *db, const char *name, struct hc_maint_node *mn,
                       struct hc_error *err);

struct hc_maint_params {
    const char *mode;   /* ensure-accessibility | full | none */
    int force;          /* required with mode none: skips ok-to-stop */
    int max_unavailable;
    int64_t timeout_ms; /* every wait below is bounded by this */
    int64_t wait_budget_ms; /* 0: refuse at once when the budget is spent; else wait that long */
};
/* The steps of entering maintenance inside an operation: budget and ok-to-stop (refusal: 409
 * with the service's reason), drain, stop, record. Each step is recorded under the node's name
 * (prefix distinguishes uses, e.g. "" or "maintenance."). Idempotent: a node already in
 * maintenance for this operation skips what is done. */
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

/* Registers maintenance.enter and maintenance.exit. */
void hc_maintenance_register(void);

#endif
