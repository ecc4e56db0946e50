/*
 * The node's network interfaces as the kernel sees them, read over rtnetlink with libmnl.
 * Later issues add MTU changes (with the commit-confirmed revert) here.
 */
#ifndef HC_AGENTS_NETINFO_H
#define HC_AGENTS_NETINFO_H

#include <jansson.h>

#include "common/error.h"

/* Every link of the current network namespace, sorted by index, as a new JSON array of
 *   {"name","index","mtu","state","kind","master","addresses":["a.b.c.d/len",...]}
 * state is the operational state ("up", "down", "unknown", "dormant", "lowerlayerdown",
 * "notpresent", "testing"); kind is IFLA_INFO_KIND ("bridge", "bond", "veth", ...) or null;
 * master is the name of the master device (bridge, bond) or null; addresses are IPv4 then IPv6
 * in kernel order. Returns NULL with err when netlink fails. Caller owns the array. */
json_t *hc_netinfo_interfaces(struct hc_error *err);

/* Name of an IF_OPER_* value ("up", "down", ...). */
const char *hc_netinfo_operstate_name(unsigned int operstate);

#endif
