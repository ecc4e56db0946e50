/* Unit tests of check-jumbo at 1,000 nodes (issue 14): a simulated check of 999,000 directed
 * pairs (bench/net_sim.c) built in memory through the functions the operation uses
 * (hc_net_all_pairs, the pairs filled as the probe parser fills them, hc_net_findings,
 * hc_net_result_json and the failures-only filter of GET /v1/operations/ID/result), with
 * injected faults, each asserted by the scope of its finding, the node(s) it names and
 * `passed`; and the size of the result document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/net_sim.h"
#include "common/json_util.h"
#include "controller/state/net.h"

#define MTU 9000
#define NODES 1000
#define PAIRS (NODES * (NODES - 1))
/* The stored result of a 1,000-node check: 219 KB healthy; at worst (half the pairs failing) the
 * nodes with their counts, 10,000 listed pairs and the findings, 2.6 MB. Every pair listed it was
 * 125 MB healthy and 182 MB with the segment fault (measured by breaking the rule). */
#define DOC_MAX_BYTES (4 * 1024 * 1024)

static struct hc_net_check big; /* built once: 40 MB of pairs, reset between the cases */

static int setup(void **state)
{
    assert_int_equal(hc_net_sim_new(&big, NODES, MTU), 0);
    assert_int_equal(big.npairs, PAIRS);
    const struct hc_net_pair *p = hc_net_sim_pair(&big, 999, 998);
    assert_true(p->from == 999 && p->to == 998); /* where hc_net_all_pairs puts it */
    return 0;
}

static int teardown(void **state)
{
    hc_net_check_clear(&big);
    return 0;
}

static void assert_has(const char *text, const char *part)
{
    if (!text || !strstr(text, part))
        fail_msg("'%s' lacks '%s'", text ? text : "(null)", part);
}

/* The findings as "scope:who" lines, for a readable failure. */
static void assert_findings(const json_t *f, size_t n, const char *what)
{
    if (json_array_size(f) == n)
        return;
    char *text = json_dumps(f, JSON_COMPACT);
    fail_msg("%s: %zu findings, want %zu: %.2000s", what, json_array_size(f), n, text);
}

static const json_t *node_finding_of(const json_t *f, size_t k, const char *scope, const char *node)
{
    const json_t *fk = json_array_get(f, k);
    assert_string_equal(hc_json_str(fk, "severity", ""), "error");
    assert_string_equal(hc_json_str(fk, "scope", ""), scope);
    if (node)
        assert_string_equal(hc_json_str(fk, "node", ""), node);
    return fk;
}

/* The result document as the operation stores it, with its size bounded. */
static json_t *result_of(struct hc_net_check *c, size_t *bytes)
{
    json_t *doc = hc_net_result_json(c);
    char *text = hc_json_dump(doc);
    assert_non_null(text);
    *bytes = strlen(text);
    free(text);
    if (*bytes >= DOC_MAX_BYTES)
        fail_msg("the result document is %zu bytes, over %d", *bytes, DOC_MAX_BYTES);
    assert_int_equal(hc_json_int(json_object_get(doc, "summary"), "pairs", 0), PAIRS);
    return doc;
}

/* The document of the check as it stands: it fails, with exactly one error finding, of scope
 * on node (NULL: any or none), into *f0. */
static json_t *failing_once(const char *what, const char *scope, const char *node,
                            const json_t **f0)
{
    size_t bytes;
    json_t *doc = result_of(&big, &bytes), *f = json_object_get(doc, "findings");
    assert_false(json_is_true(json_object_get(doc, "passed")));
    assert_findings(f, 1, what);
    *f0 = node_finding_of(f, 0, scope, node);
    return doc;
}

