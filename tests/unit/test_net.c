/* Unit tests for controller/state/net.c and net_findings.c: reading a node's storage side from an
 * interface list, and the localisation of probed checks built by hand (each lab scenario of
 * issue 4 as pair results: the verdict and the finding that names the culprit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "controller/ops/op_net.h"
#include "controller/remote/net_probe.h"
#include "controller/state/net.h"

#define MTU 9000

/* A check of n healthy nodes n1..nN (eth1, 9000, up, 10.0.1.i) with every directed pair ok. */
static void make_check(struct hc_net_check *c, size_t n)
{
    memset(c, 0, sizeof(*c));
    c->mtu = MTU;
    c->mtu_source = "cluster";
    c->nodes = calloc(n, sizeof(*c->nodes));
    c->nnodes = n;
    for (size_t i = 0; i < n; i++) {
        struct hc_net_node *d = &c->nodes[i];
        snprintf(d->name, sizeof(d->name), "n%zu", i + 1);
        snprintf(d->iface, sizeof(d->iface), "eth1");
        snprintf(d->addr, sizeof(d->addr), "10.0.1.%zu", i + 1);
        snprintf(d->state, sizeof(d->state), "up");
        d->mtu = MTU;
        d->agent_ok = 1;
    }
    assert_int_equal(hc_net_all_pairs(c, NULL), 0);
    assert_int_equal(c->npairs, n * (n - 1));
    for (size_t k = 0; k < c->npairs; k++) {
        c->pairs[k].result = HC_NET_OK;
        c->pairs[k].path_mtu = MTU;
        c->pairs[k].rtt_ms = 0.1;
    }
}

/* Sets every pair from (or to, or touching) node index i. dir: 0 both, 1 from, 2 to. */
static void set_pairs(struct hc_net_check *c, size_t i, int dir, enum hc_net_result r, int path_mtu,
                      int largest_ok)
{
    for (size_t k = 0; k < c->npairs; k++) {
        struct hc_net_pair *p = &c->pairs[k];
        int hit = dir == 0 ? (p->from == i || p->to == i) : dir == 1 ? p->from == i : p->to == i;
        if (!hit)
            continue;
        p->result = r;
        p->path_mtu = path_mtu;
        p->largest_ok = largest_ok;
        p->rtt_ms = -1;
    }
}

static void set_pair(struct hc_net_check *c, size_t a, size_t b, enum hc_net_result r, int pm,
                     int largest)
{
    for (size_t k = 0; k < c->npairs; k++) {
        struct hc_net_pair *p = &c->pairs[k];
        if (p->from == a && p->to == b) {
            p->result = r;
            p->path_mtu = pm;
            p->largest_ok = largest;
        }
    }
}

static json_t *findings_of(struct hc_net_check *c)
{
    json_t *f = hc_net_findings(c);
    assert_true(json_is_array(f));
    return f;
}

static void assert_has(const char *text, const char *part)
{
    if (!text || !strstr(text, part))
        fail_msg("'%s' lacks '%s'", text ? text : "(null)", part);
}

static void test_all_pass(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    json_t *doc = hc_net_result_json(&c);
    assert_true(json_is_true(json_object_get(doc, "passed")));
    assert_int_equal(hc_json_int(doc, "mtu", 0), 9000);
    assert_int_equal(hc_json_int(doc, "payload_bytes", 0), 8972);
    assert_int_equal(json_array_size(json_object_get(doc, "findings")), 0);
    assert_int_equal(json_array_size(json_object_get(doc, "pairs")), 12);
    const json_t *n1 = json_array_get(json_object_get(doc, "nodes"), 0);
    assert_string_equal(hc_json_str(n1, "name", ""), "n1");
    assert_string_equal(hc_json_str(n1, "interface", ""), "eth1");
    assert_int_equal(hc_json_int(n1, "mtu", 0), 9000);
    assert_true(json_is_true(json_object_get(n1, "ok")));
    const json_t *p = json_array_get(json_object_get(doc, "pairs"), 0);
    assert_string_equal(hc_json_str(p, "from", ""), "n1");
    assert_string_equal(hc_json_str(p, "to", ""), "n2");
    assert_string_equal(hc_json_str(p, "result", ""), "ok");
    assert_int_equal(hc_json_int(p, "path_mtu", 0), 9000);
    json_decref(doc);
    hc_net_check_clear(&c);
}

