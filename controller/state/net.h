/*
 * The storage network check behind `hcctl net check-jumbo` (docs/net.md): gather every node's
 * storage interface, its MTU and the MTU of the bridge or bond it hangs on; have every agent
 * probe every other node's storage address with DF probes of the full size, all agents at once
 * through one curl multi handle; build the directed-pair matrix; and turn it into findings that
 * name the node, the fabric or the pair that is wrong, with the observed sizes and a fix.
 *
 * The same pieces serve net.set_mtu (re-probing one node against all others before a change is
 * confirmed) and the check that ends cluster.create and node.add when the cluster has an MTU.
 *
 * Sizes are whole IPv4 packets: a 9000-byte probe carries 8972 bytes of payload.
 */
#ifndef HC_CONTROLLER_NET_H
#define HC_CONTROLLER_NET_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"
#include "common/https_client.h"
#include "db/db.h"

struct hc_op_ctx;

#define HC_NET_DEFAULT_MTU 9000         /* check-jumbo without --mtu and without a cluster MTU */
#define HC_NET_MIN_MTU 68               /* IPv4's minimum */
#define HC_NET_MAX_MTU 65535            /* the largest IPv4 packet */
#define HC_NET_PROBE_TIMEOUT_MS 500     /* per probe: far above any LAN round trip */
#define HC_NET_ECHO_PORT 7445           /* the agents' UDP echo responder */
#define HC_NET_IP_UDP_HEADERS 28        /* IPv4 (20) + UDP or ICMP (8): payload = size - 28 */
#define HC_NET_MAX_PARALLEL 256         /* agent calls in flight at once */

/* One node's storage side, as recorded by the poller and refreshed by the check itself. */
struct hc_net_node {
    char name[64];
    char agent_url[320];
    char address[64];   /* management address (nodes.address) */
    char iface[32];     /* storage interface; "" when unknown */
    char addr[64];      /* its first IPv4 address, no prefix; "" when none */
    char state[16];     /* operational state of iface; "" when the interface is missing */
    char kind[16];      /* veth, bridge, bond, ... */
    int mtu;            /* MTU of iface; 0 when unknown */
    char master[32];    /* bridge or bond iface hangs on, "" when none */
    int master_mtu;
    char port[32];      /* smallest-MTU port under iface when iface is a bridge or bond */
    int port_mtu;
    int agent_ok;       /* the agent answered the probe request: 1, 0 (no), -1 (not asked) */
    char agent_error[384];
};

enum hc_net_result {
    HC_NET_OK = 0,
    HC_NET_FRAG_NEEDED, /* EMSGSIZE locally, or an ICMP frag-needed naming an MTU */
    HC_NET_BLACKHOLE,   /* the big probe vanished while a small one was answered */
    HC_NET_UNREACHABLE, /* not even small probes were answered */
    HC_NET_NOT_PROBED,  /* the probe could not be asked for (agent down, no address) */
};

/* One directed pair: `from`'s agent probes `to`'s storage address with a `size`-byte packet. */
struct hc_net_pair {
    size_t from, to;    /* indexes into the node array */
    int size;
    enum hc_net_result result;
    int path_mtu;       /* ok: size; frag_needed: the MTU named; else 0 (unknown) */
    int largest_ok;     /* failing pairs: the largest size that passed; 0 unknown */
    double rtt_ms;      /* < 0 when unknown */
    char detail[192];
};

/* A check: its nodes and pairs. Owned by the caller; hc_net_check_clear frees the arrays. */
struct hc_net_check {
    int mtu;
    const char *mtu_source; /* "option", "cluster" or "default" (static strings) */
    struct hc_net_node *nodes;
    size_t nnodes;
    struct hc_net_pair *pairs;
    size_t npairs;
    long probe_timeout_ms;
    int search; /* binary-search the largest passing size of failing pairs */
};
void hc_net_check_clear(struct hc_net_check *c);

/* "ok", "frag_needed", "blackhole", "unreachable", "not_probed". */
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

