/*
 * Localisation of a probed check (see net.h): from the configured MTUs and the directed-pair
 * results to findings that name what is wrong and say how to fix it.
 *
 * 1. A node whose own configuration cannot carry the MTU (interface missing, down, MTU below it,
 *    a bridge, bond or uplink port below it) or whose agent could not run the probes is named by
 *    itself: its failing pairs are explained by it.
 * 2. Among the remaining ("good") nodes, when every pair fails, the fabric is named (a switch
 *    that passes no jumbo frames, or a hop every node crosses).
 * 3. Otherwise a good node all of whose pairs fail (or all pairs from it, or all pairs toward it,
 *    when there are at least two) is named: its switch port, NIC or cable, or a routed hop on its
 *    path when the probes drew "fragmentation needed".
 * 4. What is left is named by pair.
 * A check of fewer than two nodes has no pair to prove: it says so in a finding of severity
 * `info` (its nodes' configuration is still judged).
 * Every finding carries the observed sizes (largest passing packet, the MTU an ICMP error named)
 * and a concrete fix.
 */
#include <stdarg.h>
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
            snprintf(t->np_detail, sizeof(t->np_detail), "%s", p->detail);
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
    char *bad;   /* per node: explained by itself (config error or agent failure) */
    char *named; /* per node: named by a path finding */
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

/* A pair the path steps leave alone: a node explains it by itself, or a full neighbour table
 * does (neighbour_findings). */
static int explained(const struct ctx *x, const struct hc_net_pair *p)
{
    return x->bad[p->from] || x->bad[p->to] || p->result == HC_NET_NEIGHBOR_UNRESOLVED;
}

/* Pairs touching node i (dir: 0 both ways, 1 from i, 2 toward i), optionally among good nodes
 * only (and without the pairs a neighbour table explains). */
static struct tally node_tally(const struct ctx *x, size_t i, int dir, int good_only)
{
    struct tally t = {.focus = i + 1};
    for (size_t k = 0; k < x->c->npairs; k++) {
        const struct hc_net_pair *p = &x->c->pairs[k];
        int from = p->from == i, to = p->to == i;
        if ((dir == 0 && !from && !to) || (dir == 1 && !from) || (dir == 2 && !to))
            continue;
        if (good_only && explained(x, p))
            continue;
        tally_add(&t, x->c, p);
    }
    return t;
}

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

/* "n1, n2, n3 and 37 more" of the nodes marked in sel. */
static void names_text(const struct hc_net_check *c, const char *sel, size_t count, char *buf,
                       size_t len)
{
    size_t shown = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < c->nnodes && shown < 8; i++) {
        if (!sel[i])
            continue;
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%s", shown ? ", " : "", c->nodes[i].name);
        shown++;
    }
    if (count > shown) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, " and %zu more", count - shown);
    }
}

/* One finding about the nodes marked in sel: scope node for one, scope nodes (with their names)
 * for several. */
