/*
 * The storage network check (see net.h): gathering the nodes' storage interfaces, probing the
 * directed pairs through the agents in one fan-out, and the result document. The localisation
 * (findings) lives in net_findings.c.
 */
#include "controller/state/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/remote/agent_client.h"
#include "controller/ops/ops.h"
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
    static const char *const names[] = {"ok", "frag_needed", "blackhole", "unreachable",
                                        "not_probed"};
    return (size_t)r < HC_ARRAY_LEN(names) ? names[r] : "not_probed";
}

static enum hc_net_result result_parse(const char *s)
{
    for (int r = HC_NET_OK; r <= HC_NET_UNREACHABLE; r++)
        if (s && strcmp(s, hc_net_result_name((enum hc_net_result)r)) == 0)
            return (enum hc_net_result)r;
    return HC_NET_NOT_PROBED;
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
    json_t *rows = hc_db_query_json(db, err, "SELECT mtu FROM clusters ORDER BY created_at "
                                             "LIMIT 1", "");
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
            hc_error_set(err, 404, HC_ERR_NOT_FOUND, "node '%s' not found", name);
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
    c->nodes = calloc(n + 1, sizeof(*c->nodes));
    if (!c->nodes) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "out of memory");
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

int hc_net_all_pairs(struct hc_net_check *c, struct hc_error *err)
{
    size_t n = c->nnodes, k = 0;
    free(c->pairs);
    c->npairs = 0;
    c->pairs = calloc(n * (n ? n - 1 : 0) + 1, sizeof(*c->pairs));
    if (!c->pairs)
        return hc_error_set(err, 500, HC_ERR_INTERNAL, "out of memory");
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            if (a != b)
                c->pairs[k++] = (struct hc_net_pair){.from = a, .to = b, .size = c->mtu};
    c->npairs = k;
    return 0;
}

/* --- probing -------------------------------------------------------------------------------- */

#define NET_IFACES_TIMEOUT_MS 5000 /* GET /v1/interfaces beside the probes */

/* One agent call of the fan-out: what it was for. */
struct probe_req {
    size_t node;
    int ifaces; /* 1: GET /v1/interfaces, 0: POST /v1/net/probe */
    json_t *body;
    char url[2048];
};

static void pair_not_probed(struct hc_net_pair *p, const char *fmt, const char *arg)
{
    p->result = HC_NET_NOT_PROBED;
    p->path_mtu = p->largest_ok = 0;
    p->rtt_ms = -1;
    snprintf(p->detail, sizeof(p->detail), fmt, arg);
}

/* The probe body of source s: its pairs whose target has an address. NULL when none. */
static json_t *probe_body(struct hc_net_check *c, size_t s)
{
    json_t *targets = json_array();
    for (size_t k = 0; k < c->npairs; k++) {
        struct hc_net_pair *p = &c->pairs[k];
        if (p->from != s)
            continue;
        if (!c->nodes[p->to].addr[0]) {
            pair_not_probed(p, "no storage address known for %s", c->nodes[p->to].name);
            continue;
        }
        json_array_append_new(targets, json_pack("{s:s, s:i}", "address", c->nodes[p->to].addr,
                                                 "size", p->size));
    }
    if (json_array_size(targets) == 0) {
        json_decref(targets);
        return NULL;
    }
    json_t *body = json_pack("{s:o, s:I, s:b}", "targets", targets, "timeout_ms",
                             (json_int_t)c->probe_timeout_ms, "search", c->search);
    if (c->nodes[s].addr[0])
        json_object_set_new(body, "source", json_string(c->nodes[s].addr));
    return body;
}

/* The agent's search sends up to ~16 rounds of probes, each waiting at most the probe timeout. */
static long probe_call_timeout(const struct hc_net_check *c)
{
    return c->probe_timeout_ms * (c->search ? 18 : 2) + 3000;
}

