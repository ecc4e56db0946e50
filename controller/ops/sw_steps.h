/*
 * The software steps the rolling upgrade and node add share (one place, so both give a node its
 * version the same way): the bundle a node is given with the read-only token its agent fetches
 * it with, and the steps "stage" and "activate" of one node. Each step is idempotent and starts
 * from what the agent says now, so a controller killed at any instant carries on after restart
 * (docs/operations.md).
 */
#ifndef HC_CONTROLLER_SW_STEPS_H
#define HC_CONTROLLER_SW_STEPS_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"
#include "controller/api/auth.h"
#include "controller/ops/ops.h"
#include "db/db.h"

struct hc_svc_node; /* controller/remote/service_client.h: ops headers talk to no node */

/* A version to give nodes. Zero-initialise; hc_sw_target_clear frees what it holds. */
struct hc_sw_target {
    const char *version;                /* borrowed */
    json_t *bundle;                     /* the uploaded row: sha256, signature, manifest_json */
    char token[HC_AUTH_TOKEN_TEXT_MAX]; /* read-only, reads this one bundle: "" until minted */
    /* Where the agents fetch it: "" for the controller URL they enrolled with; in HA mode this
     * controller's own URL (the one they enrolled with may be a standby, or gone). */
    char url[1400];
};

/* The uploaded row of version (new reference), or NULL with err: 404 with the upload hint. */
json_t *hc_sw_bundle_row(struct hc_db *db, const char *version, struct hc_error *err);
/* Loads version's row into t. 0 or -1 with err. */
int hc_sw_target_load(struct hc_db *db, const char *version, struct hc_sw_target *t,
                      struct hc_error *err);
/* Mints the token the agents fetch the bundle with, living while this run does (an earlier
 * run's, after a crash or a pause, is deleted first). 0 or -1 with err. */
int hc_sw_target_token(struct hc_op_ctx *ctx, struct hc_sw_target *t, struct hc_error *err);
/* Deletes the token when minted (a failure is logged: it expires by itself) and frees the row. */
void hc_sw_target_clear(struct hc_op_ctx *ctx, struct hc_sw_target *t);

/* Step (n->name, "stage"): the agent fetches t's bundle from the controller and verifies its
 * digest and signature again. 0 or -1 with err (transport failures keep their codes). */
int hc_sw_stage_step(struct hc_op_ctx *ctx, const struct hc_svc_node *n,
                     const struct hc_sw_target *t, struct hc_error *err);
/* Step (n->name, "activate"): version becomes current on the node and the service (re)starts;
 * event software.activated (from, to) written once per node and operation. */
int hc_sw_activate_step(struct hc_op_ctx *ctx, const struct hc_svc_node *n, const char *version,
                        struct hc_error *err);

/* The bodies of the two steps, for a caller that records the step itself (the rolling engine
 * calls its change step through hc_op_step): detail receives the step's text. */
int hc_sw_stage_node(const struct hc_svc_node *n, const struct hc_sw_target *t, char *detail,
                     size_t len, struct hc_error *err);
int hc_sw_activate_node(struct hc_op_ctx *ctx, const struct hc_svc_node *n, const char *version,
                        char *detail, size_t len, struct hc_error *err);

#endif
