/*
 * The storage network as recorded (see net.h): the nodes' storage interfaces gathered from the
 * database, the directed pairs of a check (their interned detail texts, their per-node indexes),
 * the result document and where it is stored. The localisation (verdicts, findings) lives in
 * net_findings.c, the probes in controller/remote/net_probe.c.
 */
#include "controller/state/net.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/state/nodes.h"

/* --- detail texts -------------------------------------------------------------------------- */

/* A check's detail texts: each distinct text once, in 64 KiB blocks that never move (pairs point
 * into them), found again through an open-addressing hash table. A fault that fails 500,000
 * pairs with the agent's same sentence stores it once. */
#define STRINGS_BLOCK 65536
#define DETAIL_MAX 512 /* longer texts are cut (the agent's own are under 200 bytes) */

struct hc_net_strings {
    char **blocks;
    size_t nblocks, cap, used; /* used: bytes taken in the last block */
    const char **slots;        /* nslots, a power of two, at most half full */
    size_t nslots, count;
};

static void strings_free(struct hc_net_strings *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nblocks; i++)
        free(s->blocks[i]);
    free(s->blocks);
    free(s->slots);
    free(s);
}

static size_t strings_hash(const char *text)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *t = (const unsigned char *)text; *t; t++)
        h = (h ^ *t) * 1099511628211ull;
    return (size_t)h;
}