static void test_healthy(void **state)
{
    size_t bytes;
    hc_net_sim_healthy(&big);
    json_t *doc = result_of(&big, &bytes);
    assert_true(json_is_true(json_object_get(doc, "passed")));
    assert_findings(json_object_get(doc, "findings"), 0, "healthy");
    /* every pair passed, none is listed, and each node's counts say so */
    assert_string_equal(hc_json_str(doc, "pairs_listed", ""), "failures");
    assert_int_equal(json_array_size(json_object_get(doc, "pairs")), 0);
    assert_int_equal(hc_json_int(doc, "pairs_omitted", -1), 0);
    const json_t *n;
    size_t i;
    json_array_foreach(json_object_get(doc, "nodes"), i, n)
    {
        assert_int_equal(hc_json_int(n, "pairs_ok", 0), 2 * (NODES - 1));
        assert_int_equal(hc_json_int(n, "pairs_failed", -1), 0);
    }
    /* an ok pair keeps no detail text: its rtt says it */
    assert_null(big.pairs[0].detail);
    json_decref(doc);
}

/* n8 at MTU 1500: EMSGSIZE from it, a blackhole toward it (its echo cannot leave above 1500). */
static void test_node_mtu_1500(void **state)
{
    const json_t *f0;
    hc_net_sim_healthy(&big);
    big.nodes[7].mtu = 1500;
    hc_net_sim_node(&big, 7, 1, HC_NET_FRAG_NEEDED, 1500, 1500);
    hc_net_sim_node(&big, 7, 2, HC_NET_BLACKHOLE, 0, 1500);
    json_t *doc = failing_once("node at 1500", "node", "n8", &f0);
    assert_has(hc_json_str(f0, "message", NULL),
               "eth1 on n8 has MTU 1500, below the cluster's 9000");
    assert_has(hc_json_str(f0, "fix", NULL), "set eth1 MTU on n8 to 9000: hcctl net set-mtu 9000");
    assert_int_equal(hc_json_int(f0, "pairs_failed", 0), 2 * (NODES - 1));
    /* the document lists the 1,998 failing pairs, all of them */
    assert_int_equal(json_array_size(json_object_get(doc, "pairs")), 2 * (NODES - 1));
    const json_t *n8 = json_array_get(json_object_get(doc, "nodes"), 7);
    assert_int_equal(hc_json_int(n8, "pairs_failed", 0), 2 * (NODES - 1));
    assert_int_equal(hc_json_int(n8, "pairs_ok", -1), 0);
    assert_int_equal(
        hc_json_int(json_array_get(json_object_get(doc, "nodes"), 0), "pairs_failed", 0), 2);
    json_decref(doc);
}

