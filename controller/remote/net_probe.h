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

/* A check of more than HC_NET_LIST_ALL_PAIRS pairs (65 nodes) searches the largest passing size
 * of a sample of its blackholes only (docs/net.md "At scale"): at most HC_NET_SEARCH_PER_NODE
 * searched pairs from and toward each node. */
#define HC_NET_SEARCH_PER_NODE 2

/* Probes c->pairs (from, to and size filled by the caller) through one fan-out: each source's
 * agent gets one POST /v1/net/probe with all its targets, every agent at once. With refresh,
 * GET /v1/interfaces of every node rides in the same fan-out and updates the nodes first. Fills
 * result, path_mtu, largest_ok, rtt_ms, detail and the nodes' agent_ok / agent_error. Beyond
 * HC_NET_LIST_ALL_PAIRS pairs its agents answer compactly and, with c->search, the first round
 * classifies every pair without searching and a second one searches the blackholes
 * hc_net_pick_searches picks. Never fails: what could not be asked ends as not_probed with the
 * reason. */
void hc_net_probe(struct hc_http_client *client, struct hc_net_check *c, int refresh);

/* Targets an agent probes at once (agents/hcagent/probe.c WINDOW): a request of more lasts one
 * probe time per window. */
#define HC_NET_AGENT_WINDOW 256

/* One agent's probe answer (the JSON body of its POST /v1/net/probe; NULL when the call failed
 * and the node's agent_error says why) into the pairs of node `source` that the request's
 * `targets` named — pairs[j] for targets[j] — as the fan-out applies each answer the moment it
 * arrives. Sets the node's agent_ok and neighbour table. */
void hc_net_probe_answer(struct hc_net_check *c, size_t source, const uint32_t *pairs,
                         size_t npairs, const json_t *targets, const json_t *answer);

/* Marks in pick[k] the blackhole pairs a large check searches: in pair order, a pair whose
 * source and target each have fewer than per_node picked pairs so far. So every responder
 * answers at most per_node searches and every agent runs at most per_node, whatever the fault.
 * Returns how many. Pure. */
size_t hc_net_pick_searches(const struct hc_net_check *c, size_t per_node, unsigned char *pick);

#endif
