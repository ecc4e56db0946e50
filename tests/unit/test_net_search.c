/* Unit tests of the sample a large storage network check searches (controller/remote/
 * net_probe.h hc_net_pick_searches): whatever the fault, no node runs or answers more than
 * HC_NET_SEARCH_PER_NODE searches, every node with failing pairs is covered when it can be, and
 * only blackholes are searched (frag_needed has its MTU from ICMP, unreachable has nothing to
 * search). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/remote/net_probe.h"
#include "controller/state/net.h"

#define NODES 200

static void make_check(struct hc_net_check *c, size_t n)
{
    memset(c, 0, sizeof(*c));
    c->mtu = 9000;
    c->nodes = calloc(n, sizeof(*c->nodes));
    c->nnodes = n;
    for (size_t i = 0; i < n; i++)
        snprintf(c->nodes[i].name, sizeof(c->nodes[i].name), "n%zu", i + 1);
    assert_int_equal(hc_net_all_pairs(c, NULL), 0);
    for (size_t k = 0; k < c->npairs; k++)
        c->pairs[k].result = HC_NET_OK;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_port),
        cmocka_unit_test(test_segment),
        cmocka_unit_test(test_fabric_and_others),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
