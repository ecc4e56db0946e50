/*
 * Localisation of a probed check (see net.h): from the configured MTUs and the directed-pair
 * results to findings that name what is wrong and say how to fix it.
 *
 * 1. A node whose own configuration cannot carry the MTU (interface missing, down, MTU below it,
 *    a bridge, bond or uplink port below it) or whose agent could not run the probes is named by
 *    itself: its failing pairs are explained by it. Full neighbour tables (an error) and tables too
 *    small for the cluster's size (a warning) are named too, once over the nodes concerned; the
 *    neighbor_unresolved pairs are explained by them and left out of every later step.
 * 2. Among the remaining ("good") nodes, when every pair fails, the fabric is named (a switch
 *    that passes no jumbo frames, or a hop every node crosses).
 * 3. Otherwise a good node all of whose pairs fail (or all pairs from it, or all pairs toward it,
 *    when there are at least two) is named: its switch port, NIC or cable, or a routed hop on its
 *    path when the probes drew "fragmentation needed".
 * 4. The nodes left, grouped by their set of failing peers: two groups that fail exactly with
 *    each other (one of at least two nodes), every pair between them, are one segment finding:
 *    the link, trunk or hop between their switches.
 * 5. What is left is named by pair, at most HC_NET_MAX_PAIR_FINDINGS, then counted in one.
 * Linear in the pairs: a node's tally reads its own pairs (hc_net_index), the groups and the
 * pairs come from bitsets of failing peers (nodes^2/64 words).
 * A check of fewer than two nodes has no pair to prove: it says so in a finding of severity
 * `info` (its nodes' configuration is still judged).
 * Every finding carries the observed sizes (largest passing packet, the MTU an ICMP error named)
 * and a concrete fix.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "controller/state/net.h"

/* What a set of pairs did. */
struct tally {
    int total, failed, local, frag, bh, unr, np, neigh;
    int local_min, local_max; /* MTUs of senders too small for the probe (EMSGSIZE) */
    int frag_min, frag_max;   /* MTUs named by frag-needed from the path */
    int ok_min, ok_max;       /* largest passing sizes measured */
    int size;
    size_t focus; /* node index + 1 whose own reason for unprobed pairs is told; 0: any */
    int np_own;   /* np_detail is about the focus node */
    char np_detail[192];
};

enum cause { CAUSE_NONE, CAUSE_BLACKHOLE, CAUSE_FRAG, CAUSE_UNREACHABLE, CAUSE_NOT_PROBED };

static void span_add(int *lo, int *hi, int v)
{
    if (v <= 0)
        return;
    if (*lo == 0 || v < *lo)
        *lo = v;
    if (v > *hi)
        *hi = v;
}

/* A frag_needed is the sender's own doing when its interface is smaller than the probe (the
 * kernel refused with EMSGSIZE); otherwise a hop on the path named the MTU (or the sender's
 * cache of what a hop named earlier). */
static int frag_is_local(const struct hc_net_check *c, const struct hc_net_pair *p)
{
    const struct hc_net_node *n = &c->nodes[p->from];
    return (n->mtu > 0 && n->mtu < p->size) || (n->master_mtu > 0 && n->master_mtu < p->size);
}

/* The node a pair that could not be probed waits on: the target when it has no storage address
 * (no probe can be aimed at it), else the source (its agent did not answer or could not probe). */
static size_t np_cause(const struct hc_net_check *c, const struct hc_net_pair *p)
{
    return c->nodes[p->to].addr[0] ? p->from : p->to;
}

static void tally_add(struct tally *t, const struct hc_net_check *c, const struct hc_net_pair *p)
{
    int own;
    t->total++;
    if (p->result != HC_NET_OK || t->failed == 0)
        t->size = p->size; /* the size that failed, when pairs of several sizes are mixed */
    if (p->result == HC_NET_OK)
        return;
    t->failed++;
    switch (p->result) {
    case HC_NET_FRAG_NEEDED:
        if (frag_is_local(c, p)) {
            t->local++;
            span_add(&t->local_min, &t->local_max, p->path_mtu);
            break;
        }
        t->frag++;
        span_add(&t->frag_min, &t->frag_max, p->path_mtu);
        break;
    case HC_NET_BLACKHOLE:
        t->bh++;
        break;
    case HC_NET_UNREACHABLE:
        t->unr++;
        break;
    case HC_NET_NEIGHBOR_UNRESOLVED:
        t->neigh++;
        break;
    default:
        t->np++;
        /* A node's finding tells its own reason, not the first peer's ("no storage address known
         * for n2" in n1's finding named the wrong node). */
        own = t->focus && np_cause(c, p) + 1 == t->focus;
        if (!t->np_detail[0] || (own && !t->np_own)) {
            snprintf(t->np_detail, sizeof(t->np_detail), "%s", p->detail ? p->detail : "");
            t->np_own = own;
        }
        break;
    }
    if (p->result != HC_NET_NOT_PROBED)
        span_add(&t->ok_min, &t->ok_max, p->largest_ok);
}

/* The failure that dominates a tally (probed failures before unprobed ones). */
static enum cause tally_cause(const struct tally *t)
{
    if (t->failed == 0)
        return CAUSE_NONE;
    if (t->local + t->frag + t->bh + t->unr == 0)
        return t->np ? CAUSE_NOT_PROBED : CAUSE_NONE;
    if (t->local + t->frag >= t->bh && t->local + t->frag >= t->unr)
        return CAUSE_FRAG;
    return t->bh >= t->unr ? CAUSE_BLACKHOLE : CAUSE_UNREACHABLE;
}

