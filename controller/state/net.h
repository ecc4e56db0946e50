/*
 * The storage network as the controller knows it, behind `hcctl net show` and the checks of
 * `hcctl net check-jumbo` (docs/net.md): every node's storage interface, its MTU and the MTU of
 * the bridge or bond it hangs on, gathered from the database; the directed pairs of a check and
 * what their probes found; the verdicts and findings that name the node, the fabric or the pair
 * that is wrong, with the observed sizes and a fix; the result document stored with the
 * operation. No I/O but the database: the probes go out through controller/remote/net_probe.h,
 * from the network operations (controller/ops/op_net.h) on the operation workers.
 *
 * Sizes are whole IPv4 packets: a 9000-byte probe carries 8972 bytes of payload.
 */
#ifndef HC_CONTROLLER_NET_H
#define HC_CONTROLLER_NET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/constants.h"
#include "common/error.h"
#include "db/db.h"

#define HC_NET_DEFAULT_MTU 9000     /* check-jumbo without --mtu and without a cluster MTU */
#define HC_NET_PROBE_TIMEOUT_MS 500 /* per probe: far above any LAN round trip */
/* Agent calls of a check in flight at once, at most (and at most a quarter of the descriptors,
 * net_probe.c): 1,000 nodes probe all at the same time (docs/net.md "At scale"). */
#define HC_NET_MAX_PARALLEL 1024
#define HC_NET_MAX_NODES 65536 /* a check's pairs are indexed by uint32_t */
/* The result document lists every pair up to this many (65 nodes: the 64-node lab keeps every
 * pair); beyond, only the failing ones, at most HC_NET_MAX_LISTED_PAIRS of them, and each node's
 * counts of passing and failing pairs. */
#define HC_NET_LIST_ALL_PAIRS 4160
#define HC_NET_MAX_LISTED_PAIRS 10000
/* At most this many findings of scope `pair`; the rest are counted in one more finding. */
#define HC_NET_MAX_PAIR_FINDINGS 64

/* A node's host neighbour (ARP) table as its agent read it after probing (docs/net.md
 * "Neighbour tables"): the kernel's table, shared by every namespace of the host. */
struct hc_net_neigh_table {
    int known;
    long entries, thresh1, thresh2, thresh3;
    long fulls; /* new entries the table refused during the probes */
};

/* The neighbour entries a node needs on a cluster of n nodes: one per peer on the storage
 * network, one per peer on the management network, and headroom for gateways and the host's own
 * (docs/net.md "Neighbour tables"). */
long hc_net_neigh_need(size_t n);

/* One node's storage side, as recorded by the poller and refreshed by the check itself. */
struct hc_net_node {
    char name[64];
    char agent_url[320];
    char address[64]; /* management address (nodes.address) */
    char iface[32];   /* storage interface; "" when unknown */
    char addr[64];    /* its first IPv4 address, no prefix; "" when none */
    char state[16];   /* operational state of iface; "" when the interface is missing */
    char kind[16];    /* veth, bridge, bond, ... */
    int mtu;          /* MTU of iface; 0 when unknown */
    char master[32];  /* bridge or bond iface hangs on, "" when none */
    int master_mtu;
    char port[32]; /* smallest-MTU port under iface when iface is a bridge or bond */
    int port_mtu;
    int agent_ok; /* the agent answered the probe request: 1, 0 (no), -1 (not asked) */
    char agent_error[384];
    struct hc_net_neigh_table neigh; /* its host's neighbour table after its probes */
};

enum hc_net_result {
    HC_NET_OK = 0,
    HC_NET_FRAG_NEEDED, /* EMSGSIZE locally, or an ICMP frag-needed naming an MTU */
    HC_NET_BLACKHOLE,   /* the big probe vanished while a small one was answered */
    HC_NET_UNREACHABLE, /* not even small probes were answered */
    HC_NET_NOT_PROBED,  /* the probe could not be asked for (agent down, no address) */
    /* unreachable because a neighbour table was full: the source's (its agent said so) or the
     * target's (it could not answer the ARP request); a host table, not the network */
    HC_NET_NEIGHBOR_UNRESOLVED,
};

/* A failing pair's neighbour entry for its target at the source, as the agent looked it up. */
enum hc_net_neighbor {
    HC_NET_NEIGH_UNKNOWN = 0, /* not looked up (the pair was not unreachable, an older agent) */
    HC_NET_NEIGH_NONE,
    HC_NET_NEIGH_INCOMPLETE,
    HC_NET_NEIGH_FAILED,
    HC_NET_NEIGH_RESOLVED,
};
/* "unknown", "none", "incomplete", "failed", "resolved"; and back (unknown for anything else). */
const char *hc_net_neighbor_name(enum hc_net_neighbor n);
enum hc_net_neighbor hc_net_neighbor_parse(const char *s);

/* One directed pair: `from`'s agent probes `to`'s storage address with a `size`-byte packet.
 * 48 bytes: a check of 1,000 nodes holds 999,000 of them. */
struct hc_net_pair {
    uint32_t from, to; /* indexes into the node array */
    int size;
    enum hc_net_result result;
    int path_mtu;   /* ok: size; frag_needed: the MTU named; else 0 (unknown) */
    int largest_ok; /* failing pairs: the largest size that passed; 0 unknown */
    double rtt_ms;  /* < 0 when unknown */
    /* unreachable pairs: the target's neighbour entry at the source (enum hc_net_neighbor) */
    uint8_t neighbor;
    /* Why it failed, as the agent (or the probe) said; NULL for a pair that passed (rtt_ms says
     * it) or when nothing was said. Interned in the check's pool (hc_net_pair_detail): the
     * same text for many pairs is stored once. */
    const char *detail;
};