/* One node's interface at 1500: EMSGSIZE from it, a blackhole toward it (1504 passes). */
static void test_node_mtu(void **state)
{
    struct hc_net_check c;
    make_check(&c, 3);
    c.nodes[1].mtu = 1500;
    set_pairs(&c, 1, 1, HC_NET_FRAG_NEEDED, 1500, 1500);
    set_pairs(&c, 1, 2, HC_NET_BLACKHOLE, 0, 1504);
    json_t *doc = hc_net_result_json(&c);
    json_t *f = json_object_get(doc, "findings");
    assert_false(json_is_true(json_object_get(doc, "passed")));
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "scope", ""), "node");
    assert_string_equal(hc_json_str(f0, "node", ""), "n2");
    assert_string_equal(hc_json_str(f0, "severity", ""), "error");
    assert_has(hc_json_str(f0, "message", NULL), "MTU 1500");
    assert_has(hc_json_str(f0, "fix", NULL), "set eth1 MTU on n2 to 9000: hcctl net set-mtu 9000");
    assert_false(
        json_is_true(json_object_get(json_array_get(json_object_get(doc, "nodes"), 1), "ok")));
    json_decref(doc);
    hc_net_check_clear(&c);
}

/* The switch port toward n3 at 1500: the node's configuration is fine, its pairs vanish. */
static void test_port_blackhole(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    set_pairs(&c, 2, 0, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "scope", ""), "node");
    assert_string_equal(hc_json_str(f0, "node", ""), "n3");
    assert_has(hc_json_str(f0, "message", NULL), "vanish");
    assert_has(hc_json_str(f0, "message", NULL), "1504");
    assert_has(hc_json_str(f0, "fix", NULL), "switch port toward n3");
    assert_int_equal(hc_json_int(f0, "pairs_failed", 0), 6);
    json_decref(f);
    hc_net_check_clear(&c);
}

/* 9000 on n2's neighbours, 8982 on n2: a mismatch with path MTU about 8982. */
static void test_mismatch_8982(void **state)
{
    struct hc_net_check c;
    make_check(&c, 3);
    c.nodes[1].mtu = 8982;
    set_pairs(&c, 1, 1, HC_NET_FRAG_NEEDED, 8982, 8982);
    set_pairs(&c, 1, 2, HC_NET_BLACKHOLE, 8986, 8986);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "node", ""), "n2");
    assert_has(hc_json_str(json_array_get(f, 0), "message", NULL), "8982");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* A routed hop of MTU 1500 in front of n3: ICMP frag-needed both ways, naming 1500. */
static void test_routed_hop(void **state)
{
    struct hc_net_check c;
    make_check(&c, 3);
    set_pairs(&c, 2, 0, HC_NET_FRAG_NEEDED, 1500, 1500);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "node", ""), "n3");
    assert_has(hc_json_str(f0, "message", NULL), "fragmentation needed");
    assert_has(hc_json_str(f0, "message", NULL), "MTU 1500");
    assert_has(hc_json_str(f0, "fix", NULL), "router");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* Every switch port at 1500: every pair fails, the fabric is named with a fallback MTU. */
static void test_fabric(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    for (size_t i = 0; i < 4; i++)
        set_pairs(&c, i, 0, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "scope", ""), "fabric");
    assert_null(json_object_get(f0, "node"));
    assert_has(hc_json_str(f0, "message", NULL), "every pair fails");
    assert_has(hc_json_str(f0, "fix", NULL), "hcctl net set-mtu 1500");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* Two nodes that cannot reach each other at 9000: nothing tells the sides apart: the fabric. */
static void test_two_nodes(void **state)
{
    struct hc_net_check c;
    make_check(&c, 2);
    set_pairs(&c, 0, 0, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "scope", ""), "fabric");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* One broken link between n1 and n2 in a cluster of four: named by pair. */