/* "1504" or "1504-1508". */
static void span_text(int lo, int hi, char *buf, size_t len)
{
    if (lo == hi)
        snprintf(buf, len, "%d", lo);
    else
        snprintf(buf, len, "%d-%d", lo, hi);
}

/* The size the observations say passes: the smallest largest-passing or frag-needed MTU. */
static int tally_passes(const struct tally *t)
{
    int v = 0;
    if (t->ok_min > 0)
        v = t->ok_min;
    if (t->frag_min > 0 && (v == 0 || t->frag_min < v))
        v = t->frag_min;
    if (t->local_min > 0 && (v == 0 || t->local_min < v))
        v = t->local_min;
    return v;
}

/* An MTU to suggest when the network cannot be raised: the standard size that passes. */
static int suggest_mtu(int passes, int mtu)
{
    if (passes >= mtu || passes <= 0)
        return mtu;
    if (passes >= 9000)
        return 9000;
    return passes >= 1500 ? 1500 : passes;
}

/* Appends "; " + text to buf. */
static void part_add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void part_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t l = strlen(buf);
    va_list ap;
    if (l && l + 2 < len) {
        memcpy(buf + l, "; ", 3);
        l += 2;
    }
    va_start(ap, fmt);
    vsnprintf(buf + l, len - l, fmt, ap);
    va_end(ap);
}

/* "9000-byte probes to and from n2: 4 of 4 pairs fail (2 do not fit the sender's own MTU of
 * 1500 bytes (EMSGSIZE); 2 vanish while small probes pass, largest passing packet 1500
 * bytes)". where: "to and from n2", "between n1 and n2", "". */
static void describe(const struct tally *t, const char *where, char *buf, size_t len)
{
    char parts[768] = "", span[32] = "";
    const char *sp = where[0] ? " " : "";
    if (t->failed == 0) {
        snprintf(buf, len, "every %d-byte probe%s%s passes", t->size, sp, where);
        return;
    }
    if (t->local) {
        span_text(t->local_min, t->local_max, span, sizeof(span));
        part_add(parts, sizeof(parts),
                 "%d do not fit the sender's own MTU of %s bytes "
                 "(EMSGSIZE)",
                 t->local, span);
    }
    if (t->frag) {
        span_text(t->frag_min, t->frag_max, span, sizeof(span));
        part_add(parts, sizeof(parts),
                 "%d draw \"fragmentation needed\" naming MTU %s: a "
                 "routed hop with that MTU",
                 t->frag, t->frag_min ? span : "?");
    }
    if (t->bh && t->ok_min) {
        span_text(t->ok_min, t->ok_max, span, sizeof(span));
        part_add(parts, sizeof(parts),
                 "%d vanish while small probes pass, largest passing "
                 "packet %s bytes",
                 t->bh, span);
    } else if (t->bh) {
        part_add(parts, sizeof(parts), "%d vanish while small probes pass", t->bh);
    }
    if (t->unr)
        part_add(parts, sizeof(parts), "%d go unanswered even at small sizes", t->unr);
    if (t->np)
        part_add(parts, sizeof(parts), "%d could not run: %s", t->np, t->np_detail);
    if (t->neigh)
        part_add(parts, sizeof(parts),
                 "%d could not resolve the peer's address: a neighbour table is full", t->neigh);
    snprintf(buf, len, "%d-byte probes%s%s: %d of %d pairs fail (%s)", t->size, sp, where,
             t->failed, t->total, parts);
}

/* --- node configuration --------------------------------------------------------------------- */

int hc_net_node_verdict(const struct hc_net_node *n, int mtu, char *why, size_t why_len, char *fix,
                        size_t fix_len)
{
    why[0] = fix[0] = '\0';
    if (!n->iface[0]) {
        snprintf(why, why_len,
                 "%s has no storage interface on record and no interface carries "
                 "its address %s",
                 n->name, n->address);
        snprintf(fix, fix_len,
                 "nodes brought in by 'hcctl cluster create' or 'node add' "
                 "(--storage-interface IFACE) have one on record; a node that joined by itself "
                 "is checked on the interface that carries the address it joined with");
        return 2;
    }
    if (!n->state[0]) {
        snprintf(why, why_len, "%s has no interface %s", n->name, n->iface);
        snprintf(fix, fix_len,
                 "check 'ip link' on %s: the storage interface was renamed or "
                 "removed",
                 n->name);
        return 2;
    }
    if (strcmp(n->state, "up") != 0 && strcmp(n->state, "unknown") != 0) {
        snprintf(why, why_len, "%s on %s is %s", n->iface, n->name, n->state);
        snprintf(fix, fix_len, "bring %s up on %s and check its cable and switch port", n->iface,
                 n->name);
        return 2;
    }
    if (!n->addr[0]) {
        snprintf(why, why_len, "%s on %s has no IPv4 address", n->iface, n->name);
        snprintf(fix, fix_len, "give %s its storage address on %s", n->iface, n->name);
        return 2;
    }
    if (n->mtu > 0 && n->mtu < mtu) {
        snprintf(why, why_len, "%s on %s has MTU %d, below the cluster's %d", n->iface, n->name,
                 n->mtu, mtu);
        snprintf(fix, fix_len, "set %s MTU on %s to %d: hcctl net set-mtu %d", n->iface, n->name,
                 mtu, mtu);
        return 2;
    }
    if (n->master_mtu > 0 && n->master_mtu < mtu) {
        snprintf(why, why_len, "%s on %s hangs on %s, whose MTU is %d, below the cluster's %d",
                 n->iface, n->name, n->master, n->master_mtu, mtu);
        snprintf(fix, fix_len, "set the MTU of %s on %s to %d (ip link set dev %s mtu %d)",
                 n->master, n->name, mtu, n->master, mtu);
        return 2;
    }
    if (n->port_mtu > 0 && n->port_mtu < mtu) {
        snprintf(why, why_len,
                 "%s on %s leaves through %s, whose MTU is %d, below the "
                 "cluster's %d",
                 n->iface, n->name, n->port, n->port_mtu, mtu);
        snprintf(fix, fix_len, "set the MTU of %s on %s to %d (ip link set dev %s mtu %d)", n->port,
                 n->name, mtu, n->port, mtu);
        return 2;
    }
    if (n->mtu > mtu) {
        snprintf(why, why_len,
                 "%s on %s has MTU %d, above the cluster's %d: TCP adapts, but "
                 "other traffic may send frames the others drop",
                 n->iface, n->name, n->mtu, mtu);
        snprintf(fix, fix_len, "set %s MTU on %s to %d: hcctl net set-mtu %d", n->iface, n->name,
                 mtu, mtu);
        return 1;
    }
    return 0;
}

