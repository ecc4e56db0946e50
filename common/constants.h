/*
 * Numbers more than one program must agree on: the ports, IPv4's header sizes and MTU bounds.
 * One definition each; a program's own limits stay with that program.
 */
#ifndef HC_COMMON_CONSTANTS_H
#define HC_COMMON_CONSTANTS_H

#define HC_PORT_CONTROLLER 7443 /* hcctld's API (docs/api.md) */
#define HC_PORT_AGENT 7444      /* hcagent's mutual-TLS API */
#define HC_PORT_PROBE 7445      /* every agent's UDP echo responder (agents/hcagent/probe.h) */

#define HC_IPV4_UDP_HEADERS 28 /* IPv4 (20) + UDP or ICMP (8): payload = packet size - 28 */
#define HC_MTU_MIN 68          /* IPv4's minimum MTU */
#define HC_MTU_MAX 65535       /* the largest IPv4 packet */

#endif
