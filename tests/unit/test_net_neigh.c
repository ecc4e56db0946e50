/* Unit tests of neighbour resolution as its own verdict (docs/net.md "Neighbour tables"): the
 * agent's reading of its host's table and of its peers' entries (agents/hcagent/neigh.c), its
 * neighbor_unresolved verdict (hc_probe_explain_neighbors), and the controller's side: a peer
 * that could not answer ARP (hc_net_explain_neighbors), and the findings that name a full or a
 * too small table instead of the network. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcagent/neigh.h"
#include "agents/hcagent/probe.h"
#include "bench/net_sim.h"
#include "common/json_util.h"
#include "controller/state/net.h"

#define MTU 9000

static void assert_has(const char *text, const char *part)
{
    if (!text || !strstr(text, part))
        fail_msg("'%s' lacks '%s'", text ? text : "(null)", part);
}

/* --- the agent -------------------------------------------------------------------------------- */

static const struct hc_neigh_table roomy = {
    .known = 1, .entries = 40, .thresh1 = 128, .thresh2 = 512, .thresh3 = 1024, .fulls = 7};

/* The table of this machine, read for real: every kernel has arp_cache with thresholds. */
static void test_table_read(void **state)
{
    struct hc_neigh_table t;
    struct hc_error err = {0};
    assert_int_equal(hc_neigh_table_read(&t, &err), 0);
    assert_true(t.known);
    assert_true(t.thresh3 > 0 && t.thresh2 > 0 && t.thresh1 > 0);
    assert_true(t.thresh1 <= t.thresh2 && t.thresh2 <= t.thresh3);
    assert_true(t.entries >= 0);
    /* An address nobody asked for has no entry; 127.0.0.1 never has one (lo needs no ARP). */
    struct in_addr a[2];
    enum hc_neigh_state s[2] = {HC_NEIGH_UNKNOWN, HC_NEIGH_UNKNOWN};
    inet_pton(AF_INET, "192.0.2.77", &a[0]);
    inet_pton(AF_INET, "127.0.0.1", &a[1]);
    assert_int_equal(hc_neigh_lookup(a, 2, s, &err), 0);
    assert_int_equal(s[0], HC_NEIGH_NONE);
    assert_int_equal(s[1], HC_NEIGH_NONE);
}

static void test_table_full(void **state)
{
    struct hc_neigh_table after = roomy, unknown = {0};
    assert_false(hc_neigh_table_full(&roomy, &after));
    after.fulls = 9; /* two new entries refused during the probe */
    assert_true(hc_neigh_table_full(&roomy, &after));
    after = roomy;
    after.entries = 1024; /* at the hard limit, nothing refused yet */
    assert_true(hc_neigh_table_full(&roomy, &after));
    /* refusals before the probe are not this probe's */
    assert_false(hc_neigh_table_full(&unknown, &roomy));
    assert_false(hc_neigh_table_full(&roomy, &unknown));
}

static void target(struct hc_probe_target *t, const char *addr, enum hc_probe_verdict v)
{
    memset(t, 0, sizeof(*t));
    inet_pton(AF_INET, addr, &t->addr);
    t->size = MTU;
    t->result = v;
    t->rtt_ms = -1;
    snprintf(t->detail, sizeof(t->detail), "no echo for 576 bytes within 500 ms (3 tries)");
}

/* A full table: peers without a resolved entry are neighbor_unresolved, with the table's size and
 * thresholds in the detail; a resolved peer, a passing one and a blackhole stay as they are. */
static void test_explain_full(void **state)
{
    struct hc_probe_target t[5];
    target(&t[0], "10.0.1.2", HC_PROBE_UNREACHABLE);
    target(&t[1], "10.0.1.3", HC_PROBE_UNREACHABLE);
    target(&t[2], "10.0.1.4", HC_PROBE_UNREACHABLE);
    target(&t[3], "10.0.1.5", HC_PROBE_OK);
    target(&t[4], "10.0.1.6", HC_PROBE_BLACKHOLE);
    enum hc_neigh_state s[5] = {HC_NEIGH_NONE, HC_NEIGH_INCOMPLETE, HC_NEIGH_RESOLVED,
                                HC_NEIGH_NONE, HC_NEIGH_NONE};
    struct hc_neigh_table after = roomy;
    after.entries = 1024;
    after.fulls = 57;
    hc_probe_explain_neighbors(t, 5, s, &roomy, &after);
    assert_int_equal(t[0].result, HC_PROBE_NEIGHBOR_UNRESOLVED);
    assert_int_equal(t[1].result, HC_PROBE_NEIGHBOR_UNRESOLVED);
    assert_has(t[0].detail, "10.0.1.2 (none)");
    assert_has(t[0].detail, "1024 entries, gc_thresh3 1024, 50 new entries refused");
    assert_has(t[1].detail, "(incomplete)");
    assert_int_equal(t[2].result, HC_PROBE_UNREACHABLE); /* resolved: the table is not why */
    assert_int_equal(t[2].neighbor, HC_NEIGH_RESOLVED);
    assert_int_equal(t[3].result, HC_PROBE_OK);
    assert_int_equal(t[3].neighbor, HC_NEIGH_UNKNOWN);
    assert_int_equal(t[4].result, HC_PROBE_BLACKHOLE);
    assert_string_equal(hc_probe_verdict_name(HC_PROBE_NEIGHBOR_UNRESOLVED), "neighbor_unresolved");

    json_t *doc = hc_probe_results_json(t, 5, &roomy, &after, 0);
    const json_t *r0 = json_array_get(json_object_get(doc, "results"), 0);
    const json_t *r3 = json_array_get(json_object_get(doc, "results"), 3);
    assert_string_equal(hc_json_str(r0, "result", ""), "neighbor_unresolved");
    assert_string_equal(hc_json_str(r0, "neighbor", ""), "none");
    assert_null(json_object_get(r3, "neighbor"));
    const json_t *nb = json_object_get(doc, "neighbors");
    assert_int_equal(hc_json_int(nb, "entries", 0), 1024);
    assert_int_equal(hc_json_int(nb, "gc_thresh3", 0), 1024);
    assert_int_equal(hc_json_int(nb, "table_fulls", 0), 50);
    json_decref(doc);
    /* An unknown table is null, not zeros. */
    doc = hc_probe_results_json(t, 1, NULL, NULL, 0);
    assert_true(json_is_null(json_object_get(doc, "neighbors")));
    json_decref(doc);
}

