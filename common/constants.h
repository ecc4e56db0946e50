/*
 * Numbers more than one program must agree on: the ports, IPv4's header sizes and MTU bounds.
 * One definition each; a program's own limits stay with that program.
 */
#ifndef HC_COMMON_CONSTANTS_H
#define HC_COMMON_CONSTANTS_H

#define HC_PORT_CONTROLLER 7443 /* hcctld's API (docs/api.md) */
#define HC_PORT_AGENT 7444      /* hcagent's mutual-TLS API */

/* The agent API's version (docs/agent-upgrade.md "API versions and skew"): one more whenever
 * the agent API changes in a way an older controller or agent could misread. An agent reports
 * it as "api_version" in GET /v1/status; one that reports none speaks version 1. The controller
 * drives agents of HC_AGENT_API_VERSION and HC_AGENT_API_VERSION - 1; any other is refused
 * disruptive work (409 agent_api_unsupported) and can only be upgraded. */
#define HC_AGENT_API_VERSION 2
#define HC_AGENT_API_OLDEST_SUPPORTED 1 /* HC_AGENT_API_VERSION - 1, a literal for SQL text */
#define HC_STR_(x) #x
#define HC_STR(x) HC_STR_(x) /* a macro's value as a string literal */
_Static_assert(HC_AGENT_API_OLDEST_SUPPORTED == HC_AGENT_API_VERSION - 1, "one version of skew");
#define HC_PORT_PROBE 7445 /* every agent's UDP echo responder (agents/hcagent/probe.h) */

#define HC_IPV4_UDP_HEADERS 28 /* IPv4 (20) + UDP or ICMP (8): payload = packet size - 28 */
#define HC_MTU_MIN 68          /* IPv4's minimum MTU */
#define HC_MTU_MAX 65535       /* the largest IPv4 packet */

#endif
