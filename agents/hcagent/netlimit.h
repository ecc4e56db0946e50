/*
 * The storage service's network egress bound, the setting limits.net_mbit (docs/bundles.md
 * "Limits"): TCP sent from the node's storage address out of the storage interface held to N
 * Mbit/s, by an HTB root qdisc that iproute2's tc puts on the interface. Everything runs in the
 * calling thread's network namespace.
 */
#ifndef HC_AGENTS_NETLIMIT_H
#define HC_AGENTS_NETLIMIT_H

#include <jansson.h>

/* The agent's qdisc handle ("HC"), its class 4863:1, its u32 filter 800::800. */
#define HC_NETLIMIT_HANDLE 0x4863u

/* What applies on an interface, as the last apply or clear found it in the kernel. */
struct hc_netlimit {
    int applied;        /* 1: the kernel holds the agent's qdisc, class and filter there */
    int mbit;           /* its rate (0 when not applied) */
    char interface[16]; /* "" before any apply */
    char address[16];   /* the source address it matches (the kernel's filter's) */
    char detail[700];   /* what applies, or plainly why not */
};

/* Holds TCP from src_ipv4 leaving ifname to mbit Mbit/s (1-1000000; 0 clears it, as
 * hc_netlimit_clear): root qdisc htb 4863: whose unclassified traffic passes unshaped, class
 * 4863:1 at the rate, u32 filter on ip src ADDR/32 and protocol tcp into it. Idempotent; a
 * changed rate or address changes the class or the filter in place while traffic flows. Runs
 * tc ($HCAGENT_TC, default /sbin/tc) with an argv, no shell, each run killed after 5 s, so it
 * may block ~15 s: call it on a job thread (it uses only its arguments). A root qdisc the agent
 * did not put there is left alone (refused). 0, or -1 with nl->detail saying plainly why (tc
 * missing, not permitted, no such interface, someone else's qdisc, tc's own words): the
 * service then runs unbounded (or on the bound it had), and the detail says which. nl is in and
 * out: zeroed before the first apply, it receives what the kernel holds afterwards; a bound an
 * earlier apply put on another interface (nl->interface: the storage interface changed) is
 * removed first; arguments refused leave the bound as it was, said in the detail. */
int hc_netlimit_apply(const char *ifname, const char *src_ipv4, int mbit, struct hc_netlimit *nl);

/* Removes the agent's root qdisc from ifname and nothing else. 0 when no bound of the agent's
 * remains there (also: none was, no such interface), -1 with nl->detail. */
int hc_netlimit_clear(const char *ifname, struct hc_netlimit *nl);

/* {"applied","mbit","interface","address","detail","sent_bytes","dropped","overlimits"}, read
 * from the kernel now (rtnetlink, no process: fine on the loop thread). applied, mbit and
 * address are what the kernel holds (qdisc, class and filter: a bound or its filter removed by
 * hand shows as gone, the detail says so);
 * sent_bytes, dropped and overlimits are the class's counters (the service's TCP through the
 * bound), null when there is none. New reference. */
json_t *hc_netlimit_json(const struct hc_netlimit *nl);

#endif