static size_t probe_prepare(struct hc_net_check *c, int refresh, struct probe_req *reqs,
                            struct hc_http_call *calls)
{
    size_t ncalls = 0;
    struct hc_error err;
    for (size_t s = 0; s < c->nnodes; s++) {
        json_t *body = probe_body(c, s);
        int owned = 0;
        for (int kind = 0; kind < 2; kind++) {
            if ((kind == 0 && !body) || (kind == 1 && !refresh))
                continue;
            struct probe_req *r = &reqs[ncalls];
            *r = (struct probe_req){.node = s, .ifaces = kind, .body = kind ? NULL : body};
            if (hc_agent_url(r->url, sizeof(r->url), c->nodes[s].agent_url,
                             kind ? "/v1/interfaces" : "/v1/net/probe", &err) < 0)
                continue;
            calls[ncalls] = (struct hc_http_call){
                .method = kind ? "GET" : "POST", .url = r->url, .body = r->body,
                .timeout_ms = kind ? NET_IFACES_TIMEOUT_MS : probe_call_timeout(c), .user = r};
            owned |= kind == 0;
            ncalls++;
        }
        if (body && !owned)
            json_decref(body); /* its URL did not fit: no call owns it */
    }
    return ncalls;
}

/* The error text of a failed call (transport, or an agent's refusal). */
static void call_error(const struct hc_http_call *call, const char *node, char *buf, size_t len)
{
    struct hc_error e = {0};
    if (!call->ok) {
        snprintf(buf, len, "%s", call->err.message);
    } else if (call->resp.status == 404) {
        snprintf(buf, len, "the agent on %s does not know %s (an older hcagent?)", node,
                 call->url);
    } else if (hc_error_from_json(&e, call->resp.body, (int)call->resp.status) == 0) {
        snprintf(buf, len, "the agent on %s answered HTTP %ld: %s", node, call->resp.status,
                 e.message);
    } else {
        snprintf(buf, len, "the agent on %s answered HTTP %ld", node, call->resp.status);
    }
}

static int call_good(const struct hc_http_call *call)
{
    return call->ok && call->resp.status >= 200 && call->resp.status < 300 &&
           json_is_object(call->resp.body);
}

/* The agent's result for pair p (matched by address and size). */
static const json_t *result_for(const json_t *results, const char *addr, int size)
{
    size_t i;
    const json_t *r;
    json_array_foreach(results, i, r)
    {
        if (strcmp(hc_json_str(r, "address", ""), addr) == 0 &&
            hc_json_int(r, "size", size) == size)
            return r;
    }
    return NULL;
}

static void pair_from_json(struct hc_net_pair *p, const json_t *r)
{
    const json_t *rtt = json_object_get(r, "rtt_ms");
    const char *name = hc_json_str(r, "result", "?");
    p->result = result_parse(name);
    p->largest_ok = (int)hc_json_int(r, "largest_ok", 0);
    p->path_mtu = (int)hc_json_int(r, "path_mtu", 0);
    p->rtt_ms = json_is_number(rtt) ? json_number_value(rtt) : -1;
    snprintf(p->detail, sizeof(p->detail), "%s", hc_json_str(r, "detail", ""));
    if (p->result == HC_NET_OK)
        p->path_mtu = p->path_mtu > p->size ? p->path_mtu : p->size;
    else if (p->path_mtu == 0)
        p->path_mtu = p->largest_ok;
    if (p->result == HC_NET_NOT_PROBED && !p->detail[0])
        snprintf(p->detail, sizeof(p->detail), "the agent answered an unknown result '%s'", name);
}