static void test_pair(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    set_pair(&c, 0, 1, HC_NET_BLACKHOLE, 1504, 1504);
    set_pair(&c, 1, 0, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "scope", ""), "pair");
    assert_string_equal(hc_json_str(f0, "from", ""), "n1");
    assert_string_equal(hc_json_str(f0, "to", ""), "n2");
    assert_has(hc_json_str(f0, "message", NULL), "between n1 and n2");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* One direction only: every probe toward n4 vanishes, every probe from it passes. */
static void test_one_direction(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    set_pairs(&c, 3, 2, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "node", ""), "n4");
    assert_has(hc_json_str(json_array_get(f, 0), "message", NULL), "toward n4");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* The shared-network stall: n2's agent cannot be asked, probes toward it vanish. */
static void test_agent_stalled(void **state)
{
    struct hc_net_check c;
    make_check(&c, 3);
    c.nodes[1].agent_ok = 0;
    snprintf(c.nodes[1].agent_error, sizeof(c.nodes[1].agent_error), "no answer within 5000 ms");
    set_pairs(&c, 1, 1, HC_NET_NOT_PROBED, 0, 0);
    set_pairs(&c, 1, 2, HC_NET_BLACKHOLE, 1504, 1504);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "node", ""), "n2");
    assert_has(hc_json_str(f0, "message", NULL), "did not answer");
    assert_has(hc_json_str(f0, "message", NULL), "vanish");
    assert_has(hc_json_str(f0, "fix", NULL), "switch port toward n2");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* An MTU above the cluster's is a warning: the check still passes. */
static void test_higher_mtu_warning(void **state)
{
    struct hc_net_check c;
    make_check(&c, 3);
    c.nodes[0].mtu = 9216;
    json_t *doc = hc_net_result_json(&c);
    json_t *f = json_object_get(doc, "findings");
    assert_true(json_is_true(json_object_get(doc, "passed")));
    assert_int_equal(json_array_size(f), 1);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "severity", ""), "warning");
    json_decref(doc);
    hc_net_check_clear(&c);
}

/* Every pair between {n1,n2,n3} and {n4,n5,n6} vanishes, each half passes among itself: a bad
 * link between two switches, one finding of scope segment (not nine pair findings). */
static void test_segment(void **state)
{
    struct hc_net_check c;
    make_check(&c, 6);
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 3; b < 6; b++) {
            set_pair(&c, a, b, HC_NET_BLACKHOLE, 1504, 1504);
            set_pair(&c, b, a, HC_NET_BLACKHOLE, 1504, 1504);
        }
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "scope", ""), "segment");
    assert_string_equal(hc_json_str(f0, "severity", ""), "error");
    assert_has(hc_json_str(f0, "message", NULL),
               "every pair between {n1, n2, n3} (3 nodes) and {n4, n5, n6} (3 nodes) fails: "
               "9000-byte probes between the two groups: 18 of 18 pairs fail");
    assert_has(hc_json_str(f0, "message", NULL), "passes only ~1504-byte packets");
    assert_int_equal(json_array_size(json_object_get(f0, "nodes_a")), 3);
    assert_string_equal(json_string_value(json_array_get(json_object_get(f0, "nodes_b"), 2)), "n6");
    assert_int_equal(hc_json_int(f0, "pairs_total", 0), 18);
    json_decref(f);
    /* A router between them instead: frag_needed naming 1500. */
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 3; b < 6; b++) {
            set_pair(&c, a, b, HC_NET_FRAG_NEEDED, 1500, 1500);
            set_pair(&c, b, a, HC_NET_FRAG_NEEDED, 1500, 1500);
        }
    f = findings_of(&c);
    assert_int_equal(json_array_size(f), 1);
    assert_has(hc_json_str(json_array_get(f, 0), "message", NULL),
               "a routed hop between them forwards only 1500-byte packets");
    json_decref(f);
    /* One direction of one pair passes: not every pair fails, so no segment but pairs. */
    set_pair(&c, 0, 3, HC_NET_OK, 9000, 9000);
    f = findings_of(&c);
    assert_int_equal(json_array_size(f), 9);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "scope", ""), "pair");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* Two nodes against one among five: a segment too (one side has two nodes); one against one
 * stays a pair (test_pair). A node named by itself is not part of a segment. */