static int strings_grow(struct hc_net_strings *s)
{
    size_t n = s->nslots ? 2 * s->nslots : 64;
    const char **slots = calloc(n, sizeof(*slots));
    if (!slots)
        return -1;
    for (size_t i = 0; i < s->nslots; i++) {
        if (!s->slots[i])
            continue;
        size_t j = strings_hash(s->slots[i]) & (n - 1);
        while (slots[j])
            j = (j + 1) & (n - 1);
        slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = n;
    return 0;
}

/* A copy of text (len < DETAIL_MAX) in the last block, or in a new one. */
static const char *strings_store(struct hc_net_strings *s, const char *text, size_t len)
{
    if (!s->nblocks || s->used + len + 1 > STRINGS_BLOCK) {
        if (s->nblocks == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 16;
            char **blocks = realloc(s->blocks, cap * sizeof(*blocks));
            if (!blocks)
                return NULL;
            s->blocks = blocks;
            s->cap = cap;
        }
        if (!(s->blocks[s->nblocks] = malloc(STRINGS_BLOCK)))
            return NULL;
        s->nblocks++;
        s->used = 0;
    }
    char *copy = s->blocks[s->nblocks - 1] + s->used;
    memcpy(copy, text, len + 1);
    s->used += len + 1;
    return copy;
}

static const char *strings_intern(struct hc_net_check *c, const char *text)
{
    struct hc_net_strings *s = c->strings;
    if (!s && !(s = c->strings = calloc(1, sizeof(*s))))
        return NULL;
    if (2 * (s->count + 1) > s->nslots && strings_grow(s) < 0)
        return NULL;
    size_t i = strings_hash(text) & (s->nslots - 1);
    for (; s->slots[i]; i = (i + 1) & (s->nslots - 1))
        if (strcmp(s->slots[i], text) == 0)
            return s->slots[i];
    const char *copy = strings_store(s, text, strlen(text));
    if (copy) {
        s->slots[i] = copy;
        s->count++;
    }
    return copy;
}

void hc_net_pair_detail(struct hc_net_check *c, struct hc_net_pair *p, const char *fmt, ...)
{
    char text[DETAIL_MAX];
    va_list ap;
    p->detail = NULL;
    if (p->result == HC_NET_OK)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (text[0])
        p->detail = strings_intern(c, text);
}

void hc_net_check_clear(struct hc_net_check *c)
{
    if (!c)
        return;
    free(c->nodes);
    free(c->pairs);
    strings_free(c->strings);
    c->nodes = NULL;
    c->pairs = NULL;
    c->strings = NULL;
    c->nnodes = c->npairs = 0;
}

const char *hc_net_result_name(enum hc_net_result r)
{
    static const char *const names[] = {"ok",          "frag_needed", "blackhole",
                                        "unreachable", "not_probed",  "neighbor_unresolved"};
    return (size_t)r < HC_ARRAY_LEN(names) ? names[r] : "not_probed";
}

long hc_net_neigh_need(size_t n)
{
    return 2 * (long)(n ? n - 1 : 0) + 64;
}

/* --- interfaces ------------------------------------------------------------------------------ */

/* The addresses of an interface: the agent's "addresses" or the table's "addresses_json". */
static const json_t *iface_addresses(const json_t *it)
{
    const json_t *a = json_object_get(it, "addresses");
    return a ? a : json_object_get(it, "addresses_json");
}

/* 1 when one of the interface's addresses is `address` (any prefix length). */
static int iface_has_address(const json_t *it, const char *address)
{
    size_t i, len = strlen(address);
    const json_t *a;
    json_array_foreach(iface_addresses(it), i, a)
    {
        const char *s = json_string_value(a);
        if (s && strncmp(s, address, len) == 0 && (s[len] == '/' || s[len] == '\0'))
            return 1;
    }
    return 0;
}

static const json_t *iface_find(const json_t *ifaces, const char *name)
{
    size_t i;
    const json_t *it;
    json_array_foreach(ifaces, i, it)
    {
        if (name[0] && strcmp(hc_json_str(it, "name", ""), name) == 0)
            return it;
    }
    return NULL;
}

/* First IPv4 address of an interface, without its prefix length. */
static void iface_ipv4(const json_t *it, char *out, size_t len)
{
    size_t i;
    const json_t *a;
    out[0] = '\0';
    json_array_foreach(iface_addresses(it), i, a)
    {
        const char *s = json_string_value(a);
        if (s && !strchr(s, ':') && strchr(s, '.')) {
            snprintf(out, len, "%.*s", (int)strcspn(s, "/"), s);
            return;
        }
    }
}

/* Ports that carry traffic out of a bridge or bond: NICs (no kind), bonds, teams, VLANs. VM
 * taps and container veths on a bridge may run a smaller MTU without harming the host. */
static int iface_is_uplink(const json_t *it)
{
    const char *kind = hc_json_str(it, "kind", NULL);
    return !kind || !strcmp(kind, "bond") || !strcmp(kind, "team") || !strcmp(kind, "vlan");
}

/* The smallest-MTU uplink port under `name`, two levels deep (bridge -> bond -> NIC). */
static void iface_lowest_port(const json_t *ifaces, const char *name, int depth, char *port,
                              size_t len, int *mtu)
{
    size_t i;
    const json_t *it;
    json_array_foreach(ifaces, i, it)
    {
        const char *pname = hc_json_str(it, "name", "");
        if (strcmp(hc_json_str(it, "master", ""), name) != 0 || !iface_is_uplink(it))
            continue;
        int m = (int)hc_json_int(it, "mtu", 0);
        if (m > 0 && (*mtu == 0 || m < *mtu)) {
            *mtu = m;
            snprintf(port, len, "%s", pname);
        }
        if (depth > 0)
            iface_lowest_port(ifaces, pname, depth - 1, port, len, mtu);
    }
}

void hc_net_node_apply(struct hc_net_node *n, const json_t *ifaces)
{
    size_t i;
    const json_t *it = NULL;
    if (!n->iface[0]) {
        json_array_foreach(ifaces, i, it)
        {
            if (iface_has_address(it, n->address)) {
                snprintf(n->iface, sizeof(n->iface), "%s", hc_json_str(it, "name", ""));
                break;
            }
        }
    }
    n->addr[0] = n->state[0] = n->kind[0] = n->master[0] = n->port[0] = '\0';
    n->mtu = n->master_mtu = n->port_mtu = 0;
    if (!(it = iface_find(ifaces, n->iface)))
        return;
    n->mtu = (int)hc_json_int(it, "mtu", 0);
    snprintf(n->state, sizeof(n->state), "%s", hc_json_str(it, "state", "unknown"));
    snprintf(n->kind, sizeof(n->kind), "%s", hc_json_str(it, "kind", ""));
    snprintf(n->master, sizeof(n->master), "%s", hc_json_str(it, "master", ""));
    iface_ipv4(it, n->addr, sizeof(n->addr));
    const json_t *m = iface_find(ifaces, n->master);
    n->master_mtu = m ? (int)hc_json_int(m, "mtu", 0) : 0;
    iface_lowest_port(ifaces, n->iface, 1, n->port, sizeof(n->port), &n->port_mtu);
}

/* --- gathering ------------------------------------------------------------------------------ */

int hc_net_cluster_mtu(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT mtu FROM clusters ORDER BY created_at "
                                    "LIMIT 1",
                                    "");
    if (!rows)
        return -1;
    int mtu = (int)hc_json_int(json_array_get(rows, 0), "mtu", 0);
    json_decref(rows);
    return mtu;
}

