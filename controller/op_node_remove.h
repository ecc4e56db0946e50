/*
 * Operation kind "node.remove" (disruptive: holds the cluster lease): params {"node": NAME}.
 * Asks the node's agent to leave (step "leave"), stops and uninstalls it over SSH when it was
 * brought in that way (step "uninstall"), then revokes its certificate, deletes the node and
 * issues the revocation list again (step "revoke"). An uninstall that fails does not keep the
 * node in the cluster, but the operation then ends failed, its hint the cleanup left to do.
 */
#ifndef HC_CONTROLLER_OP_NODE_REMOVE_H
#define HC_CONTROLLER_OP_NODE_REMOVE_H

#define HC_OP_NODE_REMOVE "node.remove"

/* Registers the kind with the operations framework (before the pool starts). */
void hc_op_node_remove_register(void);

#endif