static void test_segment_two_one(void **state)
{
    struct hc_net_check c;
    make_check(&c, 5);
    for (size_t a = 0; a < 2; a++) {
        set_pair(&c, a, 2, HC_NET_BLACKHOLE, 1504, 1504);
        set_pair(&c, 2, a, HC_NET_BLACKHOLE, 1504, 1504);
    }
    set_pairs(&c, 4, 0, HC_NET_BLACKHOLE, 1504, 1504); /* and n5's switch port */
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 2);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "scope", ""), "node");
    assert_string_equal(hc_json_str(json_array_get(f, 0), "node", ""), "n5");
    assert_string_equal(hc_json_str(json_array_get(f, 1), "scope", ""), "segment");
    assert_has(hc_json_str(json_array_get(f, 1), "message", NULL),
               "every pair between {n1, n2} (2 nodes) and {n3} (1 node) fails");
    json_decref(f);
    hc_net_check_clear(&c);
}

/* The result document of a small check lists every pair; the failures-only filter keeps the
 * failing ones and says so; each node counts its pairs; an ok pair keeps no detail text. */
static void test_document_shape(void **state)
{
    struct hc_net_check c;
    make_check(&c, 4);
    set_pairs(&c, 2, 0, HC_NET_BLACKHOLE, 1504, 1504);
    for (size_t k = 0; k < c.npairs; k++)
        hc_net_pair_detail(&c, &c.pairs[k], "%s",
                           c.pairs[k].result == HC_NET_OK ? "echo of 9000 bytes in 0.1 ms"
                                                          : "no echo for 9000 bytes");
    json_t *doc = hc_net_result_json(&c);
    json_t *pairs = json_object_get(doc, "pairs");
    assert_string_equal(hc_json_str(doc, "pairs_listed", ""), "all");
    assert_int_equal(hc_json_int(doc, "pairs_omitted", -1), 0);
    assert_int_equal(json_array_size(pairs), 12);
    assert_true(json_is_null(json_object_get(json_array_get(pairs, 0), "detail")));
    const json_t *n3 = json_array_get(json_object_get(doc, "nodes"), 2);
    assert_int_equal(hc_json_int(n3, "pairs_failed", 0), 6);
    assert_int_equal(hc_json_int(n3, "pairs_ok", -1), 0);
    const json_t *n1 = json_array_get(json_object_get(doc, "nodes"), 0);
    assert_int_equal(hc_json_int(n1, "pairs_ok", 0), 4);
    assert_int_equal(hc_json_int(n1, "pairs_failed", 0), 2);
    hc_net_result_failures_only(doc);
    pairs = json_object_get(doc, "pairs");
    assert_true(json_is_true(json_object_get(doc, "failures_only")));
    assert_string_equal(hc_json_str(doc, "pairs_listed", ""), "failures");
    assert_int_equal(json_array_size(pairs), 6);
    assert_string_equal(hc_json_str(json_array_get(pairs, 0), "detail", ""),
                        "no echo for 9000 bytes");
    assert_int_equal(hc_json_int(json_object_get(doc, "summary"), "pairs", 0), 12);
    json_decref(doc);
    /* a document without pairs (set-mtu's changes) is left alone */
    doc = json_pack("{s:{}}", "changes");
    hc_net_result_failures_only(doc);
    assert_null(json_object_get(doc, "failures_only"));
    json_decref(doc);
    hc_net_check_clear(&c);
}

/* The per-node indexes list each node's pairs in pair order, whatever order the pairs are in
 * (set-mtu's verification interleaves the two directions). */
static void test_index(void **state)
{
    struct hc_net_check c = {.mtu = MTU};
    struct hc_net_index ix;
    const struct hc_net_pair pairs[] = {{.from = 1, .to = 0},
                                        {.from = 0, .to = 1},
                                        {.from = 1, .to = 2},
                                        {.from = 2, .to = 1},
                                        {.from = 0, .to = 2}};
    c.pairs = (struct hc_net_pair *)pairs;
    c.npairs = 5;
    c.nnodes = 3;
    assert_int_equal(hc_net_index_build(&ix, &c), 0);
    const uint32_t from1[] = {0, 2}, to1[] = {1, 3}, from0[] = {1, 4}, to2[] = {2, 4};
    assert_int_equal(ix.from_off[2] - ix.from_off[1], 2);
    assert_memory_equal(ix.by_from + ix.from_off[1], from1, sizeof(from1));
    assert_memory_equal(ix.by_to + ix.to_off[1], to1, sizeof(to1));
    assert_memory_equal(ix.by_from + ix.from_off[0], from0, sizeof(from0));
    assert_memory_equal(ix.by_to + ix.to_off[2], to2, sizeof(to2));
    assert_int_equal(ix.from_off[3], 5);
    assert_int_equal(ix.to_off[1] - ix.to_off[0], 1);
    hc_net_index_free(&ix);
    hc_net_index_free(&ix); /* emptied: twice is harmless */
}