static void nodes_finding(struct ctx *x, const char *sel, size_t count, const char *severity,
                          const char *message, const char *fix, const struct tally *t)
{
    const struct hc_net_check *c = x->c;
    json_t *f = finding(severity, count == 1 ? "node" : "nodes", message, fix);
    json_t *names = json_array();
    for (size_t i = 0; i < c->nnodes; i++) {
        if (!sel[i])
            continue;
        if (count == 1)
            json_object_set_new(f, "node", json_string(c->nodes[i].name));
        json_array_append_new(names, json_string(c->nodes[i].name));
    }
    if (count > 1)
        json_object_set_new(f, "nodes", names);
    else
        json_decref(names);
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
    char *full = calloc(c->nnodes + 1, 1), *small = calloc(c->nnodes + 1, 1);
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
            full[i] = 1, nfull++;
        } else if (t->thresh2 < need || t->entries >= t->thresh2) {
            small[i] = 1, nsmall++;
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
        if (full[p->from] || full[p->to])
            tally_add(&tf, c, p);
        if (small[p->from] || small[p->to])
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
        names_text(c, full, nfull, names, sizeof(names));
        snprintf(msg, sizeof(msg),
                 "the neighbour (ARP) %s %s %s full (up to %ld entries, gc_thresh3 %ld, "
                 "up to %ld new entries refused during the check): %d of %d pairs could not "
                 "resolve the peer's address (neighbor_unresolved); this is the %s, "
                 "not the network",
                 nfull == 1 ? "table of" : "tables of the hosts of", names,
                 nfull == 1 ? "is" : "are", max_entries, t3, max_fulls, tf.neigh, tf.total,
                 nfull == 1 ? "host's table" : "hosts' tables");
        nodes_finding(x, full, nfull, "error", msg, fix, &tf);
    }
    if (nsmall) {
        names_text(c, small, nsmall, names, sizeof(names));
        snprintf(msg, sizeof(msg),
                 "the neighbour (ARP) %s%s keeps %ld entries before it collects them by "
                 "force (gc_thresh2; gc_thresh3 %ld), and holds up to %ld now; a %zu-node cluster "
                 "needs about %ld per host (a peer on the storage and on the management network "
                 "each, and spare): past gc_thresh2 live peers are re-resolved under load, past "
                 "gc_thresh3 some are not resolved at all",
                 nsmall == 1 ? "table of " : "table of each of the hosts of ", names, t2, t3,
                 max_entries, nodes, need);
        nodes_finding(x, small, nsmall, "warning", msg, fix, &ts);
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

/* Step 4: the failing pairs nobody explained, one finding per unordered pair. */
static void pair_findings(struct ctx *x)
{
    const struct hc_net_check *c = x->c;
    for (size_t a = 0; a < c->nnodes; a++) {
        for (size_t b = a + 1; b < c->nnodes; b++) {
            if (x->bad[a] || x->bad[b] || x->named[a] || x->named[b])
                continue;
            struct tally t = {0};
            for (size_t k = 0; k < c->npairs; k++) {
                const struct hc_net_pair *p = &c->pairs[k];
                if (((p->from == a && p->to == b) || (p->from == b && p->to == a)) &&
                    p->result != HC_NET_NEIGHBOR_UNRESOLVED)
                    tally_add(&t, c, p);
            }
            if (t.failed == 0)
                continue;
            char where[160], seen[400], fix[512], msg[600];
            snprintf(where, sizeof(where), "between %s and %s", c->nodes[a].name, c->nodes[b].name);
            describe(&t, where, seen, sizeof(seen));
            snprintf(msg, sizeof(msg), "%s; both nodes reach the others", seen);
            snprintf(fix, sizeof(fix),
                     "check the path only %s and %s share (a link, trunk or "
                     "hop between their switches): it passes only ~%d-byte packets; raise it to "
                     "%d+",
                     c->nodes[a].name, c->nodes[b].name, tally_passes(&t), c->mtu);
            json_t *f = finding("error", "pair", msg, fix);
            json_object_set_new(f, "from", json_string(c->nodes[a].name));
            json_object_set_new(f, "to", json_string(c->nodes[b].name));
            json_object_set_new(f, "pairs_failed", json_integer(t.failed));
            json_object_set_new(f, "pairs_total", json_integer(t.total));
            add(x, f);
        }
    }
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
    size_t ngood = 0;
    x.bad = calloc(c->nnodes + 1, 1);
    x.named = calloc(c->nnodes + 1, 1);
    if (x.bad && x.named) {
        config_findings(&x);
        neighbour_findings(&x);
        for (size_t i = 0; i < c->nnodes; i++)
            ngood += !x.bad[i];
        if (!fabric_finding(&x, ngood)) {
            path_node_findings(&x);
            pair_findings(&x);
        }
        no_pairs_finding(&x);
    }
    json_array_extend(x.errors, x.warnings);
    json_decref(x.warnings);
    free(x.bad);
    free(x.named);
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