/* --- findings ------------------------------------------------------------------------------- */

struct ctx {
    const struct hc_net_check *c;
    struct hc_net_index ix;
    char *bad;      /* per node: explained by itself (config error or agent failure) */
    char *named;    /* per node: named by a path finding (scope node or segment) */
    size_t words;   /* 64-bit words of one bitset of nodes */
    uint64_t *fail; /* per node: its failing peers among the nodes neither bad nor named */
    json_t *errors, *warnings;
};

static json_t *finding(const char *severity, const char *scope, const char *message,
                       const char *fix)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "severity", severity, "scope", scope, "message",
                     message, "fix", fix);
}

static void add(struct ctx *x, json_t *f)
{
    int error = strcmp(hc_json_str(f, "severity", ""), "error") == 0;
    json_array_append_new(error ? x->errors : x->warnings, f);
}

/* --- indexes and bitsets -------------------------------------------------------------------- */

static void bit_set(uint64_t *bits, size_t i)
{
    bits[i / 64] |= 1ull << (i % 64);
}

static int bit_has(const uint64_t *bits, size_t i)
{
    return (int)((bits[i / 64] >> (i % 64)) & 1);
}

/* The first set bit at or after i, or n when there is none below n. */
static size_t bit_next(const uint64_t *bits, size_t n, size_t i)
{
    for (size_t w = i / 64; w * 64 < n; w++) {
        uint64_t v = bits[w] & (w == i / 64 ? ~0ull << (i % 64) : ~0ull);
        if (v) {
            size_t b = w * 64 + (size_t)__builtin_ctzll(v);
            return b < n ? b : n;
        }
    }
    return n;
}

static size_t bit_count(const uint64_t *bits, size_t words)
{
    size_t k = 0;
    for (size_t w = 0; w < words; w++)
        k += (size_t)__builtin_popcountll(bits[w]);
    return k;
}

static uint64_t *fail_row(const struct ctx *x, size_t i)
{
    return x->fail + i * x->words;
}

/* A pair the path steps leave alone: a node explains it by itself, or a full neighbour table
 * does (neighbour_findings). */
static int explained(const struct ctx *x, const struct hc_net_pair *p)
{
    return x->bad[p->from] || x->bad[p->to] || p->result == HC_NET_NEIGHBOR_UNRESOLVED;
}

/* x->fail from the failing pairs among the nodes neither bad nor named (both directions). */
static void fail_bits(struct ctx *x)
{
    const struct hc_net_check *c = x->c;
    memset(x->fail, 0, c->nnodes * x->words * sizeof(uint64_t));
    for (size_t k = 0; k < c->npairs; k++) {
        const struct hc_net_pair *p = &c->pairs[k];
        if (p->result == HC_NET_OK || explained(x, p) || x->named[p->from] || x->named[p->to])
            continue;
        bit_set(fail_row(x, p->from), p->to);
        bit_set(fail_row(x, p->to), p->from);
    }
}

/* What the tally of a node's pairs keeps: every pair, or only those among good nodes, or only
 * those with one peer (peer + 1), or only those with a node of one group. */
struct node_filter {
    int good_only;
    size_t peer;
    const uint32_t *group_of;
    uint32_t group;
};

static int filter_keeps(const struct ctx *x, const struct node_filter *f, size_t i,
                        const struct hc_net_pair *p)
{
    size_t other = p->from == i ? p->to : p->from;
    if (f->good_only && explained(x, p))
        return 0;
    if (f->peer && other + 1 != f->peer)
        return 0;
    return !f->group_of || f->group_of[other] == f->group;
}

/* The pairs touching node i (dir: 0 both ways, 1 from i, 2 toward i) that f keeps, tallied in
 * pair order (the two lists merged). */
static void node_tally_into(struct tally *t, const struct ctx *x, size_t i, int dir,
                            const struct node_filter *f)
{
    const struct hc_net_index *ix = &x->ix;
    const uint32_t *a = ix->by_from + ix->from_off[i], *ae = ix->by_from + ix->from_off[i + 1];
    const uint32_t *b = ix->by_to + ix->to_off[i], *be = ix->by_to + ix->to_off[i + 1];
    if (dir == 2)
        a = ae;
    if (dir == 1)
        b = be;
    while (a < ae || b < be) {
        uint32_t k;
        if (b == be || (a < ae && *a <= *b)) {
            k = *a++;
            b += b < be && *b == k; /* a pair from i to i, in both lists: once */
        } else {
            k = *b++;
        }
        if (filter_keeps(x, f, i, &x->c->pairs[k]))
            tally_add(t, x->c, &x->c->pairs[k]);
    }
}

