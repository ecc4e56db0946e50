/*
 * Operation kind "node.remove" (disruptive: holds the cluster lease): params {"node": NAME,
 * "force", "reason"?, "purge", "max_unavailable"} (hc_node_remove_params). Passes the gates of
 * maintenance enter (steps "budget" and "ok_to_stop": refused at once, 409 unavailable_budget /
 * not_ok_to_stop, the node untouched) unless force, whose reason is recorded in the steps and
 * the node.removed event; drains the service (step "drain"); asks the node's agent to leave
 * (step "leave"), stops and uninstalls it over SSH when it was brought in that way (step
 * "uninstall"), then revokes its certificate, deletes the node and issues the revocation list
 * again (step "revoke"). The service's data is kept on the node (DATA/kept/NAME.OP) unless
 * purge; step "service_data" says what became of it. An uninstall that fails does not keep the
 * node in the cluster, but the operation then ends failed, its hint the cleanup left to do.
 */
#ifndef HC_CONTROLLER_OP_NODE_REMOVE_H
#define HC_CONTROLLER_OP_NODE_REMOVE_H

#include <jansson.h>

#include "common/error.h"

#define HC_OP_NODE_REMOVE "node.remove"
#define HC_NODE_REMOVE_REASON_MAX 200

/* The operation's params from the body of DELETE /v1/nodes/{name} ({} when none):
 * {"force"?: bool, "reason"?: text, "purge"?: bool, "max_unavailable"?: 1..1000}. force needs a
 * reason (1 to HC_NODE_REMOVE_REASON_MAX bytes, no control characters) and a reason needs force.
 * A new object, or NULL with 400 invalid_argument. */
json_t *hc_node_remove_params(const char *name, const json_t *body, struct hc_error *err);

/* The kind HC_OP_NODE_REMOVE (listed in controller/ops/kinds.c). */
extern const struct hc_op_kind hc_op_kind_node_remove;

#endif