/* The switch port toward n500 passes ~1504 bytes: every pair touching it vanishes. */
static void test_port_blackhole(void **state)
{
    const json_t *f0;
    hc_net_sim_healthy(&big);
    hc_net_sim_node(&big, 499, 0, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *doc = failing_once("port blackhole", "node", "n500", &f0);
    assert_has(hc_json_str(f0, "message", NULL), "largest passing packet 1504 bytes");
    assert_has(hc_json_str(f0, "fix", NULL), "the switch port toward n500");
    assert_has(hc_json_str(f0, "fix", NULL), "~1504-byte");
    json_decref(doc);
}

/* A router with MTU 1500 on n1000's path: "fragmentation needed" naming 1500, both ways. */
static void test_router_hop(void **state)
{
    const json_t *f0;
    hc_net_sim_healthy(&big);
    hc_net_sim_node(&big, 999, 0, HC_NET_FRAG_NEEDED, 1500, 1500);
    json_t *doc = failing_once("router hop", "node", "n1000", &f0);
    assert_has(hc_json_str(f0, "message", NULL), "\"fragmentation needed\" naming MTU 1500");
    assert_has(hc_json_str(f0, "fix", NULL), "a router on n1000's storage path");
    json_decref(doc);
}

/* A bad link between two switches: every pair between n1..n500 and n501..n1000 vanishes
 * (500,000 directed pairs) while each half passes among itself. One finding names both groups. */
static void test_segment(void **state)
{
    const json_t *f0;
    hc_net_sim_healthy(&big);
    hc_net_sim_segment(&big, NODES / 2, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *doc = failing_once("segment", "segment", NULL, &f0);
    const char *msg = hc_json_str(f0, "message", NULL);
    assert_has(msg, "every pair between {n1, n2, n3, n4, n5, n6, n7, n8 and 492 more} (500 nodes) "
                    "and {n501, n502, n503, n504, n505, n506, n507, n508 and 492 more} (500 nodes) "
                    "fails");
    assert_has(msg, "500000 of 500000 pairs fail");
    assert_has(msg, "a link or trunk between their switches passes only ~1504-byte packets");
    assert_has(hc_json_str(f0, "fix", NULL), "raise the MTU of the link or trunk");
    const json_t *na = json_object_get(f0, "nodes_a"), *nb = json_object_get(f0, "nodes_b");
    assert_int_equal(json_array_size(na), 500);
    assert_int_equal(json_array_size(nb), 500);
    assert_string_equal(json_string_value(json_array_get(na, 0)), "n1");
    assert_string_equal(json_string_value(json_array_get(na, 499)), "n500");
    assert_string_equal(json_string_value(json_array_get(nb, 0)), "n501");
    assert_string_equal(json_string_value(json_array_get(nb, 499)), "n1000");
    assert_int_equal(hc_json_int(f0, "pairs_failed", 0), 500000);
    assert_int_equal(hc_json_int(f0, "pairs_total", 0), 500000);
    /* the document: the first 10,000 failing pairs, the count of the rest, every pair counted */
    const json_t *sum = json_object_get(doc, "summary");
    assert_int_equal(hc_json_int(sum, "pairs_failed", 0), 500000);
    assert_int_equal(json_array_size(json_object_get(doc, "pairs")), HC_NET_MAX_LISTED_PAIRS);
    assert_int_equal(hc_json_int(doc, "pairs_omitted", 0), 500000 - HC_NET_MAX_LISTED_PAIRS);
    const json_t *n1 = json_array_get(json_object_get(doc, "nodes"), 0);
    assert_int_equal(hc_json_int(n1, "pairs_ok", 0), 2 * 499);
    assert_int_equal(hc_json_int(n1, "pairs_failed", 0), 2 * 500);
    /* ?failures_only=1 on it: the same pairs, said so, the summary untouched */
    hc_net_result_failures_only(doc);
    assert_true(json_is_true(json_object_get(doc, "failures_only")));
    assert_string_equal(hc_json_str(doc, "pairs_listed", ""), "failures");
    assert_int_equal(json_array_size(json_object_get(doc, "pairs")), HC_NET_MAX_LISTED_PAIRS);
    assert_int_equal(hc_json_int(json_object_get(doc, "summary"), "pairs_failed", 0), 500000);
    const json_t *p = json_array_get(json_object_get(doc, "pairs"), 0);
    assert_string_equal(hc_json_str(p, "from", ""), "n1");
    assert_string_equal(hc_json_str(p, "to", ""), "n501");
    assert_string_equal(hc_json_str(p, "result", ""), "blackhole");
    assert_has(hc_json_str(p, "detail", NULL), "no echo for 9000 bytes");
    /* the 500,000 failing pairs share one detail text */
    assert_ptr_equal(hc_net_sim_pair(&big, 0, 500)->detail, hc_net_sim_pair(&big, 999, 1)->detail);
    json_decref(doc);
}

/* Two faults at once: the switch port toward n11 passes ~1504 bytes, n21 runs 8982. */
static void test_two_faults(void **state)
{
    size_t bytes;
    hc_net_sim_healthy(&big);
    hc_net_sim_node(&big, 10, 0, HC_NET_BLACKHOLE, 1504, 1504);
    big.nodes[20].mtu = 8982;
    hc_net_sim_node(&big, 20, 1, HC_NET_FRAG_NEEDED, 8982, 8982);
    hc_net_sim_node(&big, 20, 2, HC_NET_BLACKHOLE, 8986, 8986);
    hc_net_sim_result(&big, hc_net_sim_pair(&big, 10, 20), HC_NET_BLACKHOLE, 1504, 1504);
    json_t *doc = result_of(&big, &bytes), *f = json_object_get(doc, "findings");
    assert_false(json_is_true(json_object_get(doc, "passed")));
    assert_findings(f, 2, "two faults");
    const json_t *f0 = node_finding_of(f, 0, "node", "n21");
    assert_has(hc_json_str(f0, "message", NULL), "eth1 on n21 has MTU 8982");
    const json_t *f1 = node_finding_of(f, 1, "node", "n11");
    assert_has(hc_json_str(f1, "fix", NULL), "the switch port toward n11");
    assert_has(hc_json_str(f1, "message", NULL), "1504");
    json_decref(doc);
}

/* 200 scattered links, each between two nodes of its own (a random matching, fixed seed): the
 * first HC_NET_MAX_PAIR_FINDINGS by pair, then one finding for the other 136. */
static void test_scattered(void **state)
{
    size_t bytes, perm[NODES];
    uint64_t seed = 14;
    char *failing = calloc(NODES * NODES, 1);
    assert_non_null(failing);
    hc_net_sim_healthy(&big);
    for (size_t i = 0; i < NODES; i++)
        perm[i] = i;
    for (size_t i = NODES - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = (size_t)(seed >> 33) % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t k = 0; k < 400; k += 2) {
        size_t a = perm[k], b = perm[k + 1];
        hc_net_sim_result(&big, hc_net_sim_pair(&big, a, b), HC_NET_BLACKHOLE, 1504, 1504);
        hc_net_sim_result(&big, hc_net_sim_pair(&big, b, a), HC_NET_BLACKHOLE, 1504, 1504);
        failing[a * NODES + b] = failing[b * NODES + a] = 1;
    }
    json_t *doc = result_of(&big, &bytes), *f = json_object_get(doc, "findings");
    assert_false(json_is_true(json_object_get(doc, "passed")));
    assert_findings(f, HC_NET_MAX_PAIR_FINDINGS + 1, "scattered");
    size_t prev = 0;
    for (size_t k = 0; k < HC_NET_MAX_PAIR_FINDINGS; k++) {
        const json_t *fk = node_finding_of(f, k, "pair", NULL);
        size_t a = strtoul(hc_json_str(fk, "from", "n0") + 1, NULL, 10) - 1;
        size_t b = strtoul(hc_json_str(fk, "to", "n0") + 1, NULL, 10) - 1;
        assert_true(a < b && b < NODES && failing[a * NODES + b]);
        assert_true(a * NODES + b > prev || k == 0); /* in node order */
        prev = a * NODES + b;
        assert_int_equal(hc_json_int(fk, "pairs_failed", 0), 2);
    }
    const json_t *more = node_finding_of(f, HC_NET_MAX_PAIR_FINDINGS, "pairs", NULL);
    assert_int_equal(hc_json_int(more, "more", 0), 200 - HC_NET_MAX_PAIR_FINDINGS);
    assert_int_equal(hc_json_int(more, "nodes_involved", 0), 2 * (200 - HC_NET_MAX_PAIR_FINDINGS));
    assert_int_equal(hc_json_int(more, "pairs_failed", 0), 2 * (200 - HC_NET_MAX_PAIR_FINDINGS));
    assert_has(hc_json_str(more, "message", NULL),
               "136 more pairs fail between nodes not named above (272 nodes)");
    assert_has(hc_json_str(more, "message", NULL), "largest passing packet 1504 bytes");
    /* all 400 failing pairs are listed */
    assert_int_equal(json_array_size(json_object_get(doc, "pairs")), 400);
    assert_int_equal(hc_json_int(doc, "pairs_omitted", -1), 0);
    free(failing);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy),        cmocka_unit_test(test_node_mtu_1500),
        cmocka_unit_test(test_port_blackhole), cmocka_unit_test(test_router_hop),
        cmocka_unit_test(test_segment),        cmocka_unit_test(test_two_faults),
        cmocka_unit_test(test_scattered),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