/* Detail texts: interned (one copy per distinct text), none for an ok pair or an empty text,
 * and still right past the first block of the pool. */
static void test_pair_detail(void **state)
{
    struct hc_net_check c;
    make_check(&c, 3);
    struct hc_net_pair *p = &c.pairs[0], *q = &c.pairs[1];
    hc_net_pair_detail(&c, p, "echo of %d bytes", 9000);
    assert_null(p->detail);
    p->result = q->result = HC_NET_BLACKHOLE;
    hc_net_pair_detail(&c, p, "no echo for %d bytes", 9000);
    hc_net_pair_detail(&c, q, "no echo for %d bytes", 9000);
    assert_string_equal(p->detail, "no echo for 9000 bytes");
    assert_ptr_equal(p->detail, q->detail);
    hc_net_pair_detail(&c, q, "%s", "");
    assert_null(q->detail);
    const char *first = p->detail;
    char want[64];
    for (int i = 0; i < 5000; i++) { /* ~150 KB of distinct texts: several blocks */
        hc_net_pair_detail(&c, q, "distinct text number %d, long enough to fill blocks", i);
        snprintf(want, sizeof(want), "distinct text number %d,", i);
        assert_has(q->detail, want);
    }
    assert_string_equal(first, "no echo for 9000 bytes");
    hc_net_pair_detail(&c, q, "no echo for %d bytes", 9000);
    assert_ptr_equal(q->detail, first);
    hc_net_check_clear(&c);
}

/* The agent's interface list: storage interface found by address, bridge and bond MTUs. */
static void test_node_apply(void **state)
{
    json_t *ifaces = json_loads(
        "[{\"name\":\"lo\",\"mtu\":65536,\"state\":\"unknown\",\"kind\":null,\"master\":null,"
        "\"addresses\":[\"127.0.0.1/8\"]},"
        "{\"name\":\"eth2\",\"mtu\":1500,\"state\":\"up\",\"kind\":null,\"master\":\"bond0\","
        "\"addresses\":[]},"
        "{\"name\":\"eth3\",\"mtu\":9000,\"state\":\"up\",\"kind\":null,\"master\":\"bond0\","
        "\"addresses\":[]},"
        "{\"name\":\"tap0\",\"mtu\":1500,\"state\":\"up\",\"kind\":\"tun\",\"master\":\"vmbr1\","
        "\"addresses\":[]},"
        "{\"name\":\"bond0\",\"mtu\":9000,\"state\":\"up\",\"kind\":\"bond\",\"master\":\"vmbr1\","
        "\"addresses\":[]},"
        "{\"name\":\"vmbr1\",\"mtu\":9000,\"state\":\"up\",\"kind\":\"bridge\",\"master\":null,"
        "\"addresses\":[\"fe80::1/64\",\"10.0.1.5/24\"]}]",
        0, NULL);
    struct hc_net_node n = {0};
    char why[512], fix[512];
    snprintf(n.name, sizeof(n.name), "n5");
    snprintf(n.address, sizeof(n.address), "10.0.1.5");
    hc_net_node_apply(&n, ifaces);
    assert_string_equal(n.iface, "vmbr1");
    assert_string_equal(n.addr, "10.0.1.5");
    assert_int_equal(n.mtu, 9000);
    assert_string_equal(n.kind, "bridge");
    /* tap0 (a VM) does not count; eth2 under bond0 does */
    assert_string_equal(n.port, "eth2");
    assert_int_equal(n.port_mtu, 1500);
    assert_int_equal(hc_net_node_verdict(&n, MTU, why, sizeof(why), fix, sizeof(fix)), 2);
    assert_has(why, "eth2");
    assert_has(fix, "ip link set dev eth2 mtu 9000");

    /* a named storage interface with a master */
    struct hc_net_node m = {0};
    snprintf(m.iface, sizeof(m.iface), "bond0");
    hc_net_node_apply(&m, ifaces);
    assert_string_equal(m.master, "vmbr1");
    assert_int_equal(m.master_mtu, 9000);
    assert_string_equal(m.addr, "");
    assert_int_equal(hc_net_node_verdict(&m, MTU, why, sizeof(why), fix, sizeof(fix)), 2);
    assert_has(why, "no IPv4 address");

    /* an interface that is gone */
    struct hc_net_node g = {0};
    snprintf(g.name, sizeof(g.name), "n6");
    snprintf(g.iface, sizeof(g.iface), "eth9");
    hc_net_node_apply(&g, ifaces);
    assert_int_equal(g.mtu, 0);
    assert_int_equal(hc_net_node_verdict(&g, MTU, why, sizeof(why), fix, sizeof(fix)), 2);
    assert_has(why, "no interface eth9");
    json_decref(ifaces);
}

