/* Unit tests of the pure parts of the probes' client (controller/remote/net_probe.h):
 * - the sample a large check searches (hc_net_pick_searches): whatever the fault, no node runs or
 *   answers more than HC_NET_SEARCH_PER_NODE searches, every node with failing pairs is covered
 *   when it can be, and only blackholes are searched (frag_needed has its MTU from ICMP,
 *   unreachable has nothing to search);
 * - an agent's answer, full or compact, into the pairs (hc_net_probe_answer), the agent's own
 *   compact answer (agents/hcagent/probe.c) included, and answers no agent should send. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "agents/hcagent/probe.h"
#include "bench/net_sim.h"
#include "common/json_util.h"
#include "controller/remote/net_probe.h"
#include "controller/state/net.h"

#define NODES 200

/* n healthy nodes (bench/net_sim.c). */
static void make_check(struct hc_net_check *c, size_t n)
{
    assert_int_equal(hc_net_sim_new(c, n, 9000), 0);
}

struct counts {
    size_t from[NODES], to[NODES], total;
};

static struct counts pick(const struct hc_net_check *c, unsigned char *sel)
{
    struct counts n = {0};
    n.total = hc_net_pick_searches(c, HC_NET_SEARCH_PER_NODE, sel);
    size_t seen = 0;
    for (size_t k = 0; k < c->npairs; k++) {
        if (!sel[k])
            continue;
        assert_int_equal(c->pairs[k].result, HC_NET_BLACKHOLE);
        n.from[c->pairs[k].from]++, n.to[c->pairs[k].to]++;
        seen++;
    }
    assert_int_equal(seen, n.total);
    for (size_t i = 0; i < c->nnodes; i++) {
        assert_true(n.from[i] <= HC_NET_SEARCH_PER_NODE);
        assert_true(n.to[i] <= HC_NET_SEARCH_PER_NODE);
    }
    return n;
}

/* A bad switch port toward n7: 398 blackholes, 4 searched (2 from it, 2 toward it). */
static void test_bad_port(void **state)
{
    struct hc_net_check c;
    make_check(&c, NODES);
    for (size_t k = 0; k < c.npairs; k++)
        if (c.pairs[k].from == 6 || c.pairs[k].to == 6)
            c.pairs[k].result = HC_NET_BLACKHOLE;
    unsigned char *sel = calloc(c.npairs, 1);
    struct counts n = pick(&c, sel);
    assert_int_equal(n.total, 4);
    assert_int_equal(n.from[6], 2);
    assert_int_equal(n.to[6], 2);
    free(sel);
    hc_net_check_clear(&c);
}

/* A bad link between two switches (nodes 0-99 and 100-199): 20,000 blackholes; every node
 * searches and answers at least one and at most two, ~400 in all. */
static void test_segment(void **state)
{
    struct hc_net_check c;
    make_check(&c, NODES);
    for (size_t k = 0; k < c.npairs; k++)
        if ((c.pairs[k].from < 100) != (c.pairs[k].to < 100))
            c.pairs[k].result = HC_NET_BLACKHOLE;
    unsigned char *sel = calloc(c.npairs, 1);
    struct counts n = pick(&c, sel);
    for (size_t i = 0; i < NODES; i++) {
        assert_true(n.from[i] >= 1);
        assert_true(n.to[i] >= 1);
    }
    assert_true(n.total <= 2 * HC_NET_SEARCH_PER_NODE * NODES / 2 + 1);
    free(sel);
    hc_net_check_clear(&c);
}

/* A fabric passing no jumbo frame: 39,800 blackholes, at most 2 per node searched. Frag-needed
 * and unreachable pairs are never picked. */
static void test_fabric_and_others(void **state)
{
    struct hc_net_check c;
    make_check(&c, NODES);
    for (size_t k = 0; k < c.npairs; k++)
        c.pairs[k].result = k % 5 == 0   ? HC_NET_FRAG_NEEDED
                            : k % 7 == 0 ? HC_NET_UNREACHABLE
                                         : HC_NET_BLACKHOLE;
    unsigned char *sel = calloc(c.npairs, 1);
    struct counts n = pick(&c, sel);
    assert_true(n.total >= NODES && n.total <= HC_NET_SEARCH_PER_NODE * NODES);
    free(sel);
    /* nothing failing: nothing searched */
    for (size_t k = 0; k < c.npairs; k++)
        c.pairs[k].result = HC_NET_OK;
    sel = calloc(c.npairs, 1);
    assert_int_equal(hc_net_pick_searches(&c, HC_NET_SEARCH_PER_NODE, sel), 0);
    free(sel);
    hc_net_check_clear(&c);
}

/* --- answers --------------------------------------------------------------------------------- */

/* Node 0's request toward nodes 1..4 of a 5-node check (addresses 10.1.0.J), as probe_body
 * makes it, and the pair indexes of its targets. */
static json_t *request(struct hc_net_check *c, uint32_t *pairs)
{
    make_check(c, 5);
    json_t *targets = json_array();
    for (size_t j = 0; j < 5; j++)
        snprintf(c->nodes[j].addr, sizeof(c->nodes[j].addr), "10.1.0.%zu", j);
    for (size_t j = 0; j < 4; j++) {
        pairs[j] = (uint32_t)j; /* from-major: node 0's pairs come first, by target */
        assert_int_equal(c->pairs[j].to, j + 1);
        c->pairs[j].result = HC_NET_NOT_PROBED;
        json_array_append_new(
            targets, json_pack("{s:s, s:i}", "address", c->nodes[j + 1].addr, "size", 9000));
    }
    return targets;
}

