/*
 * The network operations (docs/net.md), run on the operation workers: net.check (every pair
 * probed, the result stored with the operation), net.set_mtu (commit-confirmed MTU changes node
 * by node) and net.bench (TCP throughput between pairs), and the jumbo frame check that ends
 * cluster.create and node.add. What they read and record is controller/state/net.h; the probes
 * go out through controller/remote/net_probe.h.
 */
#ifndef HC_CONTROLLER_OP_NET_H
#define HC_CONTROLLER_OP_NET_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"
#include "db/db.h"

struct hc_http_client; /* common/https_client.h */
struct hc_op_ctx;

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

/* The kinds "net.check", "net.set_mtu" and "net.bench" (listed in controller/ops/kinds.c). */
extern const struct hc_op_kind hc_op_kind_net_check;
extern const struct hc_op_kind hc_op_kind_net_set_mtu;
extern const struct hc_op_kind hc_op_kind_net_bench;

#endif
