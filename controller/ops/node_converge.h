/*
 * node.add, after its hosts joined: each new node is given the cluster's storage version and
 * joins the storage members in the same operation (docs/operations.md "node.add"). The version
 * is decided once and recorded (step "storage_version"); then per new node stage -> activate ->
 * healthy, the storage peers sent to every member with the new nodes in, and each new node's
 * resync waited for. A cluster whose nodes run no storage version yet stops after enrollment,
 * and says so (the step's detail, and "storage" in the operation's result).
 */
#ifndef HC_CONTROLLER_NODE_CONVERGE_H
#define HC_CONTROLLER_NODE_CONVERGE_H

#include <stddef.h>

#include "common/error.h"
#include "controller/ops/ops.h"

/* Converges the nodes named (enrolled and healthy) in the running node.add. The outcome to
 * return from the run (HC_OP_FAILED with err). */
enum hc_op_result hc_node_converge(struct hc_op_ctx *ctx, const char *const *names, size_t n,
                                   struct hc_error *err);

#endif
