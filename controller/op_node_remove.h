/*
 * Operation kind "node.remove" (not disruptive): params {"node": NAME}. Asks the node's agent
 * to leave (step "leave"), then revokes its certificate and deletes the node (step "revoke").
 */
#ifndef HC_CONTROLLER_OP_NODE_REMOVE_H
#define HC_CONTROLLER_OP_NODE_REMOVE_H

#define HC_OP_NODE_REMOVE "node.remove"

/* Registers the kind with the operations framework (before the pool starts). */
void hc_op_node_remove_register(void);

#endif