/* Probes c->pairs (from, to and size filled by the caller) through one fan-out: each source's
 * agent gets one POST /v1/net/probe with all its targets. With refresh, GET /v1/interfaces of
 * every node rides in the same fan-out and updates the nodes first. Fills result, path_mtu,
 * largest_ok, rtt_ms, detail and the nodes' agent_ok / agent_error. Never fails: what could not
 * be asked ends as not_probed with the reason. */
void hc_net_probe(struct hc_http_client *client, struct hc_net_check *c, int refresh);

/* Every directed pair of c->nodes at c->mtu (allocates c->pairs). */
int hc_net_all_pairs(struct hc_net_check *c, struct hc_error *err);

/* Whether a node's configuration can carry c->mtu: 0 ok, 1 warning, 2 error; why and fix
 * receive the text. */
int hc_net_node_verdict(const struct hc_net_node *n, int mtu, char *why, size_t why_len,
                        char *fix, size_t fix_len);

/* The findings of a probed check (new array of {"severity","scope","node"|"from","to",
 * "message","fix",...}), errors first. Pure: no I/O, so the unit tests drive it directly. */
json_t *hc_net_findings(const struct hc_net_check *c);

/* For a check whose pairs all touch `node` (net.set_mtu's re-probe of one node): one sentence on
 * the failing pairs with the observed sizes into msg ("" when none fail), and a fix. */
void hc_net_summary(const struct hc_net_check *c, size_t node, char *msg, size_t len, char *fix,
                    size_t fix_len);

/* The whole result document of docs/net.md ({"mtu","payload_bytes","passed","nodes",
 * "pairs","findings",...}). New reference. */
json_t *hc_net_result_json(const struct hc_net_check *c);

/* Options of a full check. */
struct hc_net_check_opts {
    int mtu;               /* 0: the cluster's, else HC_NET_DEFAULT_MTU */
    const json_t *nodes;   /* array of node names, or NULL for every node */
    long probe_timeout_ms; /* 0: HC_NET_PROBE_TIMEOUT_MS */
};
/* Gathers, probes every directed pair and returns the result document (new reference), or NULL
 * with err when the nodes cannot be read. A check that finds problems is not an error: see
 * "passed" in the document. */
json_t *hc_net_check_run(struct hc_db *db, struct hc_http_client *client,
                         const struct hc_net_check_opts *o, struct hc_error *err);

/* Stores a result document in operations.result_json of op_id. 0 or -1 with err. */
int hc_net_store_result(struct hc_db *db, const char *op_id, const json_t *result,
                        struct hc_error *err);

/* The check that ends cluster.create and node.add: when the cluster has an MTU, check every
 * node at it and store the result with the operation. Returns 0 when there is no MTU or the
 * check passed; -1 with err (code mtu_check_failed, the first finding as message, its fix as
 * hint) when it failed or could not run. The nodes stay joined either way. */
int hc_net_check_after_join(struct hc_op_ctx *ctx, struct hc_error *err);

/* A bench pair that moved less than HC_NET_BENCH_MIN_BPS in a whole run, or lost (retransmitted)
 * at least HC_NET_BENCH_MAX_LOSS of its segments (at least HC_NET_BENCH_MIN_LOST of them), is
 * broken, not slow: TCP's handshake and a few segments passed while full-size ones vanished (an
 * MTU blackhole; behind a 1500 switch port the lab measures a few Mbit/s with ~40 % of the
 * segments retransmitted, the healthy direction several Gbit/s with none). */
#define HC_NET_BENCH_MIN_BPS 1e6
#define HC_NET_BENCH_MAX_LOSS 0.10
#define HC_NET_BENCH_MIN_LOST 10

/* Whether a measured bench pair moved (almost) nothing (mtu: the sender's, for the segment
 * count): 1 with the error for the pair in why (retransmits < 0: unknown), else 0, why = "". */
int hc_net_bench_stalled(double bits_per_second, long long retransmits, int mtu, int seconds,
                         char *why, size_t len);

/* Registers the operation kinds "net.check", "net.set_mtu" and "net.bench" (op_net.c). */
void hc_op_net_register(void);

#endif