static int gather_node(struct hc_db *db, const struct hc_node_row *row, struct hc_net_node *n,
                       struct hc_error *err)
{
    memset(n, 0, sizeof(*n));
    n->agent_ok = -1;
    snprintf(n->name, sizeof(n->name), "%s", row->name);
    snprintf(n->agent_url, sizeof(n->agent_url), "%s", row->agent_url);
    snprintf(n->address, sizeof(n->address), "%s", row->address);
    snprintf(n->iface, sizeof(n->iface), "%s",
             row->storage_interface ? row->storage_interface : "");
    json_t *ifaces = hc_db_query_json(db, err,
                                      "SELECT name, mtu, state, kind, master, addresses_json "
                                      "FROM interfaces WHERE node_id = ? ORDER BY name",
                                      "i", row->id);
    if (!ifaces)
        return -1;
    hc_net_node_apply(n, ifaces);
    json_decref(ifaces);
    return 0;
}

/* 1 when name is in names (NULL: every name is). */
static int name_wanted(const json_t *names, const char *name)
{
    size_t i;
    const json_t *v;
    if (!names)
        return 1;
    json_array_foreach(names, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return 1;
    }
    return 0;
}

/* 404 for a name in names that no joined node has. */
static int names_known(const struct hc_node_row *rows, size_t n, const json_t *names,
                       struct hc_error *err)
{
    size_t i;
    const json_t *v;
    json_array_foreach(names, i, v)
    {
        const char *name = json_string_value(v) ? json_string_value(v) : "";
        int found = 0;
        for (size_t j = 0; j < n; j++)
            found |= strcmp(rows[j].name, name) == 0;
        if (!found) {
            hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", name);
            return hc_error_hint(err, "see 'hcctl node list'");
        }
    }
    return 0;
}

int hc_net_gather(struct hc_db *db, const json_t *names, struct hc_net_check *c,
                  struct hc_error *err)
{
    struct hc_node_filter joined = {.state = "joined"};
    struct hc_node_row *rows = NULL;
    size_t n = 0;
    int rc = -1;
    if (hc_nodes_rows(db, &joined, &rows, &n, err) < 0 ||
        (names && names_known(rows, n, names, err) < 0))
        goto cleanup;
    c->cluster_nodes = n;
    c->nodes = calloc(n + 1, sizeof(*c->nodes));
    if (!c->nodes) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        goto cleanup;
    }
    c->nnodes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!name_wanted(names, rows[i].name))
            continue;
        if (gather_node(db, &rows[i], &c->nodes[c->nnodes], err) < 0)
            goto cleanup;
        c->nnodes++;
    }
    rc = 0;
cleanup:
    hc_node_rows_free(rows, n);
    return rc;
}

int hc_net_neigh_full(const struct hc_net_neigh_table *t)
{
    return t->known && (t->fulls > 0 || t->entries >= t->thresh3);
}

void hc_net_explain_neighbors(struct hc_net_check *c)
{
    for (size_t k = 0; k < c->npairs; k++) {
        struct hc_net_pair *p = &c->pairs[k];
        const struct hc_net_node *to = &c->nodes[p->to];
        if (p->result != HC_NET_UNREACHABLE || p->neighbor == HC_NET_NEIGH_UNKNOWN ||
            p->neighbor == HC_NET_NEIGH_RESOLVED || !hc_net_neigh_full(&to->neigh))
            continue;
        p->result = HC_NET_NEIGHBOR_UNRESOLVED;
        hc_net_pair_detail(c, p,
                           "no neighbour (ARP) answer from %s (%s): its host's neighbour table is "
                           "full (%ld entries, gc_thresh3 %ld, %ld new entries refused during the "
                           "check)",
                           to->name, hc_net_neighbor_name((enum hc_net_neighbor)p->neighbor),
                           to->neigh.entries, to->neigh.thresh3, to->neigh.fulls);
    }
}

const char *hc_net_neighbor_name(enum hc_net_neighbor n)
{
    static const char *const names[] = {"unknown", "none", "incomplete", "failed", "resolved"};
    return (size_t)n < HC_ARRAY_LEN(names) ? names[n] : "unknown";
}

