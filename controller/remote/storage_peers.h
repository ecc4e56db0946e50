/*
 * The storage service's membership: every agent is told the cluster's storage members
 * (PUT /v1/service/peers, docs/api.md), which the service reads from its data directory
 * (hcstor: DATA/peers.json; placement and replication follow it, docs/hcstor.md).
 *
 * Sent by the operations that change membership or start the service: node add (once the new
 * nodes run the cluster's storage version, controller/ops/node_converge.c), node remove, and a
 * rolling upgrade (before staging, so a first install starts with its peers). The epoch is the
 * controller's wall clock in milliseconds when the list was made: a later list always has a larger
 * epoch.
 */
#ifndef HC_CONTROLLER_STORAGE_PEERS_H
#define HC_CONTROLLER_STORAGE_PEERS_H

#include "common/error.h"
#include "common/https_client.h"
#include "controller/ops/ops.h"

/* A step ("storage_peers") of the running operation that sends the members,
 * {"epoch", "nodes": [{"name", "host", "domain"?}]}, to every member's agent (domain: the
 * member's failure domain, absent when it has none: the service places replicas in distinct
 * domains, docs/hcstor.md). Each host is where that
 * member's service serves: its storage address as its agent reports it (GET /v1/status
 * "storage_host", asked of every member at once), the management host of an agent configured
 * without a storage interface, the recorded storage address of one that does not answer. A node
 * that does not answer is named in the step's detail and left out: it receives the list with the
 * next membership change or upgrade (its service, if running, keeps its previous list). Fails only
 * when no agent took the list. */
int hc_storage_peers_step(struct hc_op_ctx *ctx, struct hc_http_client *client,
                          struct hc_error *err);

#endif
