/*
 * The rolling engine shared by every operation that changes nodes one (or max_unavailable) at a
 * time without disrupting the storage: the software upgrade (op_upgrade.c) and the restart-class
 * configuration change (op_config.c). docs/upgrade.md has the sequence; DESIGN.md the rules.
 *
 * Per node: budget and ok-to-stop -> drain -> stop (maintenance) -> the change (the kind's step,
 * which also starts the service) -> verify_health (on failure: the kind's rollback, health, exit
 * maintenance, and no further node goes down) -> start/health/resync (exit maintenance) -> the
 * kind's bookkeeping. Every step is recorded per node (hc_op_step), so a controller killed at
 * any instant carries on after restart; the per-node progress is in table upgrade_nodes (one row
 * per operation and node, whatever the kind: from/to are versions for an upgrade, revisions for
 * a configuration change).
 *
 * Parallelism: min(max_unavailable, nodes left, HC_ROLLING_MAX_PARALLEL) threads ("slots") each
 * take the next node and carry it all the way, then take the next (hc_parallel_for). Each slot
 * has its own forked operation context and agent client, made at its first node. Taking a node
 * down (budget .. stop) is done by one thread at a time under `admit`, so the budget of the next
 * node counts this one as down (except in a batch of failure domains admitted as a whole, whose
 * nodes drain and stop in parallel). Nodes already down (a restart mid-way) are taken first. The
 * first failure or pause stops the taking of new nodes; the nodes already down are brought back.
 */
#ifndef HC_CONTROLLER_ROLLING_H
#define HC_CONTROLLER_ROLLING_H

#include <jansson.h>
#include <pthread.h>

#include "common/error.h"
#include "common/error_codes.h"
#include "controller/ops/ops.h"
#include "db/db.h"

#define HC_ROLLING_MAX_PARALLEL 32
/* The longest set of names (comma-separated) asked ok-to-stop in one question (the agent's limit,
 * GET /v1/service/ok-to-stop?nodes=); a batch with more goes one node at a time. */
#define HC_ROLLING_SET_MAX 1000

struct hc_rolling;
struct hc_svc_node; /* controller/remote/service_client.h: the kinds' steps call the node */
struct hc_http_client;

/* One node in a slot's hands, the arg of the kind's steps. */
struct hc_rolling_node {
    struct hc_rolling *r;
    struct hc_op_ctx *ctx;         /* the slot's */
    struct hc_http_client *client; /* the slot's */
    const struct hc_svc_node *svc; /* the node's name, agent URL, the slot's client */
    char from[64];                 /* what the node ran before (upgrade_nodes.from_version) */
    char previous[64];             /* set by the rollback: what the node is back on */
};

/* What a kind changes on a node. */
struct hc_rolling_change {
    const char *what;        /* for messages: "upgrade", "configuration change" */
    const char *change_step; /* the step's name: "activate", "settings" */
    const char *node_state;  /* a changing node's progress state: "upgrading", "applying" */
    /* On a node in maintenance (service stopped): makes the change and starts the service. */
    hc_step_fn change;
    /* Puts a node whose change failed its health back on what it ran (n->from), healthy, and
     * fills n->previous with what it is on. */
    hc_step_fn rollback;
    /* Bookkeeping once the node is back (rolled_back: on its old state). 0 or -1 with err. */
    int (*done)(struct hc_rolling_node *n, int rolled_back, struct hc_error *err);
    const struct hc_code *rolled_back_code; /* the operation's error after a rollback */
    const char *rolled_back_hint;           /* printf: %s is what the cluster is healthy on */
    void *arg;                              /* the kind's own, for its steps */
};

/* A slot's work on one node of a queue (rows {name, agent_url, ...}). */
typedef enum hc_op_result (*hc_rolling_work_fn)(struct hc_rolling_node *n, const json_t *row,
                                                struct hc_error *err);

struct hc_rolling_slot {
    struct hc_rolling *r;
    struct hc_op_ctx *ctx;
    struct hc_http_client *client;
};