/* Pairs touching node i (dir: 0 both ways, 1 from i, 2 toward i), optionally among good nodes
 * only. */
static struct tally node_tally(const struct ctx *x, size_t i, int dir, int good_only)
{
    struct tally t = {.focus = i + 1};
    struct node_filter f = {.good_only = good_only};
    node_tally_into(&t, x, i, dir, &f);
    return t;
}

/* --- findings by node ----------------------------------------------------------------------- */

static void node_finding(struct ctx *x, size_t i, const char *severity, const char *message,
                         const char *fix, const struct tally *t)
{
    json_t *f = finding(severity, "node", message, fix);
    json_object_set_new(f, "node", json_string(x->c->nodes[i].name));
    json_object_set_new(f, "pairs_failed", json_integer(t->failed));
    json_object_set_new(f, "pairs_total", json_integer(t->total));
    add(x, f);
}

/* Step 1: nodes that explain their own failures. */
static void config_findings(struct ctx *x)
{
    const struct hc_net_check *c = x->c;
    for (size_t i = 0; i < c->nnodes; i++) {
        const struct hc_net_node *n = &c->nodes[i];
        char why[512], fix[512], seen[400], msg[1024];
        int v = hc_net_node_verdict(n, c->mtu, why, sizeof(why), fix, sizeof(fix));
        struct tally t = node_tally(x, i, 0, 0);
        if (v == 2 || n->agent_ok == 0)
            x->bad[i] = 1;
        if (v == 0 && n->agent_ok == 0) {
            struct tally in = node_tally(x, i, 2, 0);
            int bh = tally_cause(&in) == CAUSE_BLACKHOLE;
            snprintf(why, sizeof(why), "the agent on %s did not answer the probe request (%s)",
                     n->name, n->agent_error);
            char size[32] = "small";
            if (tally_passes(&in) > 0)
                snprintf(size, sizeof(size), "~%d-byte", tally_passes(&in));
            if (bh)
                snprintf(fix, sizeof(fix),
                         "the switch port toward %s (or its NIC or cable) "
                         "passes only %s frames: raise it to %d+; where management and storage "
                         "share a network this also stalls the agent's HTTPS",
                         n->name, size, c->mtu);
            else
                snprintf(fix, sizeof(fix),
                         "check that hcagent runs on %s and that the "
                         "controller reaches it (hcctl node show %s)",
                         n->name, n->name);
            if (in.failed) {
                describe(&in, "toward it", seen, sizeof(seen));
                snprintf(msg, sizeof(msg), "%s; %s", why, seen);
            } else {
                snprintf(msg, sizeof(msg), "%s", why);
            }
            node_finding(x, i, "error", msg, fix, &t);
            continue;
        }
        if (v == 0)
            continue;
        if (t.failed) {
            char where[96];
            snprintf(where, sizeof(where), "to and from %s", n->name);
            describe(&t, where, seen, sizeof(seen));
            snprintf(msg, sizeof(msg), "%s; %s", why, seen);
        } else {
            snprintf(msg, sizeof(msg), "%s", why);
        }
        node_finding(x, i, v == 2 ? "error" : "warning", msg, fix, &t);
    }
}

/* The fix for a path that passes only `passes` bytes toward or around `who`. */
static void path_fix(const struct ctx *x, enum cause cause, const struct tally *t, const char *who,
                     char *fix, size_t len)
{
    int mtu = x->c->mtu, passes = tally_passes(t);
    switch (cause) {
    case CAUSE_FRAG:
        snprintf(fix, len,
                 "a router on %s's storage path forwards only %d-byte packets: raise "
                 "the MTU of its interfaces to %d+, or keep %s on the same L2 segment as the "
                 "others",
                 who, passes, mtu, who);
        break;
    case CAUSE_BLACKHOLE:
        snprintf(fix, len,
                 "the switch port toward %s (or its NIC or cable) passes only ~%d-byte "
                 "frames: raise it to %d+ (or the whole fabric)",
                 who, passes ? passes : 1500, mtu);
        break;
    case CAUSE_UNREACHABLE:
        snprintf(fix, len, "check %s's storage link, its address and its switch port (VLAN)", who);
        break;
    default:
        snprintf(fix, len, "re-run the check once the agents answer");
        break;
    }
}

/* --- neighbour tables ----------------------------------------------------------------------- */

/* The thresholds to advise for a host that needs `need` entries and was seen holding `seen`:
 * nothing collected below need (gc_thresh1), the defaults' proportions above (x4, x8). */
static void neigh_advice(long need, long seen, long *t1, long *t2, long *t3)
{
    long base = need > seen ? need : seen;
    base = (base + 127) / 128 * 128;
    *t1 = base;
    *t2 = 4 * base;
    *t3 = 8 * base;
}

/* "n1, n2, n3 and 37 more": at most 8 names of the nodes in bits, then the count left. */
static void names_text(const struct ctx *x, const uint64_t *bits, char *buf, size_t len)
{
    size_t n = x->c->nnodes, shown = 0, total = bit_count(bits, x->words), l;
    buf[0] = '\0';
    for (size_t i = bit_next(bits, n, 0); i < n && shown < 8; i = bit_next(bits, n, i + 1)) {
        l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", shown++ ? ", " : "", x->c->nodes[i].name);
    }
    l = strlen(buf);
    if (total > shown)
        snprintf(buf + l, len - l, " and %zu more", total - shown);
}