struct hc_net_strings; /* a check's interned detail texts (net.c) */

/* A check: its nodes and pairs. Owned by the caller; hc_net_check_clear frees the arrays and the
 * detail texts. */
struct hc_net_check {
    int mtu;
    const char *mtu_source; /* "option", "cluster" or "default" (static strings) */
    struct hc_net_node *nodes;
    size_t nnodes;
    struct hc_net_pair *pairs;
    size_t npairs;
    long probe_timeout_ms;
    int search;           /* binary-search the largest passing size of failing pairs */
    size_t cluster_nodes; /* joined nodes of the cluster (the check may cover fewer) */
    struct hc_net_strings *strings;
};
void hc_net_check_clear(struct hc_net_check *c);

/* Sets p->detail to the formatted text, interned in c (freed by hc_net_check_clear), when p did
 * not pass; a pair whose result is HC_NET_OK (set the result first), and an empty text, get
 * NULL. Out of memory: NULL too (the detail is commentary; the result fields are the verdict). */
void hc_net_pair_detail(struct hc_net_check *c, struct hc_net_pair *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "ok", "frag_needed", "blackhole", "unreachable", "not_probed", "neighbor_unresolved". */
const char *hc_net_result_name(enum hc_net_result r);

/* Loads the joined nodes (all, or those named in `names`, an array of strings) with their
 * storage interfaces from the database into c->nodes, sorted by name. 404 for an unknown name.
 * Returns 0 or -1 with err. */
int hc_net_gather(struct hc_db *db, const json_t *names, struct hc_net_check *c,
                  struct hc_error *err);
/* The cluster's MTU (clusters.mtu), 0 when not set, -1 with err. */
int hc_net_cluster_mtu(struct hc_db *db, struct hc_error *err);

/* Fills a node's storage fields from an interface list (the agent's GET /v1/interfaces array,
 * or interfaces rows with addresses_json). iface is kept when set, else the interface carrying
 * the management address is taken. */
void hc_net_node_apply(struct hc_net_node *n, const json_t *ifaces);

/* Whether a node's neighbour table refused entries during its probes or is at its limit. */
int hc_net_neigh_full(const struct hc_net_neigh_table *t);

/* After the probes: an unreachable pair whose target's address has no resolved neighbour entry
 * at the source, toward a node whose own table is full (it could not answer the ARP request),
 * becomes neighbor_unresolved. Pure. (The source's own full table is judged by its agent.) */
void hc_net_explain_neighbors(struct hc_net_check *c);

/* Every directed pair of c->nodes at c->mtu (allocates c->pairs), from-major: the pairs from
 * node a are a*(n-1) .. a*(n-1)+n-2, by target. More than HC_NET_MAX_NODES nodes: -1 with err. */
int hc_net_all_pairs(struct hc_net_check *c, struct hc_error *err);

/* Where each node's pairs are, by a counting sort of the pair indexes by source and by target
 * (O(pairs + nodes) time, 8 bytes a pair): the pairs from node i are by_from[from_off[i] ..
 * from_off[i + 1]), those toward it by_to[to_off[i] .. to_off[i + 1]), each list in pair order.
 * Lets a node's work read its own pairs rather than all of them (the findings; the probes'
 * bodies and answers could too). */
struct hc_net_index {
    uint32_t *from_off, *to_off, *by_from, *by_to;
};
/* 0, or -1 out of memory (ix left empty). hc_net_index_free frees it (an empty one too). */
int hc_net_index_build(struct hc_net_index *ix, const struct hc_net_check *c);
void hc_net_index_free(struct hc_net_index *ix);

/* Whether a node's configuration can carry c->mtu: 0 ok, 1 warning, 2 error; why and fix
 * receive the text. */
int hc_net_node_verdict(const struct hc_net_node *n, int mtu, char *why, size_t why_len, char *fix,
                        size_t fix_len);

/* The findings of a probed check (new array of {"severity","scope","node"|"from","to"|
 * "nodes_a","nodes_b","message","fix",...}), errors first. Pure: no I/O, so the unit tests drive
 * it directly. O(pairs + nodes^2/64) time and O(pairs) memory (per-node indexes of the pairs,
 * bitsets of failing peers). */
json_t *hc_net_findings(const struct hc_net_check *c);

/* For a check whose pairs all touch `node` (net.set_mtu's re-probe of one node): one sentence on
 * the failing pairs with the observed sizes into msg ("" when none fail), and a fix. */
void hc_net_summary(const struct hc_net_check *c, size_t node, char *msg, size_t len, char *fix,
                    size_t fix_len);

/* The whole result document of docs/net.md ({"mtu","payload_bytes","passed","nodes",
 * "pairs","pairs_listed","findings",...}): every pair up to HC_NET_LIST_ALL_PAIRS, beyond that
 * the failing ones (at most HC_NET_MAX_LISTED_PAIRS). New reference. */
json_t *hc_net_result_json(const struct hc_net_check *c);

/* GET /v1/operations/ID/result?failures_only=1: a result document's "pairs" keep only the pairs
 * that did not pass, "failures_only": true and "pairs_listed": "failures" say so; the summary
 * and the per-node counts still count every pair. Either shape of the document; a document
 * without "pairs" (set-mtu's changes) is left alone. Changes res in place. */
void hc_net_result_failures_only(json_t *res);

#endif
