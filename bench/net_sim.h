/*
 * A simulated storage network check (issue 14): N nodes n1..nN on eth1 with every directed pair
 * made by hc_net_all_pairs and filled as the probe parser (controller/remote/net_probe.c) fills
 * it from an agent's answer, with faults injected pair by pair, node by node or between two
 * halves. No I/O: what bench/net_aggregate.c times and tests/unit/test_net_scale.c checks.
 */
#ifndef HC_BENCH_NET_SIM_H
#define HC_BENCH_NET_SIM_H

#include <stddef.h>

#include "controller/state/net.h"

/* n healthy nodes at mtu (nodes and pairs allocated; hc_net_check_clear frees them). 0 or -1
 * out of memory. */
int hc_net_sim_new(struct hc_net_check *c, size_t n, int mtu);

/* Every node back at the check's MTU, every pair ok. */
void hc_net_sim_healthy(struct hc_net_check *c);

/* Pair a -> b (a != b), where hc_net_all_pairs put it. */
struct hc_net_pair *hc_net_sim_pair(struct hc_net_check *c, size_t a, size_t b);

/* What the parser makes of an agent's result r for p (path_mtu, largest_ok as the agent said;
 * detail the agent's sentence for it). */
void hc_net_sim_result(struct hc_net_check *c, struct hc_net_pair *p, enum hc_net_result r,
                       int path_mtu, int largest_ok);

/* Every pair touching node i (dir: 0 both ways, 1 from i, 2 toward i) gets r. */
void hc_net_sim_node(struct hc_net_check *c, size_t i, int dir, enum hc_net_result r, int path_mtu,
                     int largest_ok);

/* Every pair between nodes [0, split) and [split, n), both ways, gets r: a bad link between
 * two switches. */
void hc_net_sim_segment(struct hc_net_check *c, size_t split, enum hc_net_result r, int path_mtu,
                        int largest_ok);

#endif