static json_t *names_json(const struct ctx *x, const uint64_t *bits)
{
    json_t *a = json_array();
    size_t n = x->c->nnodes;
    for (size_t i = bit_next(bits, n, 0); i < n; i = bit_next(bits, n, i + 1))
        json_array_append_new(a, json_string(x->c->nodes[i].name));
    return a;
}

/* One finding about the nodes in bits: scope node for one, scope nodes (with their names) for
 * several. */
static void nodes_finding(struct ctx *x, const uint64_t *bits, const char *severity,
                          const char *message, const char *fix, const struct tally *t)
{
    size_t count = bit_count(bits, x->words);
    json_t *f = finding(severity, count == 1 ? "node" : "nodes", message, fix);
    if (count == 1)
        json_object_set_new(f, "node",
                            json_string(x->c->nodes[bit_next(bits, x->c->nnodes, 0)].name));
    else
        json_object_set_new(f, "nodes", names_json(x, bits));
    json_object_set_new(f, "pairs_failed", json_integer(t->failed));
    json_object_set_new(f, "pairs_total", json_integer(t->total));
    add(x, f);
}

/* Full neighbour tables (an error: pairs went unresolved) and tables too small for the cluster
 * (a warning), each one finding over the nodes concerned (docs/net.md "Neighbour tables"). */
static void neighbour_findings(struct ctx *x)
{
    const struct hc_net_check *c = x->c;
    size_t nodes = c->cluster_nodes > c->nnodes ? c->cluster_nodes : c->nnodes;
    long need = hc_net_neigh_need(nodes), max_entries = 0, max_fulls = 0, t3 = 0, t2 = 0;
    size_t nfull = 0, nsmall = 0;
    uint64_t *full = calloc(x->words + 1, sizeof(*full)),
             *small = calloc(x->words + 1, sizeof(*small));
    struct tally tf = {0}, ts = {0};
    char names[400], msg[1024], fix[512];
    long a1, a2, a3;
    if (!full || !small)
        goto cleanup;
    for (size_t i = 0; i < c->nnodes; i++) {
        const struct hc_net_neigh_table *t = &c->nodes[i].neigh;
        if (!t->known)
            continue;
        if (hc_net_neigh_full(t)) {
            bit_set(full, i), nfull++;
        } else if (t->thresh2 < need || t->entries >= t->thresh2) {
            bit_set(small, i), nsmall++;
        } else {
            continue;
        }
        max_entries = t->entries > max_entries ? t->entries : max_entries;
        max_fulls = t->fulls > max_fulls ? t->fulls : max_fulls;
        t3 = t3 == 0 || t->thresh3 < t3 ? t->thresh3 : t3;
        t2 = t2 == 0 || t->thresh2 < t2 ? t->thresh2 : t2;
    }
    for (size_t k = 0; k < c->npairs; k++) {
        const struct hc_net_pair *p = &c->pairs[k];
        if (bit_has(full, p->from) || bit_has(full, p->to))
            tally_add(&tf, c, p);
        if (bit_has(small, p->from) || bit_has(small, p->to))
            tally_add(&ts, c, p);
    }
    neigh_advice(need, max_entries, &a1, &a2, &a3);
    snprintf(fix, sizeof(fix),
             "raise the neighbour table thresholds on %s: sysctl -w "
             "net.ipv4.neigh.default.gc_thresh1=%ld net.ipv4.neigh.default.gc_thresh2=%ld "
             "net.ipv4.neigh.default.gc_thresh3=%ld (and in /etc/sysctl.d/ to keep them), then "
             "run the check again",
             nfull + nsmall == 1 ? "that host" : "those hosts", a1, a2, a3);
    if (nfull) {
        names_text(x, full, names, sizeof(names));
        snprintf(msg, sizeof(msg),
                 "the neighbour (ARP) %s %s %s full (up to %ld entries, gc_thresh3 %ld, "
                 "up to %ld new entries refused during the check): %d of %d pairs could not "
                 "resolve the peer's address (neighbor_unresolved); this is the %s, "
                 "not the network",
                 nfull == 1 ? "table of" : "tables of the hosts of", names,
                 nfull == 1 ? "is" : "are", max_entries, t3, max_fulls, tf.neigh, tf.total,
                 nfull == 1 ? "host's table" : "hosts' tables");
        nodes_finding(x, full, "error", msg, fix, &tf);
    }
    if (nsmall) {
        names_text(x, small, names, sizeof(names));
        snprintf(msg, sizeof(msg),
                 "the neighbour (ARP) %s%s keeps %ld entries before it collects them by "
                 "force (gc_thresh2; gc_thresh3 %ld), and holds up to %ld now; a %zu-node cluster "
                 "needs about %ld per host (a peer on the storage and on the management network "
                 "each, and spare): past gc_thresh2 live peers are re-resolved under load, past "
                 "gc_thresh3 some are not resolved at all",
                 nsmall == 1 ? "table of " : "table of each of the hosts of ", names, t2, t3,
                 max_entries, nodes, need);
        nodes_finding(x, small, "warning", msg, fix, &ts);
    }
cleanup:
    free(full);
    free(small);
}