/* A roomy table: a failed ARP stays unreachable (the peer is not there at L2) and says so. */
static void test_explain_roomy(void **state)
{
    struct hc_probe_target t[2];
    target(&t[0], "10.0.1.2", HC_PROBE_UNREACHABLE);
    target(&t[1], "10.0.1.3", HC_PROBE_UNREACHABLE);
    enum hc_neigh_state s[2] = {HC_NEIGH_FAILED, HC_NEIGH_NONE};
    hc_probe_explain_neighbors(t, 2, s, &roomy, &roomy);
    assert_int_equal(t[0].result, HC_PROBE_UNREACHABLE);
    assert_has(t[0].detail, "the ARP request for 10.0.1.2 got no answer (failed)");
    assert_int_equal(t[1].result, HC_PROBE_UNREACHABLE);
    assert_string_equal(t[1].detail, "no echo for 576 bytes within 500 ms (3 tries)");
}

/* --- the controller -------------------------------------------------------------------------- */

static const struct hc_net_neigh_table host_ok = {
    .known = 1, .entries = 20, .thresh1 = 128, .thresh2 = 512, .thresh3 = 1024};

/* n healthy nodes (bench/net_sim.c) whose hosts' tables are roomy, the whole cluster. */
static void make_check(struct hc_net_check *c, size_t n)
{
    assert_int_equal(hc_net_sim_new(c, n, MTU), 0);
    c->cluster_nodes = n;
    for (size_t i = 0; i < n; i++)
        c->nodes[i].neigh = host_ok;
}

static struct hc_net_pair *pair(struct hc_net_check *c, size_t from, size_t to)
{
    for (size_t k = 0; k < c->npairs; k++)
        if (c->pairs[k].from == from && c->pairs[k].to == to)
            return &c->pairs[k];
    fail_msg("no pair %zu->%zu", from, to);
    return NULL;
}

static void unresolved(struct hc_net_check *c, struct hc_net_pair *p, enum hc_net_result r,
                       const char *neighbor)
{
    p->result = r;
    p->path_mtu = p->largest_ok = 0;
    p->rtt_ms = -1;
    p->neighbor = (uint8_t)hc_net_neighbor_parse(neighbor);
    hc_net_pair_detail(c, p, "no echo for 576 bytes");
}

static const json_t *only_error(const json_t *findings)
{
    size_t i, errors = 0;
    const json_t *f, *e = NULL;
    json_array_foreach(findings, i, f)
    {
        if (strcmp(hc_json_str(f, "severity", ""), "error") == 0)
            errors++, e = f;
    }
    assert_int_equal(errors, 1);
    return e;
}

/* n3's table is full: its own agent says neighbor_unresolved toward two peers, and the pairs
 * toward it came back unreachable with a failed ARP (it could not answer). One finding names n3
 * and the sysctl; no switch port, fabric or pair is blamed. */
