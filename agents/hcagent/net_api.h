/*
 * The agent's network API (docs/api.md "Agent API: network"): DF probes, MTU changes with a
 * revert timer, iperf3 benches; plus the hidden `hcagent probe` and `hcagent probe-responder`
 * commands used by the tests and the namespace lab.
 */
#ifndef HC_AGENTS_NET_API_H
#define HC_AGENTS_NET_API_H

#include <event2/event.h>

#include "agents/hcagent/agent.h"
#include "common/error.h"
#include "common/https_server.h"

/* Registers the /v1/net/... routes on srv and creates the agent's network state, owned by agent
 * until hc_agent_net_free: the MTU manager (which reverts or re-arms a change left pending by an
 * earlier run, on base) and the worker threads of probes and benches. -1 with err. */
int hc_agent_net_routes(struct hc_agent *agent, struct hc_http_server *srv, struct event_base *base,
                        struct hc_error *err);
/* Starts the UDP probe responder on HC_PORT_PROBE, all addresses. -1 with err. */
int hc_agent_net_start_responder(struct hc_agent *agent, struct hc_error *err);
/* Stops the responder, cancels running probes and benches (killing their children), answers
 * their pending requests and frees the network state. Call before the HTTP server is freed.
 * No-op for an agent without network state. */
void hc_agent_net_free(struct hc_agent *agent);

/* Hidden commands (argv[0] is the command name). Exit codes: 0 ok, 1 failed, 2 usage, and for
 * `probe` 4 when a target did not pass. */
int hc_net_cmd_probe_responder(int argc, char **argv);
int hc_net_cmd_probe(int argc, char **argv);

#endif