/* The agent's own compact answer (targets 1 and 3 pass, 2 is a blackhole, 4 unreachable), back
 * through the controller's parser: the same pairs as the full answer gives. */
static void test_compact_round_trip(void **state)
{
    struct hc_probe_target t[4] = {0};
    for (int j = 0; j < 4; j++) {
        inet_pton(AF_INET,
                  j == 0   ? "10.1.0.1"
                  : j == 1 ? "10.1.0.2"
                  : j == 2 ? "10.1.0.3"
                           : "10.1.0.4",
                  &t[j].addr);
        t[j].size = 9000;
        t[j].rtt_ms = -1;
    }
    t[0].result = t[2].result = HC_PROBE_OK;
    t[1].result = HC_PROBE_BLACKHOLE;
    t[1].largest_ok = 1504;
    snprintf(t[1].detail, sizeof(t[1].detail), "no echo for 9000 bytes");
    t[3].result = HC_PROBE_UNREACHABLE;
    for (int compact = 0; compact < 2; compact++) {
        struct hc_net_check c;
        uint32_t pairs[4];
        json_t *targets = request(&c, pairs);
        json_t *answer = hc_probe_results_json(t, 4, NULL, NULL, compact);
        if (compact) {
            assert_int_equal(json_array_size(json_object_get(answer, "passed")), 2);
            assert_int_equal(json_array_size(json_object_get(answer, "results")), 2);
            assert_int_equal(
                hc_json_int(json_array_get(json_object_get(answer, "results"), 0), "index", -1), 1);
        } else {
            assert_null(json_object_get(answer, "passed"));
        }
        hc_net_probe_answer(&c, 0, pairs, 4, targets, answer);
        assert_int_equal(c.nodes[0].agent_ok, 1);
        assert_int_equal(c.pairs[0].result, HC_NET_OK);
        assert_int_equal(c.pairs[0].path_mtu, 9000);
        assert_null(c.pairs[0].detail);
        assert_int_equal(c.pairs[1].result, HC_NET_BLACKHOLE);
        assert_int_equal(c.pairs[1].largest_ok, 1504);
        assert_string_equal(c.pairs[1].detail, "no echo for 9000 bytes");
        assert_int_equal(c.pairs[2].result, HC_NET_OK);
        assert_int_equal(c.pairs[3].result, HC_NET_UNREACHABLE);
        json_decref(answer);
        json_decref(targets);
        hc_net_check_clear(&c);
    }
}

/* Compact answers no agent should send: indexes out of range, negative, repeated, not numbers; a
 * result whose address is not its index's target. Nothing is read out of bounds, nothing passes
 * that was not said to, and what is left is not_probed "no result". */
static void test_compact_hostile(void **state)
{
    struct hc_net_check c;
    uint32_t pairs[4];
    json_t *targets = request(&c, pairs);
    json_t *answer =
        json_loads("{\"passed\": [0, 0, -1, 4, 99999999999, \"1\", null],"
                   " \"results\": [{\"index\": 1, \"address\": \"10.1.0.9\", \"size\": 9000,"
                   "                 \"result\": \"blackhole\"},"
                   "                {\"index\": 7, \"address\": \"10.1.0.3\", \"size\": 9000,"
                   "                 \"result\": \"ok\"},"
                   "                {\"index\": 2, \"address\": \"10.1.0.3\", \"size\": 9000,"
                   "                 \"result\": \"frag_needed\", \"path_mtu\": 1500}],"
                   " \"neighbors\": {\"gc_thresh3\": \"big\"}}",
                   0, NULL);
    assert_non_null(answer);
    hc_net_probe_answer(&c, 0, pairs, 4, targets, answer);
    assert_int_equal(c.pairs[0].result, HC_NET_OK);
    assert_int_equal(c.pairs[1].result, HC_NET_NOT_PROBED); /* its result names another address */
    assert_string_equal(c.pairs[1].detail, "the agent returned no result for 10.1.0.2");
    assert_int_equal(c.pairs[2].result, HC_NET_FRAG_NEEDED);
    assert_int_equal(c.pairs[2].path_mtu, 1500);
    assert_int_equal(c.pairs[3].result, HC_NET_NOT_PROBED);
    assert_false(c.nodes[0].neigh.known);
    json_decref(answer);
    /* no results at all: the agent is at fault, every pair not probed with the reason */
    answer = json_loads("{\"passed\": [0, 1, 2, 3]}", 0, NULL);
    hc_net_probe_answer(&c, 0, pairs, 4, targets, answer);
    assert_int_equal(c.nodes[0].agent_ok, 0);
    assert_int_equal(c.pairs[0].result, HC_NET_NOT_PROBED);
    assert_string_equal(c.pairs[0].detail, "the agent on n1 answered without results");
    json_decref(answer);
    json_decref(targets);
    hc_net_check_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_port),          cmocka_unit_test(test_segment),
        cmocka_unit_test(test_fabric_and_others), cmocka_unit_test(test_compact_round_trip),
        cmocka_unit_test(test_compact_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
