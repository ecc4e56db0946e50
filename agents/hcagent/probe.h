/*
 * DF probes between nodes (docs/api.md "Agent API: network", docs/net.md "Probe packets"): a UDP
 * echo responder that every agent runs on port 7445, and the prober behind POST /v1/net/probe.
 *
 * A probe datagram is "HCP1" + a 4-byte sequence number (network order) + padding, sent with
 * DF (IP_PMTUDISC_DO) so that its IPv4 packet is exactly the requested size (payload = size -
 * 28). The responder sends it back, with DF too, from the address that was probed
 * (IP_PKTINFO): the reply tests the reverse path at full size, and a prober whose socket is
 * connected to the target only accepts a reply from that address. Everything is unprivileged
 * (plain UDP sockets, no raw sockets).
 *
 * Version 2 (this one) marks what it sends, so that a responder never answers a reply: a probe
 * of 12 bytes or more carries "HCV2" at offset 8, and the responder answers it with the magic
 * "HCR1" (a reply), which no responder answers. Probes without the mark (version 1 agents, the
 * controller's poller, probes shorter than 12 bytes) are still echoed byte for byte, as before,
 * because their senders only accept "HCP1"; what keeps those from bouncing between two
 * responders is that a responder never answers a datagram from a responder's port (7445, or its
 * own) or from a privileged port. Every source address is also rate-limited (token bucket).
 */
#ifndef HC_AGENTS_PROBE_H
#define HC_AGENTS_PROBE_H

#include <event2/event.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "agents/hcagent/neigh.h"
#include "common/constants.h"
#include "common/error.h"
#include "common/stop.h"

#define HC_PROBE_MAGIC "HCP1"       /* a probe (any version) */
#define HC_PROBE_REPLY_MAGIC "HCR1" /* a version 2 reply: never answered */
#define HC_PROBE_V2_MARK "HCV2"     /* at offset 8 of a version 2 packet */
#define HC_PROBE_V2_HEADER 12       /* magic + sequence number + mark */
#define HC_PROBE_MIN_SIZE 36        /* header + magic + sequence number */
#define HC_PROBE_MAX_SIZE 65535
#define HC_PROBE_SMALL_SIZE 576 /* every IPv4 path carries it: tells loss of big frames apart */
#define HC_PROBE_DEFAULT_TIMEOUT_MS 1000
#define HC_PROBE_DEFAULT_ATTEMPTS 3
#define HC_PROBE_MAX_TARGETS 1024

/* ---------------------------------------------------------------- packets */

enum hc_probe_packet_type {
    HC_PROBE_PKT_PROBE_V1 = 1, /* "HCP1" without the mark: echoed byte for byte */
    HC_PROBE_PKT_PROBE_V2,     /* "HCP1" + seq + "HCV2": answered with "HCR1" */
    HC_PROBE_PKT_REPLY,        /* "HCR1" + seq + "HCV2": never answered */
};

struct hc_probe_packet {
    enum hc_probe_packet_type type;
    int version;   /* 1 or 2 */
    uint32_t seq;  /* host order */
    size_t length; /* the whole payload, padding included */
};

/* Parses one datagram's payload (what recv returns, without IP and UDP headers). Pure: no I/O,
 * no allocation; reads only buf[0..len). Returns 0 with *out filled, or -1 for anything that is
 * not a probe or a reply: shorter than 8 bytes, longer than a UDP payload can be, an unknown
 * magic, or a reply without the version 2 mark. */
int hc_probe_packet_parse(const uint8_t *buf, size_t len, struct hc_probe_packet *out);

/* ---------------------------------------------------------------- responder */

/* Rate limit per source address (token bucket): HC_PROBE_RATE_BURST probes at once, refilled at
 * HC_PROBE_RATE_PER_S. A blackhole search of one target sends at most ~300 probes (3 attempts
 * of up to 16 sizes in up to 6 rounds), 8 aliases of a node probed at once ~2400: the limit is
 * far above what check-jumbo needs (docs/net.md has the measured figures). Sources are kept in a
 * table of HC_PROBE_RATE_SOURCES entries; the least recently seen one is evicted, so spoofed
 * sources cannot grow memory. All sources together are capped at HC_PROBE_RATE_GLOBAL_PER_S
 * (burst HC_PROBE_RATE_GLOBAL_BURST): evicted or spoofed sources cannot make a node reflect
 * more than that. */
#define HC_PROBE_RATE_BURST 4096
#define HC_PROBE_RATE_PER_S 2048
#define HC_PROBE_RATE_GLOBAL_BURST 16384
#define HC_PROBE_RATE_GLOBAL_PER_S 16384
#define HC_PROBE_RATE_SOURCES 1024

struct hc_probe_responder;
/* Binds addr:port (addr NULL: all addresses; port 0: HC_PORT_PROBE, -1: any free port, for
 * tests) and answers probes from the event loop of base. NULL with err (e.g. the port is in
 * use). Free with hc_probe_responder_free, before base. */
struct hc_probe_responder *hc_probe_responder_new(struct event_base *base, const char *addr,
                                                  int port, struct hc_error *err);