static void probe_apply(struct hc_net_check *c, const struct hc_http_call *call)
{
    const struct probe_req *r = call->user;
    struct hc_net_node *src = &c->nodes[r->node];
    const json_t *results = json_object_get(call->resp.body, "results");
    if (!call_good(call) || !json_is_array(results)) {
        src->agent_ok = 0;
        call_error(call, src->name, src->agent_error, sizeof(src->agent_error));
        if (call_good(call))
            snprintf(src->agent_error, sizeof(src->agent_error),
                     "the agent on %s answered without results", src->name);
    } else {
        src->agent_ok = 1;
    }
    for (size_t k = 0; k < c->npairs; k++) {
        struct hc_net_pair *p = &c->pairs[k];
        if (p->from != r->node || !c->nodes[p->to].addr[0])
            continue;
        const json_t *res = src->agent_ok == 1
                                ? result_for(results, c->nodes[p->to].addr, p->size)
                                : NULL;
        if (res)
            pair_from_json(p, res);
        else if (src->agent_ok == 1)
            pair_not_probed(p, "the agent returned no result for %s", c->nodes[p->to].addr);
        else
            pair_not_probed(p, "%s", src->agent_error);
    }
}

void hc_net_probe(struct hc_http_client *client, struct hc_net_check *c, int refresh)
{
    size_t max = 2 * c->nnodes + 1, ncalls;
    struct probe_req *reqs = calloc(max, sizeof(*reqs));
    struct hc_http_call *calls = calloc(max, sizeof(*calls));
    if (c->probe_timeout_ms <= 0)
        c->probe_timeout_ms = HC_NET_PROBE_TIMEOUT_MS;
    for (size_t k = 0; k < c->npairs; k++)
        pair_not_probed(&c->pairs[k], "%s", "not probed");
    if (!reqs || !calls)
        goto cleanup;
    ncalls = probe_prepare(c, refresh, reqs, calls);
    hc_http_fanout(client, calls, ncalls, HC_NET_MAX_PARALLEL);
    /* Fresh interfaces first, so the verdicts judge what the probes met; a node's probe
     * answer, applied after, has the last word on whether its agent answered. */
    for (size_t i = 0; i < ncalls; i++) {
        const struct probe_req *r = calls[i].user;
        struct hc_net_node *n = &c->nodes[r->node];
        const json_t *list = json_object_get(calls[i].resp.body, "interfaces");
        if (!r->ifaces)
            continue;
        if (call_good(&calls[i]) && json_is_array(list)) {
            hc_net_node_apply(n, list);
            n->agent_ok = 1;
        } else {
            n->agent_ok = 0;
            call_error(&calls[i], n->name, n->agent_error, sizeof(n->agent_error));
        }
    }
    for (size_t i = 0; i < ncalls; i++)
        if (!((const struct probe_req *)calls[i].user)->ifaces)
            probe_apply(c, &calls[i]);
    for (size_t i = 0; i < ncalls; i++) {
        hc_http_response_clear(&calls[i].resp);
        json_decref(reqs[i].body);
    }
cleanup:
    free(reqs);
    free(calls);
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
    json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "name", n->name,
                          "interface", str_or_null(n->iface), "address", str_or_null(n->addr),
                          "mtu", int_or_null(n->mtu), "state", str_or_null(n->state), "master",
                          str_or_null(n->master), "master_mtu", int_or_null(n->master_mtu), "ok",
                          verdict < 2 && n->agent_ok != 0);
    json_object_set_new(o, "port", str_or_null(n->port));
    json_object_set_new(o, "port_mtu", int_or_null(n->port_mtu));
    json_object_set_new(o, "problem", verdict ? json_string(why) : json_null());
    json_object_set_new(o, "agent_error", n->agent_ok == 0 ? json_string(n->agent_error)
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
                     "payload_bytes", c->mtu - HC_NET_IP_UDP_HEADERS, "mtu_source",
                     c->mtu_source ? c->mtu_source : "option", "passed", passed, "summary",
                     "nodes", (int)c->nnodes, "pairs", (int)c->npairs, "pairs_failed",
                     (int)failed, "nodes", nodes, "pairs", pairs, "findings", findings);
}

/* --- the whole check ------------------------------------------------------------------------ */

