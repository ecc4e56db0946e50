/*
 * The kernel's IPv4 neighbour (ARP) table, read over rtnetlink (docs/net.md "Neighbour tables"):
 * its size against its thresholds, and the entries of given addresses. A probe whose small packet
 * goes unanswered asks here whether the peer's address could be resolved at all: a full table
 * refuses new entries ("neighbor table overflow"), and that is the host's table, not the network.
 *
 * The table and its thresholds (net.ipv4.neigh.default.gc_thresh1..3) belong to the kernel, not
 * to a network namespace: every namespace of a host counts in the same `entries` and shares the
 * root namespace's thresholds. Entries themselves are per namespace.
 */
#ifndef HC_AGENTS_NEIGH_H
#define HC_AGENTS_NEIGH_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct hc_neigh_table {
    int known;      /* 1 once read */
    long entries;   /* entries of the kernel's table, every namespace counted */
    long thresh1;   /* gc_thresh1: below it nothing is collected */
    long thresh2;   /* gc_thresh2: above it, entries are collected by force after 5 s */
    long thresh3;   /* gc_thresh3: the table never grows past it; new entries are refused */
    uint64_t fulls; /* new entries refused since boot (table_fulls) */
};

/* Reads the "arp_cache" table (RTM_GETNEIGHTBL). 0, or -1 with err (out->known stays 0). */
int hc_neigh_table_read(struct hc_neigh_table *out, struct hc_error *err);

/* Whether the table refused entries between two reads, or is at its hard limit. */
int hc_neigh_table_full(const struct hc_neigh_table *before, const struct hc_neigh_table *after);

enum hc_neigh_state {
    HC_NEIGH_UNKNOWN = 0, /* not looked up */
    HC_NEIGH_NONE,        /* no entry: never resolved, collected, or refused by a full table */
    HC_NEIGH_INCOMPLETE,  /* asked, no answer yet */
    HC_NEIGH_FAILED,      /* asked, never answered */
    HC_NEIGH_RESOLVED,    /* reachable, stale, delay, probe, permanent or noarp */
};

/* "unknown", "none", "incomplete", "failed", "resolved". */
const char *hc_neigh_state_name(enum hc_neigh_state s);

/* The states of n addresses in this namespace (one RTM_GETNEIGH dump); an address with entries
 * on several interfaces counts as resolved when one is. 0, or -1 with err (states untouched). */
int hc_neigh_lookup(const struct in_addr *addrs, size_t n, enum hc_neigh_state *states,
                    struct hc_error *err);

#endif