void hc_probe_responder_free(struct hc_probe_responder *r);
int hc_probe_responder_port(const struct hc_probe_responder *r);
/* Echoes sent; datagrams ignored (not a probe, a reply, from a responder's or a privileged
 * port, or sent to a broadcast address); probes dropped by the rate limit; so far. */
uint64_t hc_probe_responder_echoes(const struct hc_probe_responder *r);
uint64_t hc_probe_responder_ignored(const struct hc_probe_responder *r);
uint64_t hc_probe_responder_limited(const struct hc_probe_responder *r);

/* ---------------------------------------------------------------- prober */

enum hc_probe_verdict {
    HC_PROBE_OK = 0,      /* the full-size probe was echoed */
    HC_PROBE_FRAG_NEEDED, /* too big: EMSGSIZE locally, or ICMP "fragmentation needed" */
    HC_PROBE_BLACKHOLE,   /* the full-size probe vanished while a small one was echoed */
    HC_PROBE_UNREACHABLE, /* even the small probe failed, or ICMP unreachable / refused */
    /* unreachable, and the peer's address has no neighbour entry while this node's neighbour
     * table is full (hc_probe_explain_neighbors): the host's table, not the network */
    HC_PROBE_NEIGHBOR_UNRESOLVED,
};

/* Name used in the API ("ok", "frag_needed", "blackhole", "unreachable",
 * "neighbor_unresolved"). */
const char *hc_probe_verdict_name(enum hc_probe_verdict v);

struct hc_probe_target {
    /* input */
    struct in_addr addr;
    int size; /* whole IPv4 packet, HC_PROBE_MIN_SIZE..HC_PROBE_MAX_SIZE */
    /* output */
    enum hc_probe_verdict result;
    int path_mtu;                 /* from ICMP or the local route (frag_needed); 0 = unknown */
    int largest_ok;               /* size for ok; the searched largest echoed size; 0 = none */
    double rtt_ms;                /* round trip of the full-size probe (ok); < 0 = none */
    int sent;                     /* probe datagrams tried (what its responder sees, at most) */
    enum hc_neigh_state neighbor; /* unreachable targets: their neighbour entry; else unknown */
    char detail[256];
};

struct hc_probe_options {
    struct in_addr source; /* INADDR_ANY: the route's source address */
    int port;              /* 0: HC_PORT_PROBE */
    /* How long one probe size waits for its echo; it is sent `attempts` times, evenly spread
     * over that time. A request takes about timeout_ms when all targets pass or fail at once,
     * plus timeout_ms per search round (3 to 5) for a blackhole. */
    int timeout_ms;
    int attempts;   /* 0: HC_PROBE_DEFAULT_ATTEMPTS */
    int search;     /* binary (k-ary) search of the largest echoed size for failing targets */
    int small_size; /* 0: HC_PROBE_SMALL_SIZE */
    /* Requested by another thread to stop early (agent shutdown); may be NULL. Targets not
     * finished then are reported unreachable with the detail "probe cancelled". */
    const struct hc_stop *cancel;
};

/* Probes all targets concurrently from the calling thread (non-blocking sockets and poll) and
 * fills their outputs. Blocks for the duration of the probe: run it off an event loop. -1 with
 * err only when the probe cannot run at all (invalid source address, out of sockets); a target
 * that fails is a result, not an error. */
int hc_probe_run(const struct hc_probe_options *opt, struct hc_probe_target *targets, size_t n,
                 struct hc_error *err);

/* After hc_probe_run: the unreachable targets, given their neighbour entries (states[i] for
 * targets[i], from hc_neigh_lookup) and the table read before and after the probe. When the
 * table was full (hc_neigh_table_full), a target without a resolved entry becomes
 * neighbor_unresolved; otherwise a failed or incomplete entry is told in its detail (no ARP
 * answer at all). Pure: the unit tests drive it. */
void hc_probe_explain_neighbors(struct hc_probe_target *targets, size_t n,
                                const enum hc_neigh_state *states,
                                const struct hc_neigh_table *before,
                                const struct hc_neigh_table *after);

/* The neighbour table around a probe: read before it starts and after it ends. */
struct hc_probe_neighbors {
    struct hc_neigh_table before, after;
};

/* hc_probe_run, then its unreachable targets explained by their neighbour entries and the table
 * (hc_probe_explain_neighbors). A table or entries that cannot be read leave the targets as the
 * probe found them (logged once). nb receives the table reads. */
int hc_probe_run_explained(const struct hc_probe_options *opt, struct hc_probe_target *targets,
                           size_t n, struct hc_probe_neighbors *nb, struct hc_error *err);

/* {"results":[{"address","size","result","path_mtu","largest_ok","rtt_ms","neighbor","detail"}
 * ...], "neighbors": {...} | null} as in the API (null for path_mtu, largest_ok and rtt_ms when
 * unknown; neighbor only for targets that were looked up). neighbors is the table after the
 * probe with the entries it refused during it ("table_fulls"); before/after may be NULL or
 * unknown. compact: "results" holds only the targets that did not pass, each with its "index"
 * among the targets, and "passed" the indexes of those that did (a large check's answer: 5 KB
 * instead of 200 KB for 1,000 passing targets). New reference. */
json_t *hc_probe_results_json(const struct hc_probe_target *targets, size_t n,
                              const struct hc_neigh_table *before,
                              const struct hc_neigh_table *after, int compact);

#endif
