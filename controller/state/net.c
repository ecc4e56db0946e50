/*
 * The storage network as recorded (see net.h): the nodes' storage interfaces gathered from the
 * database, the directed pairs of a check, the result document and where it is stored. The
 * localisation (verdicts, findings) lives in net_findings.c, the probes in
 * controller/remote/net_probe.c.
 */
#include "controller/state/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/state/nodes.h"

void hc_net_check_clear(struct hc_net_check *c)
{
    if (!c)
        return;
    free(c->nodes);
    free(c->pairs);
    c->nodes = NULL;
    c->pairs = NULL;
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
        if (p->result != HC_NET_UNREACHABLE || !p->neighbor[0] ||
            strcmp(p->neighbor, "resolved") == 0 || !hc_net_neigh_full(&to->neigh))
            continue;
        p->result = HC_NET_NEIGHBOR_UNRESOLVED;
        snprintf(p->detail, sizeof(p->detail),
                 "no neighbour (ARP) answer from %s (%s): its host's neighbour table is full "
                 "(%ld entries, gc_thresh3 %ld, %ld new entries refused during the check)",
                 to->name, p->neighbor, to->neigh.entries, to->neigh.thresh3, to->neigh.fulls);
    }
}

int hc_net_all_pairs(struct hc_net_check *c, struct hc_error *err)
{
    size_t n = c->nnodes, k = 0;
    free(c->pairs);
    c->npairs = 0;
    c->pairs = calloc(n * (n ? n - 1 : 0) + 1, sizeof(*c->pairs));
    if (!c->pairs)
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            if (a != b)
                c->pairs[k++] = (struct hc_net_pair){.from = a, .to = b, .size = c->mtu};
    c->npairs = k;
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

static json_t *node_json(const struct hc_net_node *n, int mtu)
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
    return json_pack("{s:s, s:s, s:i, s:s, s:o, s:o, s:o, s:s}", "from", c->nodes[p->from].name,
                     "to", c->nodes[p->to].name, "size", p->size, "result",
                     hc_net_result_name(p->result), "path_mtu", int_or_null(p->path_mtu),
                     "largest_ok", int_or_null(p->largest_ok), "rtt_ms",
                     p->rtt_ms >= 0 ? json_real(p->rtt_ms) : json_null(), "detail", p->detail);
}

json_t *hc_net_result_json(const struct hc_net_check *c)
{
    json_t *nodes = json_array(), *pairs = json_array();
    json_t *findings = hc_net_findings(c);
    size_t failed = 0, i;
    int passed = 1;
    const json_t *f;
    for (size_t k = 0; k < c->nnodes; k++)
        json_array_append_new(nodes, node_json(&c->nodes[k], c->mtu));
    for (size_t k = 0; k < c->npairs; k++) {
        json_array_append_new(pairs, pair_json(c, &c->pairs[k]));
        failed += c->pairs[k].result != HC_NET_OK;
    }
    json_array_foreach(findings, i, f)
    {
        passed &= strcmp(hc_json_str(f, "severity", ""), "error") != 0;
    }
    passed &= failed == 0;
    return json_pack("{s:i, s:i, s:s, s:b, s:{s:i, s:i, s:i}, s:o, s:o, s:o}", "mtu", c->mtu,
                     "payload_bytes", c->mtu - HC_IPV4_UDP_HEADERS, "mtu_source",
                     c->mtu_source ? c->mtu_source : "option", "passed", passed, "summary", "nodes",
                     (int)c->nnodes, "pairs", (int)c->npairs, "pairs_failed", (int)failed, "nodes",
                     nodes, "pairs", pairs, "findings", findings);
}

int hc_net_store_result(struct hc_db *db, const char *op_id, const json_t *result,
                        struct hc_error *err)
{
    char *text = hc_json_dump(result);
    if (!text)
        return hc_error_set(err, HC_E(INTERNAL), "cannot serialise the result of %s", op_id);
    int rc = hc_db_run(db, err,
                       "UPDATE operations SET result_json = ?, updated_at = ? "
                       "WHERE id = ?",
                       "sis", text, hc_now_ms(), op_id);
    free(text);
    return rc < 0 ? -1 : 0;
}