/* Step 2: every pair among good nodes fails. */
static int fabric_finding(struct ctx *x, size_t ngood)
{
    const struct hc_net_check *c = x->c;
    struct tally t = {0};
    char msg[1024], fix[512], seen[400];
    for (size_t k = 0; k < c->npairs; k++)
        if (!explained(x, &c->pairs[k]))
            tally_add(&t, c, &c->pairs[k]);
    if (t.total == 0 || t.failed < t.total || (ngood < 3 && ngood != c->nnodes))
        return 0;
    int passes = tally_passes(&t), fallback = suggest_mtu(passes, c->mtu);
    describe(&t, "between every pair of nodes", seen, sizeof(seen));
    snprintf(msg, sizeof(msg), "every pair fails: %s", seen);
    if (tally_cause(&t) == CAUSE_FRAG)
        snprintf(fix, sizeof(fix),
                 "every path crosses a router with MTU %d: raise it to %d+, "
                 "or run the cluster at what it passes: hcctl net set-mtu %d",
                 passes, c->mtu, fallback);
    else
        snprintf(fix, sizeof(fix),
                 "the switch (every port, or a hop all nodes cross) passes "
                 "only ~%d-byte frames: raise its MTU to %d+ (9216 on most switches), or run the "
                 "cluster at what it passes: hcctl net set-mtu %d",
                 passes ? passes : 1500, c->mtu, fallback);
    json_t *f = finding("error", "fabric", msg, fix);
    json_object_set_new(f, "pairs_failed", json_integer(t.failed));
    json_object_set_new(f, "pairs_total", json_integer(t.total));
    add(x, f);
    return 1;
}

/* Step 3: a good node whose pairs (both ways, or all of one direction) fail. */
static void path_node_findings(struct ctx *x)
{
    const struct hc_net_check *c = x->c;
    for (size_t i = 0; i < c->nnodes; i++) {
        if (x->bad[i])
            continue;
        struct tally both = node_tally(x, i, 0, 1), out = node_tally(x, i, 1, 1),
                     in = node_tally(x, i, 2, 1);
        const struct tally *t = &both;
        char where[96], seen[400], fix[512];
        const char *name = c->nodes[i].name;
        if (both.total > 0 && both.failed == both.total)
            snprintf(where, sizeof(where), "to and from %s", name);
        else if (out.total >= 2 && out.failed == out.total)
            snprintf(where, sizeof(where), "from %s", name), t = &out;
        else if (in.total >= 2 && in.failed == in.total)
            snprintf(where, sizeof(where), "toward %s", name), t = &in;
        else
            continue;
        x->named[i] = 1;
        describe(t, where, seen, sizeof(seen));
        path_fix(x, tally_cause(t), t, name, fix, sizeof(fix));
        node_finding(x, i, "error", seen, fix, t);
    }
}

/* --- segments: two groups of nodes that fail only with each other --------------------------- */

/* "{n1, n2, ..., n8 and 492 more}": the nodes of bits, at most 8 by name. */
/* The clause on what passes between two groups, and the fix. */
static void segment_fix(const struct ctx *x, const struct tally *t, char *why, size_t why_len,
                        char *fix, size_t fix_len)
{
    int mtu = x->c->mtu, passes = tally_passes(t);
    switch (tally_cause(t)) {
    case CAUSE_FRAG:
        snprintf(why, why_len, "a routed hop between them forwards only %d-byte packets", passes);
        snprintf(fix, fix_len,
                 "raise the MTU of the router (its interfaces) between the two groups to %d+, or "
                 "keep both groups on one L2 segment",
                 mtu);
        break;
    case CAUSE_UNREACHABLE:
        snprintf(why, why_len, "the two groups do not reach each other even at small sizes");
        snprintf(fix, fix_len,
                 "check the link or trunk between their switches: is it up, does it carry the "
                 "storage VLAN, do their routes meet");
        break;
    case CAUSE_NOT_PROBED:
        snprintf(why, why_len, "the probes between them could not run");
        snprintf(fix, fix_len, "re-run the check once the agents answer");
        break;
    default:
        snprintf(why, why_len,
                 "a link or trunk between their switches passes only ~%d-byte packets",
                 passes ? passes : 1500);
        snprintf(fix, fix_len,
                 "raise the MTU of the link or trunk between the two groups' switches (every "
                 "port on it, and any switch between them) to %d+ (9216 on most switches)",
                 mtu);
        break;
    }
}

/* One finding for two groups (a's and b's nodes), when every pair between them fails. */
static void segment_finding(struct ctx *x, const uint64_t *a, const uint64_t *b,
                            const uint32_t *group_of, uint32_t gb)
{
    const struct hc_net_check *c = x->c;
    size_t n = c->nnodes, na = bit_count(a, x->words), nb = bit_count(b, x->words);
    struct tally t = {0};
    struct node_filter f = {.group_of = group_of, .group = gb};
    for (size_t i = bit_next(a, n, 0); i < n; i = bit_next(a, n, i + 1))
        node_tally_into(&t, x, i, 0, &f);
    if (t.total == 0 || t.failed < t.total)
        return; /* some pairs pass: not a segment cut off, leave it to the pairs */
    char names_a[1024], names_b[1024], seen[400], why[256], fix[512], msg[3072];
    names_text(x, a, names_a, sizeof(names_a));
    names_text(x, b, names_b, sizeof(names_b));
    describe(&t, "between the two groups", seen, sizeof(seen));
    segment_fix(x, &t, why, sizeof(why), fix, sizeof(fix));
    snprintf(msg, sizeof(msg),
             "every pair between {%s} (%zu node%s) and {%s} (%zu node%s) fails: %s; %s", names_a,
             na, na == 1 ? "" : "s", names_b, nb, nb == 1 ? "" : "s", seen, why);
    json_t *fj = finding("error", "segment", msg, fix);
    json_object_set_new(fj, "nodes_a", names_json(x, a));
    json_object_set_new(fj, "nodes_b", names_json(x, b));
    json_object_set_new(fj, "pairs_failed", json_integer(t.failed));
    json_object_set_new(fj, "pairs_total", json_integer(t.total));
    add(x, fj);
    for (size_t i = bit_next(a, n, 0); i < n; i = bit_next(a, n, i + 1))
        x->named[i] = 1;
    for (size_t i = bit_next(b, n, 0); i < n; i = bit_next(b, n, i + 1))
        x->named[i] = 1;
}