/* set-mtu's verification summary: names the peers that fail with the sizes seen. */
static void test_summary(void **state)
{
    struct hc_net_check c;
    char msg[1024], fix[768];
    make_check(&c, 3);
    /* only the pairs touching n2, as the verification builds them */
    size_t k = 0;
    for (size_t i = 0; i < c.npairs; i++)
        if (c.pairs[i].from == 1 || c.pairs[i].to == 1)
            c.pairs[k++] = c.pairs[i];
    c.npairs = k;
    hc_net_summary(&c, 1, msg, sizeof(msg), fix, sizeof(fix));
    assert_string_equal(msg, "");
    set_pair(&c, 1, 0, HC_NET_BLACKHOLE, 1504, 1504);
    set_pair(&c, 0, 1, HC_NET_BLACKHOLE, 1504, 1504);
    hc_net_summary(&c, 1, msg, sizeof(msg), fix, sizeof(fix));
    assert_has(msg, "between n2 and n1");
    assert_has(msg, "1504");
    assert_has(fix, "~1504-byte");
    hc_net_check_clear(&c);
}

/* One node has no pair to prove: the check passes, but says there was nothing to check. */
static void test_one_node(void **state)
{
    struct hc_net_check c;
    make_check(&c, 1);
    json_t *doc = hc_net_result_json(&c);
    json_t *f = json_object_get(doc, "findings");
    assert_true(json_is_true(json_object_get(doc, "passed")));
    assert_int_equal(hc_json_int(json_object_get(doc, "summary"), "pairs", -1), 0);
    assert_int_equal(json_array_size(f), 1);
    const json_t *f0 = json_array_get(f, 0);
    assert_string_equal(hc_json_str(f0, "severity", ""), "info");
    assert_string_equal(hc_json_str(f0, "scope", ""), "cluster");
    assert_null(json_object_get(f0, "node"));
    assert_has(hc_json_str(f0, "message", NULL), "one node (n1)");
    assert_has(hc_json_str(f0, "message", NULL), "nothing to check");
    json_decref(doc);
    /* Its configuration is still judged: an interface below the MTU fails. */
    c.nodes[0].mtu = 1500;
    doc = hc_net_result_json(&c);
    f = json_object_get(doc, "findings");
    assert_false(json_is_true(json_object_get(doc, "passed")));
    assert_int_equal(json_array_size(f), 2);
    assert_string_equal(hc_json_str(json_array_get(f, 0), "severity", ""), "error");
    assert_string_equal(hc_json_str(json_array_get(f, 1), "severity", ""), "info");
    json_decref(doc);
    hc_net_check_clear(&c);
    /* Two nodes: pairs, no such finding. */
    make_check(&c, 2);
    f = findings_of(&c);
    assert_int_equal(json_array_size(f), 0);
    json_decref(f);
    hc_net_check_clear(&c);
}

/* Hand-joined nodes whose address no interface carries (loopback aliases): no storage address
 * anywhere, so no pair can be probed. Each node's finding names that node, not the first peer. */