json_t *hc_net_check_run(struct hc_db *db, struct hc_http_client *client,
                         const struct hc_net_check_opts *o, struct hc_error *err)
{
    struct hc_net_check c = {.probe_timeout_ms = o->probe_timeout_ms, .search = 1};
    json_t *doc = NULL;
    char at[40];
    int64_t t0 = hc_mono_ms();
    int cluster_mtu = hc_net_cluster_mtu(db, err);
    if (cluster_mtu < 0)
        return NULL;
    c.mtu = o->mtu > 0 ? o->mtu : cluster_mtu > 0 ? cluster_mtu : HC_NET_DEFAULT_MTU;
    c.mtu_source = o->mtu > 0 ? "option" : cluster_mtu > 0 ? "cluster" : "default";
    if (hc_net_gather(db, o->nodes, &c, err) < 0 || hc_net_all_pairs(&c, err) < 0)
        goto cleanup;
    hc_net_probe(client, &c, 1);
    doc = hc_net_result_json(&c);
    json_object_set_new(doc, "cluster_mtu", int_or_null(cluster_mtu));
    json_object_set_new(doc, "checked_at", json_string(hc_time_format(hc_now_ms(), at,
                                                                      sizeof(at))));
    json_object_set_new(doc, "duration_ms", json_integer(hc_mono_ms() - t0));
cleanup:
    hc_net_check_clear(&c);
    return doc;
}

int hc_net_store_result(struct hc_db *db, const char *op_id, const json_t *result,
                        struct hc_error *err)
{
    char *text = hc_json_dump(result);
    if (!text)
        return hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot serialise the result of %s",
                            op_id);
    int rc = hc_db_run(db, err, "UPDATE operations SET result_json = ?, updated_at = ? "
                       "WHERE id = ?", "sis", text, hc_now_ms(), op_id);
    free(text);
    return rc < 0 ? -1 : 0;
}

/* The first error finding of a failed result as err (code mtu_check_failed). */
static int check_failure(const json_t *doc, struct hc_error *err)
{
    size_t i;
    const json_t *f, *first = NULL;
    json_array_foreach(json_object_get(doc, "findings"), i, f)
    {
        if (!first && strcmp(hc_json_str(f, "severity", ""), "error") == 0)
            first = f;
    }
    hc_error_set(err, 422, "mtu_check_failed", "jumbo frame check at MTU %lld failed: %s",
                 (long long)hc_json_int(doc, "mtu", 0),
                 first ? hc_json_str(first, "message", "") : "some pairs fail");
    return hc_error_hint(err, "%s; the nodes stay joined: fix it, then 'hcctl net check-jumbo'",
                         first ? hc_json_str(first, "fix", "see 'hcctl net check-jumbo'")
                               : "see 'hcctl net check-jumbo'");
}

int hc_net_check_after_join(struct hc_op_ctx *ctx, struct hc_error *err)
{
    struct hc_db *db = hc_op_db(ctx);
    struct hc_net_check_opts o = {0};
    struct hc_http_client *client = NULL;
    json_t *doc = NULL;
    int rc = -1;
    int mtu = hc_net_cluster_mtu(db, err);
    if (mtu <= 0)
        return mtu;
    hc_op_waiting(ctx, "every pair of nodes to pass %d-byte probes", mtu);
    if (!(client = hc_agent_client_new(hc_op_controller(ctx), hc_op_db(ctx), err)) ||
        !(doc = hc_net_check_run(db, client, &o, err)))
        goto cleanup;
    json_t *stored = json_pack("{s:O}", "net_check", doc);
    if (hc_net_store_result(db, hc_op_id(ctx), stored, err) < 0) {
        json_decref(stored);
        goto cleanup;
    }
    json_decref(stored);
    rc = hc_json_bool(doc, "passed", 0) ? 0 : check_failure(doc, err);
    HC_INFO("operation %s: jumbo frame check at MTU %d %s", hc_op_id(ctx), mtu,
            rc == 0 ? "passed" : "failed");
cleanup:
    hc_op_waiting(ctx, NULL);
    json_decref(doc);
    hc_http_client_free(client);
    return rc;
}
