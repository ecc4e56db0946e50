/*
 * Operation kind "node.set" (disruptive: holds the cluster lease, so that no rolling upgrade
 * batches by domains while they change): params {"node": NAME, "failure_domain": NAME|null}.
 * Records the node's failure domain (step "record", event node.failure_domain), sends the
 * storage members with their domains to every agent (step "storage_peers": the service moves
 * the copies that the new domains place elsewhere, docs/hcstor.md "Failure domains") and waits
 * until every running member has resynced (step "resync"), so that nothing is lost and, when the
 * operation ends, the replicas are where the new domains say.
 */
#ifndef HC_CONTROLLER_OP_NODE_SET_H
#define HC_CONTROLLER_OP_NODE_SET_H

#include <jansson.h>

#include "common/error.h"

#define HC_OP_NODE_SET "node.set"

/* The operation's params from the body of PATCH /v1/nodes/{name}: {"failure_domain": NAME or
 * null (none: the node is its own domain)}; nothing else is accepted. A new object, or NULL with
 * 400 invalid_argument naming what is wrong. */
json_t *hc_node_set_params(const char *name, const json_t *body, struct hc_error *err);

/* The kind HC_OP_NODE_SET (listed in controller/ops/kinds.c). */
extern const struct hc_op_kind hc_op_kind_node_set;

#endif
