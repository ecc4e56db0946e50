/*
 * Probing the storage network through the agents (docs/net.md): each source node's agent is
 * asked to probe the storage addresses of the others with DF probes of the full size, all agents
 * at once through one curl multi handle. The client side of the check whose state (nodes, pairs,
 * verdicts, findings, the result document) is controller/state/net.h; called by the network
 * operations (controller/ops/op_net.c) on the operation workers.
 */
#ifndef HC_CONTROLLER_NET_PROBE_H
#define HC_CONTROLLER_NET_PROBE_H

#include "common/https_client.h"
#include "controller/state/net.h"

/* Probes c->pairs (from, to and size filled by the caller) through one fan-out: each source's
 * agent gets one POST /v1/net/probe with all its targets. With refresh, GET /v1/interfaces of
 * every node rides in the same fan-out and updates the nodes first. Fills result, path_mtu,
 * largest_ok, rtt_ms, detail and the nodes' agent_ok / agent_error. Never fails: what could not
 * be asked ends as not_probed with the reason. */
void hc_net_probe(struct hc_http_client *client, struct hc_net_check *c, int refresh);

#endif