struct by_row {
    const uint64_t *row;
    size_t words;
    uint32_t node;
};

static int by_row_cmp(const void *pa, const void *pb)
{
    const struct by_row *a = pa, *b = pb;
    int d = memcmp(a->row, b->row, a->words * sizeof(uint64_t));
    return d ? d : (a->node > b->node) - (a->node < b->node);
}

/* Step 4: the nodes (neither bad nor named) grouped by their set of failing peers. Two groups
 * each of whose failing peers are exactly the other group, one of them of at least two nodes,
 * are one finding: the link, trunk or hop between their switches (a bad inter-switch link fails
 * |A| x |B| pairs; named pair by pair it would be 250,000 findings at 500 + 500 nodes). */
static void segment_findings(struct ctx *x)
{
    size_t n = x->c->nnodes, w = x->words, m = 0, ngroups = 0;
    struct by_row *order = calloc(n + 1, sizeof(*order));
    uint32_t *group_of = malloc((n + 1) * sizeof(*group_of));
    uint64_t *members = NULL; /* per group: its nodes */
    if (!order || !group_of)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        group_of[i] = UINT32_MAX;
        if (bit_count(fail_row(x, i), w))
            order[m++] = (struct by_row){.row = fail_row(x, i), .words = w, .node = (uint32_t)i};
    }
    qsort(order, m, sizeof(*order), by_row_cmp);
    if (!(members = calloc((m + 1) * w, sizeof(uint64_t))))
        goto cleanup;
    for (size_t k = 0; k < m; k++) {
        if (k && memcmp(order[k].row, order[k - 1].row, w * sizeof(uint64_t)) != 0)
            ngroups++;
        group_of[order[k].node] = (uint32_t)ngroups;
        bit_set(members + ngroups * w, order[k].node);
    }
    ngroups += m > 0;
    for (size_t k = 0; k < m; k++) {
        size_t a = order[k].node, b = bit_next(order[k].row, n, 0);
        uint32_t ga = group_of[a], gb = group_of[b];
        const uint64_t *ma = members + (size_t)ga * w, *mb = members + (size_t)gb * w;
        /* once per group, from its lowest node, toward the group whose lowest node is higher */
        if (ga == gb || bit_next(ma, n, 0) != a || a > bit_next(mb, n, 0))
            continue;
        if (memcmp(order[k].row, mb, w * sizeof(uint64_t)) != 0 ||
            memcmp(fail_row(x, b), ma, w * sizeof(uint64_t)) != 0 ||
            (bit_count(ma, w) < 2 && bit_count(mb, w) < 2))
            continue;
        segment_finding(x, ma, mb, group_of, gb);
    }
cleanup:
    free(order);
    free(group_of);
    free(members);
}

/* --- findings by pair ----------------------------------------------------------------------- */

static void pair_finding(struct ctx *x, size_t a, size_t b)
{
    const struct hc_net_check *c = x->c;
    struct tally t = {0};
    struct node_filter f = {.peer = b + 1};
    char where[160], seen[400], fix[512], msg[600];
    node_tally_into(&t, x, a, 0, &f);
    snprintf(where, sizeof(where), "between %s and %s", c->nodes[a].name, c->nodes[b].name);
    describe(&t, where, seen, sizeof(seen));
    snprintf(msg, sizeof(msg), "%s; both nodes reach the others", seen);
    snprintf(fix, sizeof(fix),
             "check the path only %s and %s share (a link, trunk or "
             "hop between their switches): it passes only ~%d-byte packets; raise it to "
             "%d+",
             c->nodes[a].name, c->nodes[b].name, tally_passes(&t), c->mtu);
    json_t *fj = finding("error", "pair", msg, fix);
    json_object_set_new(fj, "from", json_string(c->nodes[a].name));
    json_object_set_new(fj, "to", json_string(c->nodes[b].name));
    json_object_set_new(fj, "pairs_failed", json_integer(t.failed));
    json_object_set_new(fj, "pairs_total", json_integer(t.total));
    add(x, fj);
}

/* The failing pairs of nodes past the first HC_NET_MAX_PAIR_FINDINGS (those after a0/b0 in
 * node order), counted in one finding: `more` pairs of nodes among `nodes` nodes. */
static void more_pairs_finding(struct ctx *x, size_t a0, size_t b0, size_t more)
{
    const struct hc_net_check *c = x->c;
    struct tally t = {0};
    char *seen_node = calloc(c->nnodes + 1, 1); /* NULL: the nodes are not counted */
    char seen[400], fix[512], msg[640];
    size_t nodes = 0;
    for (size_t k = 0; k < c->npairs; k++) {
        const struct hc_net_pair *p = &c->pairs[k];
        size_t u = p->from < p->to ? p->from : p->to, v = p->from < p->to ? p->to : p->from;
        if ((u < a0 || (u == a0 && v <= b0)) || !bit_has(fail_row(x, u), v))
            continue;
        tally_add(&t, c, p);
        if (seen_node) {
            nodes += !seen_node[u] + !seen_node[v];
            seen_node[u] = seen_node[v] = 1;
        }
    }
    free(seen_node);
    describe(&t, "", seen, sizeof(seen));
    snprintf(msg, sizeof(msg), "%zu more pairs fail between nodes not named above (%zu nodes): %s",
             more, nodes, seen);
    snprintf(fix, sizeof(fix),
             "the result lists them (hcctl net check-jumbo --failures-only -o json): look for the "
             "links, trunks or hops their paths share and raise them to %d+",
             c->mtu);
    json_t *fj = finding("error", "pairs", msg, fix);
    json_object_set_new(fj, "more", json_integer((json_int_t)more));
    json_object_set_new(fj, "nodes_involved", json_integer((json_int_t)nodes));
    json_object_set_new(fj, "pairs_failed", json_integer(t.failed));
    json_object_set_new(fj, "pairs_total", json_integer(t.total));
    add(x, fj);
}

