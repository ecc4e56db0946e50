/*
 * One rtnetlink request and its replies (libmnl), for the agent's link (agents/hcagent/mtu.h)
 * and neighbour (agents/hcagent/neigh.h) reads and changes. Everything runs in the calling
 * thread's network namespace; a socket is opened per request, so callers need no state.
 */
#ifndef HC_AGENTS_RTNL_H
#define HC_AGENTS_RTNL_H

#include <libmnl/libmnl.h>

/* Sends nlh (NLM_F_REQUEST | NLM_F_ACK added) and runs cb(data) on every reply until the
 * acknowledgement or, for NLM_F_DUMP, the end of the dump. cb may be NULL. 0, or -1 with errno
 * set (the kernel's error for a refused request). */
int hc_rtnl_transact(struct nlmsghdr *nlh, mnl_cb_t cb, void *data);

#endif