struct hc_rolling {
    struct hc_op_ctx *ctx;
    const struct hc_rolling_change *change;
    const char *to; /* the target, for progress rows and messages */
    int max_unavailable;
    int64_t node_timeout_ms;
    /* --batch domain (params "batch": "domain"): max_unavailable counts failure domains, and
     * the nodes go in batches of whole domains (hc_rolling_batches) when the storage service
     * answers ok-to-stop for the batch as a set; otherwise that batch goes one node at a time,
     * and the operation says why. */
    int batch_domain;
    /* private */
    const char *gated; /* the running batch's gate answer (NULL: each node asks its own) */
    char gate_text[800];
    hc_rolling_work_fn work;
    json_t *queue;
    struct hc_rolling_slot slots[HC_ROLLING_MAX_PARALLEL];
    pthread_mutex_t admit; /* held while a node is taken down (budget .. stop) */
    pthread_mutex_t lock;  /* guards stop, result and err */
    int stop;
    enum hc_op_result result;
    struct hc_error err;
};

void hc_rolling_init(struct hc_rolling *r, struct hc_op_ctx *ctx,
                     const struct hc_rolling_change *change, const char *to, int max_unavailable,
                     int64_t node_timeout_ms);
void hc_rolling_clear(struct hc_rolling *r);

/* The per-node rows (upgrade_nodes), made once (the first run) so that `from` is what ran
 * before: rows {name, from, done (1: nothing to change on it)}. 0 or -1 with err. */
int hc_rolling_progress_init(struct hc_rolling *r, const json_t *rows, struct hc_error *err);
/* Updates a node's progress row (state NULL keeps it). */
void hc_rolling_progress(struct hc_op_ctx *ctx, const char *node, const char *state,
                         const char *step);

/* Runs work on every row of queue (taken over) with up to `parallel` slots; the gravest
 * outcome of theirs (failed > aborted > paused > succeeded), err the first failure's. */
enum hc_op_result hc_rolling_each(struct hc_rolling *r, json_t *queue, hc_rolling_work_fn work,
                                  size_t parallel, struct hc_error *err);
/* The batches of --batch domain: rows [{"name", "failure_domain"?, ...}] (in the order to
 * take them) grouped by failure domain (a node without one is a domain of its own), domains in
 * the order of their first node, up to max_domains domains a batch: [{"domains": [NAME...],
 * "nodes": [row...]}] (new reference; a node without a domain is named by itself in domains). */
json_t *hc_rolling_batches(const json_t *rows, int max_domains);
/* The request's "batch" ("node", the default, or "domain") checked against max_unavailable:
 * with "domain" it counts failure domains and may not exceed the members' domains. *batch gets
 * the word (static). 0, or -1 with 400 invalid_argument. */
int hc_rolling_batch_check(struct hc_db *db, const json_t *body, int64_t max_unavailable,
                           const char **batch, struct hc_error *err);
/* The plan's batches for --batch domain: nodes [{"name", "failure_domain"?}] to change, in
 * order: [{"domains": [...], "nodes": [NAME...]}] (new reference). */
json_t *hc_rolling_plan_batches(const json_t *nodes, int max_domains);
/* 1 when the operation's params ask for --batch domain. */
int hc_rolling_params_domain(const json_t *params);
/* Changes every node whose progress row is not done, up to max_unavailable at a time (with
 * batch_domain: a batch of up to max_unavailable whole domains at a time). */
enum hc_op_result hc_rolling_nodes(struct hc_rolling *r, struct hc_error *err);

/* A failed step's outcome: paused (the agent vanished: resumes when it is back; or the user
 * paused), aborted, or failed. */
enum hc_op_result hc_rolling_classify(struct hc_op_ctx *ctx, const char *node,
                                      const struct hc_error *err);
/* 1 when this operation already wrote event `type` for the node, 0 when not, -1 with err (a
 * step cut after its event and before its end runs again: the event is not written twice). */
int hc_rolling_event_written(struct hc_op_ctx *ctx, const char *type, const char *node,
                             struct hc_error *err);

#endif
