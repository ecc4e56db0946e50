/*
 * The simulated check of bench/net_sim.h: nodes, pairs and the agent's sentences as the probe
 * parser stores them.
 */
#include "bench/net_sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hc_net_sim_new(struct hc_net_check *c, size_t n, int mtu)
{
    memset(c, 0, sizeof(*c));
    c->mtu = mtu;
    c->mtu_source = "cluster";
    c->probe_timeout_ms = HC_NET_PROBE_TIMEOUT_MS;
    c->search = 1;
    if (!(c->nodes = calloc(n + 1, sizeof(*c->nodes))))
        return -1;
    c->nnodes = n;
    for (size_t i = 0; i < n; i++) {
        struct hc_net_node *d = &c->nodes[i];
        snprintf(d->name, sizeof(d->name), "n%zu", i + 1);
        snprintf(d->address, sizeof(d->address), "10.0.%zu.%zu", i / 250, i % 250 + 1);
        snprintf(d->iface, sizeof(d->iface), "eth1");
        snprintf(d->addr, sizeof(d->addr), "10.1.%zu.%zu", i / 250, i % 250 + 1);
        snprintf(d->state, sizeof(d->state), "up");
        d->agent_ok = 1;
    }
    if (hc_net_all_pairs(c, NULL) < 0)
        return -1;
    hc_net_sim_healthy(c);
    return 0;
}

void hc_net_sim_healthy(struct hc_net_check *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        c->nodes[i].mtu = c->mtu;
    for (size_t k = 0; k < c->npairs; k++)
        hc_net_sim_result(c, &c->pairs[k], HC_NET_OK, 0, 0);
}

struct hc_net_pair *hc_net_sim_pair(struct hc_net_check *c, size_t a, size_t b)
{
    return &c->pairs[a * (c->nnodes - 1) + (b < a ? b : b - 1)];
}

void hc_net_sim_result(struct hc_net_check *c, struct hc_net_pair *p, enum hc_net_result r,
                       int path_mtu, int largest_ok)
{
    p->result = r;
    p->largest_ok = r == HC_NET_OK ? p->size : largest_ok;
    p->path_mtu = r == HC_NET_OK ? p->size : path_mtu ? path_mtu : largest_ok;
    p->rtt_ms = r == HC_NET_OK ? 0.08 + (double)(p->to % 7) / 100 : -1;
    if (r == HC_NET_OK)
        hc_net_pair_detail(c, p, "echo of %d bytes in %.3f ms", p->size, p->rtt_ms);
    else if (r == HC_NET_FRAG_NEEDED && c->nodes[p->from].mtu < p->size)
        hc_net_pair_detail(c, p,
                           "%d bytes do not fit: the kernel's path mtu toward %s is %d "
                           "(EMSGSIZE; the outgoing interface's mtu, or one learnt from ICMP and "
                           "cached)",
                           p->size, c->nodes[p->to].addr, path_mtu);
    else if (r == HC_NET_FRAG_NEEDED)
        hc_net_pair_detail(c, p,
                           "%d bytes do not fit: ICMP fragmentation needed from 10.9.0.1 names "
                           "mtu %d",
                           p->size, path_mtu);
    else if (r == HC_NET_UNREACHABLE)
        hc_net_pair_detail(c, p, "no echo for 576 bytes within %ld ms (3 tries)",
                           c->probe_timeout_ms);
    else
        hc_net_pair_detail(c, p,
                           "no echo for %d bytes within %ld ms (3 tries) while 576 bytes pass: a "
                           "hop with a smaller MTU drops big frames silently",
                           p->size, c->probe_timeout_ms);
}

void hc_net_sim_node(struct hc_net_check *c, size_t i, int dir, enum hc_net_result r, int path_mtu,
                     int largest_ok)
{
    for (size_t o = 0; o < c->nnodes; o++) {
        if (o == i)
            continue;
        if (dir != 2)
            hc_net_sim_result(c, hc_net_sim_pair(c, i, o), r, path_mtu, largest_ok);
        if (dir != 1)
            hc_net_sim_result(c, hc_net_sim_pair(c, o, i), r, path_mtu, largest_ok);
    }
}

void hc_net_sim_segment(struct hc_net_check *c, size_t split, enum hc_net_result r, int path_mtu,
                        int largest_ok)
{
    for (size_t a = 0; a < split; a++)
        for (size_t b = split; b < c->nnodes; b++) {
            hc_net_sim_result(c, hc_net_sim_pair(c, a, b), r, path_mtu, largest_ok);
            hc_net_sim_result(c, hc_net_sim_pair(c, b, a), r, path_mtu, largest_ok);
        }
}