enum hc_net_neighbor hc_net_neighbor_parse(const char *s)
{
    for (int n = HC_NET_NEIGH_NONE; n <= HC_NET_NEIGH_RESOLVED; n++)
        if (s && strcmp(s, hc_net_neighbor_name((enum hc_net_neighbor)n)) == 0)
            return (enum hc_net_neighbor)n;
    return HC_NET_NEIGH_UNKNOWN;
}

int hc_net_all_pairs(struct hc_net_check *c, struct hc_error *err)
{
    size_t n = c->nnodes, k = 0;
    free(c->pairs);
    c->pairs = NULL;
    c->npairs = 0;
    if (n > HC_NET_MAX_NODES)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "%zu nodes: a check covers at most %d", n,
                            HC_NET_MAX_NODES);
    c->pairs = calloc(n * (n ? n - 1 : 0) + 1, sizeof(*c->pairs));
    if (!c->pairs)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            if (a != b)
                c->pairs[k++] = (struct hc_net_pair){
                    .from = (uint32_t)a, .to = (uint32_t)b, .size = c->mtu, .rtt_ms = -1};
    c->npairs = k;
    return 0;
}

/* --- per-node indexes of the pairs --------------------------------------------------------- */

void hc_net_index_free(struct hc_net_index *ix)
{
    free(ix->from_off);
    free(ix->to_off);
    free(ix->by_from);
    free(ix->by_to);
    memset(ix, 0, sizeof(*ix));
}

int hc_net_index_build(struct hc_net_index *ix, const struct hc_net_check *c)
{
    size_t n = c->nnodes;
    ix->from_off = calloc(n + 2, sizeof(uint32_t));
    ix->to_off = calloc(n + 2, sizeof(uint32_t));
    ix->by_from = malloc((c->npairs + 1) * sizeof(uint32_t));
    ix->by_to = malloc((c->npairs + 1) * sizeof(uint32_t));
    if (!ix->from_off || !ix->to_off || !ix->by_from || !ix->by_to) {
        hc_net_index_free(ix);
        return -1;
    }
    for (size_t k = 0; k < c->npairs; k++) {
        ix->from_off[c->pairs[k].from + 2]++;
        ix->to_off[c->pairs[k].to + 2]++;
    }
    for (size_t i = 2; i <= n + 1; i++) {
        ix->from_off[i] += ix->from_off[i - 1];
        ix->to_off[i] += ix->to_off[i - 1];
    }
    /* off[i + 1] is node i's next free slot, and where its list ends once every pair is in */
    for (size_t k = 0; k < c->npairs; k++) {
        ix->by_from[ix->from_off[c->pairs[k].from + 1]++] = (uint32_t)k;
        ix->by_to[ix->to_off[c->pairs[k].to + 1]++] = (uint32_t)k;
    }
    return 0;
}

/* --- the result document -------------------------------------------------------------------- */

static json_t *int_or_null(int v)
{
    return v > 0 ? json_integer(v) : json_null();
}

static json_t *str_or_null(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

/* counts: the node's passing and failing pairs, both directions (NULL: not counted). */
static json_t *node_json(const struct hc_net_node *n, int mtu, const uint32_t *counts)
{
    char why[512], fix[512];
    int verdict = hc_net_node_verdict(n, mtu, why, sizeof(why), fix, sizeof(fix));
    json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "name", n->name, "interface",
                          str_or_null(n->iface), "address", str_or_null(n->addr), "mtu",
                          int_or_null(n->mtu), "state", str_or_null(n->state), "master",
                          str_or_null(n->master), "master_mtu", int_or_null(n->master_mtu), "ok",
                          verdict < 2 && n->agent_ok != 0);
    json_object_set_new(o, "port", str_or_null(n->port));
    json_object_set_new(o, "port_mtu", int_or_null(n->port_mtu));
    json_object_set_new(o, "problem", verdict ? json_string(why) : json_null());
    json_object_set_new(o, "agent_error",
                        n->agent_ok == 0 ? json_string(n->agent_error) : json_null());
    if (counts) {
        json_object_set_new(o, "pairs_ok", json_integer(counts[0]));
        json_object_set_new(o, "pairs_failed", json_integer(counts[1]));
    }
    json_object_set_new(
        o, "neighbor_table",
        n->neigh.known
            ? json_pack("{s:I, s:I, s:I, s:I, s:I}", "entries", (json_int_t)n->neigh.entries,
                        "gc_thresh1", (json_int_t)n->neigh.thresh1, "gc_thresh2",
                        (json_int_t)n->neigh.thresh2, "gc_thresh3", (json_int_t)n->neigh.thresh3,
                        "table_fulls", (json_int_t)n->neigh.fulls)
            : json_null());
    return o;
}