static void test_hand_joined_names_itself(void **state)
{
    struct hc_net_check c;
    struct hc_error err = {0};
    make_check(&c, 3);
    for (size_t i = 0; i < 3; i++) {
        struct hc_net_node *n = &c.nodes[i];
        snprintf(n->address, sizeof(n->address), "127.0.88.%zu", i + 2);
        n->iface[0] = n->addr[0] = n->state[0] = '\0';
        n->mtu = 0;
        n->agent_ok = -1;
    }
    struct hc_tls_client_config tls = {0};
    struct hc_http_client *client = hc_http_client_new(&tls, &err);
    assert_non_null(client);
    hc_net_probe(client, &c, 0); /* nothing to ask: every pair lacks a target address */
    hc_http_client_free(client);
    json_t *f = findings_of(&c);
    assert_int_equal(json_array_size(f), 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *fi = json_array_get(f, i);
        char own[64], other[64];
        const char *msg = hc_json_str(fi, "message", NULL);
        snprintf(own, sizeof(own), "no storage address known for n%zu", i + 1);
        snprintf(other, sizeof(other), "no storage address known for n%zu", (i + 1) % 3 + 1);
        assert_string_equal(hc_json_str(fi, "node", ""), c.nodes[i].name);
        assert_has(msg, own);
        if (strstr(msg, other))
            fail_msg("the finding of %s names another node: %s", c.nodes[i].name, msg);
    }
    json_decref(f);
    hc_net_check_clear(&c);
}

/* A pair that was measured but moved (almost) nothing is an error, not a slow pair. */
static void test_bench_stalled(void **state)
{
    char why[256];
    assert_int_equal(hc_net_bench_stalled(0, 59, 9000, 3, why, sizeof(why)), 1);
    assert_has(why, "no data passed in 3 s (0 bit/s, 59 retransmits)");
    assert_has(why, "hcctl net check-jumbo");
    assert_int_equal(hc_net_bench_stalled(2.5e5, -1, 9000, 1, why, sizeof(why)), 1);
    assert_has(why, "almost no data passed in 1 s (250 kbit/s)");
    /* Behind a 1500 port in the lab: 6.2 Mbit/s with 49 retransmits in 1 s (~36 % lost). */
    assert_int_equal(hc_net_bench_stalled(6.2e6, 49, 9000, 1, why, sizeof(why)), 1);
    assert_has(why, "only 6.2 Mbit/s passed in 1 s, with 49 retransmits (~36% of the segments)");
    assert_has(why, "vanish");
    /* Healthy: fast, or slow without loss, or a few retransmits. */
    assert_int_equal(hc_net_bench_stalled(9.4e9, 0, 9000, 3, why, sizeof(why)), 0);
    assert_string_equal(why, "");
    assert_int_equal(hc_net_bench_stalled(5.5e9, 1, 9000, 1, why, sizeof(why)), 0);
    assert_int_equal(hc_net_bench_stalled(2e6, 0, 1500, 3, why, sizeof(why)), 0);
    assert_int_equal(hc_net_bench_stalled(9e8, 9, 1500, 1, why, sizeof(why)), 0);
    assert_int_equal(hc_net_bench_stalled(HC_NET_BENCH_MIN_BPS, 0, 9000, 3, why, sizeof(why)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_pass),           cmocka_unit_test(test_node_mtu),
        cmocka_unit_test(test_port_blackhole),     cmocka_unit_test(test_mismatch_8982),
        cmocka_unit_test(test_routed_hop),         cmocka_unit_test(test_fabric),
        cmocka_unit_test(test_two_nodes),          cmocka_unit_test(test_pair),
        cmocka_unit_test(test_one_direction),      cmocka_unit_test(test_agent_stalled),
        cmocka_unit_test(test_higher_mtu_warning), cmocka_unit_test(test_segment),
        cmocka_unit_test(test_segment_two_one),    cmocka_unit_test(test_document_shape),
        cmocka_unit_test(test_pair_detail),        cmocka_unit_test(test_index),
        cmocka_unit_test(test_node_apply),         cmocka_unit_test(test_summary),
        cmocka_unit_test(test_one_node),           cmocka_unit_test(test_hand_joined_names_itself),
        cmocka_unit_test(test_bench_stalled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