static void test_full_table_named(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    c.nodes[2].neigh.entries = 1024;
    c.nodes[2].neigh.fulls = 31;
    unresolved(&c, pair(&c, 2, 0), HC_NET_NEIGHBOR_UNRESOLVED, "none");
    unresolved(&c, pair(&c, 2, 3), HC_NET_NEIGHBOR_UNRESOLVED, "incomplete");
    unresolved(&c, pair(&c, 0, 2), HC_NET_UNREACHABLE, "failed");
    unresolved(&c, pair(&c, 1, 2), HC_NET_UNREACHABLE, "incomplete");
    /* a resolved neighbour that still does not answer is not the table's doing */
    unresolved(&c, pair(&c, 3, 2), HC_NET_UNREACHABLE, "resolved");
    hc_net_explain_neighbors(&c);
    assert_int_equal(pair(&c, 0, 2)->result, HC_NET_NEIGHBOR_UNRESOLVED);
    assert_has(pair(&c, 0, 2)->detail, "no neighbour (ARP) answer from n3 (failed)");
    assert_has(pair(&c, 0, 2)->detail, "1024 entries, gc_thresh3 1024, 31 new entries refused");
    assert_int_equal(pair(&c, 1, 2)->result, HC_NET_NEIGHBOR_UNRESOLVED);
    assert_int_equal(pair(&c, 3, 2)->result, HC_NET_UNREACHABLE);
    unresolved(&c, pair(&c, 3, 2), HC_NET_OK, "");
    pair(&c, 3, 2)->path_mtu = MTU;

    json_t *doc = hc_net_result_json(&c);
    assert_false(json_is_true(json_object_get(doc, "passed")));
    const json_t *findings = json_object_get(doc, "findings");
    assert_int_equal(json_array_size(findings), 1);
    const json_t *f = only_error(findings);
    assert_string_equal(hc_json_str(f, "scope", ""), "node");
    assert_string_equal(hc_json_str(f, "node", ""), "n3");
    assert_has(hc_json_str(f, "message", ""), "neighbour (ARP) table of n3 is full");
    assert_has(hc_json_str(f, "message", ""), "4 of 6 pairs could not resolve");
    assert_has(hc_json_str(f, "message", ""), "not the network");
    assert_has(hc_json_str(f, "fix", ""), "net.ipv4.neigh.default.gc_thresh3=");
    const json_t *p = json_array_get(json_object_get(doc, "pairs"), 0);
    (void)p;
    size_t i, unres = 0;
    json_array_foreach(json_object_get(doc, "pairs"), i, p)
    {
        unres += strcmp(hc_json_str(p, "result", ""), "neighbor_unresolved") == 0;
    }
    assert_int_equal(unres, 4);
    json_decref(doc);
    hc_net_check_clear(&c);
}

/* A shared table (a namespace lab: one kernel) full for every node: one finding over all of
 * them, scope nodes, not one per node and not the fabric. */
static void test_full_tables_grouped(void **state)
{
    struct hc_net_check c;
    make_check(&c, 12);
    for (size_t i = 0; i < c.nnodes; i++)
        c.nodes[i].neigh.entries = 1024, c.nodes[i].neigh.fulls = 600;
    for (size_t k = 0; k < c.npairs; k += 3)
        unresolved(&c, &c.pairs[k], HC_NET_NEIGHBOR_UNRESOLVED, "none");
    json_t *findings = hc_net_findings(&c);
    assert_int_equal(json_array_size(findings), 1);
    const json_t *f = only_error(findings);
    assert_string_equal(hc_json_str(f, "scope", ""), "nodes");
    assert_int_equal(json_array_size(json_object_get(f, "nodes")), 12);
    assert_has(hc_json_str(f, "message", ""), "n1, n2, n3, n4, n5, n6, n7, n8 and 4 more");
    assert_has(hc_json_str(f, "message", ""), "are full");
    json_decref(findings);
    hc_net_check_clear(&c);
}

/* Sizing: the default thresholds are plenty for 5 nodes and too small for 1,000 (the check
 * covers 5 of them): a warning naming what to set, and the check still passes. */
static void test_thresholds_sized(void **state)
{
    struct hc_net_check c;
    make_check(&c, 5);
    json_t *doc = hc_net_result_json(&c);
    assert_true(json_is_true(json_object_get(doc, "passed")));
    assert_int_equal(json_array_size(json_object_get(doc, "findings")), 0);
    json_decref(doc);

    assert_int_equal(hc_net_neigh_need(1000), 2062);
    c.cluster_nodes = 1000;
    doc = hc_net_result_json(&c);
    assert_true(json_is_true(json_object_get(doc, "passed")));
    const json_t *findings = json_object_get(doc, "findings");
    assert_int_equal(json_array_size(findings), 1);
    const json_t *f = json_array_get(findings, 0);
    assert_string_equal(hc_json_str(f, "severity", ""), "warning");
    assert_string_equal(hc_json_str(f, "scope", ""), "nodes");
    assert_has(hc_json_str(f, "message", ""), "keeps 512 entries before it collects them");
    assert_has(hc_json_str(f, "message", ""), "a 1000-node cluster needs about 2062 per host");
    assert_has(hc_json_str(f, "fix", ""), "gc_thresh1=2176 net.ipv4.neigh.default.gc_thresh2=8704 "
                                          "net.ipv4.neigh.default.gc_thresh3=17408");
    json_decref(doc);

    /* An agent that reports no table (an older one) is not judged. */
    for (size_t i = 0; i < c.nnodes; i++)
        c.nodes[i].neigh.known = 0;
    json_t *none = hc_net_findings(&c);
    assert_int_equal(json_array_size(none), 0);
    json_decref(none);
    hc_net_check_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_read),       cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_explain_full),     cmocka_unit_test(test_explain_roomy),
        cmocka_unit_test(test_full_table_named), cmocka_unit_test(test_full_tables_grouped),
        cmocka_unit_test(test_thresholds_sized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