static json_t *pair_json(const struct hc_net_check *c, const struct hc_net_pair *p)
{
    return json_pack(
        "{s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:o}", "from", c->nodes[p->from].name, "to",
        c->nodes[p->to].name, "size", p->size, "result", hc_net_result_name(p->result), "path_mtu",
        int_or_null(p->path_mtu), "largest_ok", int_or_null(p->largest_ok), "rtt_ms",
        p->rtt_ms >= 0 ? json_real(p->rtt_ms) : json_null(), "detail", str_or_null(p->detail));
}

/* The pairs of the document: every one while there are at most HC_NET_LIST_ALL_PAIRS, else the
 * failing ones up to HC_NET_MAX_LISTED_PAIRS; counts[2*i] and [2*i+1] receive node i's passing
 * and failing pairs (both directions) when counts is not NULL. Sets *failed and *omitted. */
static json_t *pairs_json(const struct hc_net_check *c, uint32_t *counts, size_t *failed,
                          size_t *omitted)
{
    json_t *pairs = json_array();
    int all = c->npairs <= HC_NET_LIST_ALL_PAIRS;
    size_t listed = 0;
    *failed = *omitted = 0;
    for (size_t k = 0; k < c->npairs; k++) {
        const struct hc_net_pair *p = &c->pairs[k];
        int bad = p->result != HC_NET_OK;
        *failed += bad;
        if (counts) {
            counts[2 * p->from + bad]++;
            counts[2 * p->to + bad]++;
        }
        if (!all && !bad)
            continue;
        if (!all && listed == HC_NET_MAX_LISTED_PAIRS) {
            (*omitted)++;
            continue;
        }
        json_array_append_new(pairs, pair_json(c, p));
        listed++;
    }
    return pairs;
}

json_t *hc_net_result_json(const struct hc_net_check *c)
{
    json_t *nodes = json_array(), *findings = hc_net_findings(c);
    uint32_t *counts = calloc(2 * c->nnodes + 1, sizeof(*counts));
    size_t failed, omitted, i;
    int passed = 1;
    const json_t *f;
    json_t *pairs = pairs_json(c, counts, &failed, &omitted);
    for (size_t k = 0; k < c->nnodes; k++)
        json_array_append_new(nodes,
                              node_json(&c->nodes[k], c->mtu, counts ? counts + 2 * k : NULL));
    free(counts);
    json_array_foreach(findings, i, f)
    {
        passed &= strcmp(hc_json_str(f, "severity", ""), "error") != 0;
    }
    passed &= failed == 0;
    return json_pack("{s:i, s:i, s:s, s:b, s:{s:i, s:i, s:i}, s:o, s:o, s:s, s:i, s:o}", "mtu",
                     c->mtu, "payload_bytes", c->mtu - HC_IPV4_UDP_HEADERS, "mtu_source",
                     c->mtu_source ? c->mtu_source : "option", "passed", passed, "summary", "nodes",
                     (int)c->nnodes, "pairs", (int)c->npairs, "pairs_failed", (int)failed, "nodes",
                     nodes, "pairs", pairs, "pairs_listed",
                     c->npairs <= HC_NET_LIST_ALL_PAIRS ? "all" : "failures", "pairs_omitted",
                     (int)omitted, "findings", findings);
}

void hc_net_result_failures_only(json_t *res)
{
    json_t *pairs = json_object_get(res, "pairs"), *kept, *p;
    size_t i;
    if (!json_is_array(pairs) || !(kept = json_array()))
        return;
    json_array_foreach(pairs, i, p)
    {
        if (strcmp(hc_json_str(p, "result", "ok"), "ok") != 0)
            json_array_append(kept, p);
    }
    json_object_set_new(res, "pairs", kept);
    json_object_set_new(res, "pairs_listed", json_string("failures"));
    json_object_set_new(res, "failures_only", json_true());
}