/* Step 5: the failing pairs nobody explained, one finding per unordered pair in node order, at
 * most HC_NET_MAX_PAIR_FINDINGS, then one for the rest. */
static void pair_findings(struct ctx *x)
{
    size_t n = x->c->nnodes, found = 0, more = 0, a0 = 0, b0 = 0;
    fail_bits(x); /* the segments named some more nodes */
    for (size_t a = 0; a < n; a++) {
        const uint64_t *row = fail_row(x, a);
        for (size_t b = bit_next(row, n, a + 1); b < n; b = bit_next(row, n, b + 1)) {
            if (found == HC_NET_MAX_PAIR_FINDINGS) {
                more++;
                continue;
            }
            pair_finding(x, a, b);
            found++;
            a0 = a;
            b0 = b;
        }
    }
    if (more)
        more_pairs_finding(x, a0, b0, more);
}

/* Fewer than two nodes: nothing was proven, and the result says so rather than passing
 * silently. */
static void no_pairs_finding(struct ctx *x)
{
    const struct hc_net_check *c = x->c;
    char msg[256];
    if (c->nnodes >= 2)
        return;
    if (c->nnodes == 1)
        snprintf(msg, sizeof(msg),
                 "one node (%s): there is no pair of nodes to probe, so there "
                 "is nothing to check",
                 c->nodes[0].name);
    else
        snprintf(msg, sizeof(msg), "no nodes: there is nothing to check");
    json_t *f = finding("info", "cluster", msg,
                        "add nodes (hcctl node add HOST), then check "
                        "again: the pairs they form are probed");
    json_object_set_new(f, "pairs_failed", json_integer(0));
    json_object_set_new(f, "pairs_total", json_integer(0));
    add(x, f);
}

json_t *hc_net_findings(const struct hc_net_check *c)
{
    struct ctx x = {.c = c, .errors = json_array(), .warnings = json_array()};
    size_t ngood = 0, n = c->nnodes;
    x.words = (n + 63) / 64;
    x.bad = calloc(n + 1, 1);
    x.named = calloc(n + 1, 1);
    x.fail = calloc(n * x.words + 1, sizeof(uint64_t));
    if (!x.bad || !x.named || !x.fail || hc_net_index_build(&x.ix, c) < 0) {
        /* never a silent pass: the failing pairs still fail the check, and this says why the
         * findings do not explain them */
        add(&x, finding("error", "cluster", "the findings could not be computed: out of memory",
                        "re-run the check; see the controller's memory"));
        goto cleanup;
    }
    config_findings(&x);
    neighbour_findings(&x);
    for (size_t i = 0; i < n; i++)
        ngood += !x.bad[i];
    if (!fabric_finding(&x, ngood)) {
        path_node_findings(&x);
        fail_bits(&x);
        segment_findings(&x);
        pair_findings(&x);
    }
    no_pairs_finding(&x);
cleanup:
    json_array_extend(x.errors, x.warnings);
    json_decref(x.warnings);
    hc_net_index_free(&x.ix);
    free(x.bad);
    free(x.named);
    free(x.fail);
    return x.errors;
}

/* --- one node's verification (net.set_mtu) -------------------------------------------------- */

void hc_net_summary(const struct hc_net_check *c, size_t node, char *msg, size_t len, char *fix,
                    size_t fix_len)
{
    struct tally t = {.focus = node + 1};
    char peers[512] = "", where[640];
    const char *name = c->nodes[node].name;
    size_t npeers = 0;
    msg[0] = fix[0] = '\0';
    for (size_t k = 0; k < c->npairs; k++) {
        const struct hc_net_pair *p = &c->pairs[k];
        tally_add(&t, c, p);
        size_t peer = p->from == node ? p->to : p->from;
        if (p->result == HC_NET_OK || strstr(peers, c->nodes[peer].name))
            continue;
        size_t l = strlen(peers);
        snprintf(peers + l, sizeof(peers) - l, "%s%s", npeers++ ? ", " : "", c->nodes[peer].name);
    }
    if (t.failed == 0)
        return;
    snprintf(where, sizeof(where), "between %s and %s", name, peers);
    describe(&t, where, msg, len);
    enum cause cause = tally_cause(&t);
    int passes = tally_passes(&t);
    if (cause == CAUSE_NOT_PROBED)
        snprintf(fix, fix_len,
                 "the agents could not probe after the change: check that %s still "
                 "answers at the new MTU (hcctl node show %s)",
                 name, name);
    else if (cause == CAUSE_FRAG)
        snprintf(fix, fix_len,
                 "a router %s forwards only %d-byte packets: raise the MTU of its "
                 "interfaces first",
                 where, passes);
    else if (cause == CAUSE_UNREACHABLE)
        snprintf(fix, fix_len,
                 "%s stops answering at the new MTU: check that its NIC and driver "
                 "support it and that its switch port allows it",
                 name);
    else
        snprintf(fix, fix_len,
                 "the switch ports %s pass only ~%d-byte frames: raise them (or "
                 "the whole fabric) first, then run set-mtu again",
                 where, passes ? passes : 1500);
}
