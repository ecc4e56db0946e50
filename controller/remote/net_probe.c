/*
 * The probes of a storage network check (see net_probe.h): one fan-out of agent calls, each
 * source's POST /v1/net/probe with all its targets (and, with refresh, GET /v1/interfaces of
 * every node), whose answers fill the pairs and nodes of the check.
 */
#include "controller/remote/net_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/ops/test_hooks.h"
#include "controller/remote/agent_client.h"

static enum hc_net_result result_parse(const char *s)
{
    static const enum hc_net_result probed[] = {HC_NET_OK, HC_NET_FRAG_NEEDED, HC_NET_BLACKHOLE,
                                                HC_NET_UNREACHABLE, HC_NET_NEIGHBOR_UNRESOLVED};
    for (size_t i = 0; i < sizeof(probed) / sizeof(probed[0]); i++)
        if (s && strcmp(s, hc_net_result_name(probed[i])) == 0)
            return probed[i];
    return HC_NET_NOT_PROBED;
}

/* --- probing -------------------------------------------------------------------------------- */

#define NET_IFACES_TIMEOUT_MS 5000 /* GET /v1/interfaces beside the probes */

/* One agent call of the fan-out: what it was for. A probe's targets are the pairs
 * pairs[0..npairs) (indexes into c->pairs), in the order of its body's targets. */
struct probe_req {
    struct hc_net_check *check;
    size_t node;
    int ifaces; /* 1: GET /v1/interfaces, 0: POST /v1/net/probe */
    json_t *body;
    uint32_t *pairs; /* into the hc_net_index's by_from */
    size_t npairs;
    struct probe_req *probe; /* an interfaces call: the same node's probe call, if any */
    int applied;             /* its answer is in the check */
    char url[2048];
};

static void pair_not_probed(struct hc_net_check *c, struct hc_net_pair *p, const char *fmt,
                            const char *arg)
{
    p->result = HC_NET_NOT_PROBED;
    p->path_mtu = p->largest_ok = 0;
    p->rtt_ms = -1;
    p->neighbor = HC_NET_NEIGH_UNKNOWN;
    hc_net_pair_detail(c, p, fmt, arg);
}

/* A check whose result does not list its passing pairs (HC_NET_LIST_ALL_PAIRS): its agents
 * answer compactly and only a sample of its blackholes is searched (docs/net.md "At scale"). */
static int large_check(const struct hc_net_check *c)
{
    return (long)c->npairs > hc_test_net_large_check_pairs(HC_NET_LIST_ALL_PAIRS);
}

/* The probe body of source s: its pairs whose target has an address (their indexes go to
 * r->pairs, in the targets' order). NULL when none. */
static json_t *probe_body(struct hc_net_check *c, const struct hc_net_index *x, size_t s,
                          struct probe_req *r)
{
    json_t *targets = json_array();
    r->npairs = 0;
    for (size_t j = x->from_off[s]; j < x->from_off[s + 1]; j++) {
        struct hc_net_pair *p = &c->pairs[x->by_from[j]];
        if (!c->nodes[p->to].addr[0]) {
            pair_not_probed(c, p, "no storage address known for %s", c->nodes[p->to].name);
            continue;
        }
        r->pairs[r->npairs++] = x->by_from[j];
        json_array_append_new(
            targets, json_pack("{s:s, s:i}", "address", c->nodes[p->to].addr, "size", p->size));
    }
    if (json_array_size(targets) == 0) {
        json_decref(targets);
        return NULL;
    }
    json_t *body = json_pack("{s:o, s:I, s:b}", "targets", targets, "timeout_ms",
                             (json_int_t)c->probe_timeout_ms, "search", c->search);
    /* A check whose result does not list its passing pairs needs nothing of them but that they
     * passed: the agent names them by index (an older agent ignores it and answers in full). */
    if (large_check(c))
        json_object_set_new(body, "compact", json_true());
    if (c->nodes[s].addr[0])
        json_object_set_new(body, "source", json_string(c->nodes[s].addr));
    return body;
}

/* The agent's search sends up to ~16 rounds of probes, each waiting at most the probe timeout,
 * for each window of targets it probes at once. */
static long probe_call_timeout(const struct hc_net_check *c)
{
    long windows = ((long)c->nnodes + HC_NET_AGENT_WINDOW - 2) / HC_NET_AGENT_WINDOW;
    return c->probe_timeout_ms * (c->search ? 18 : 2) * (windows > 0 ? windows : 1) + 3000;
}

static void call_done(struct hc_http_call *call);

static size_t probe_prepare(struct hc_net_check *c, const struct hc_net_index *x, int refresh,
                            struct probe_req *reqs, struct hc_http_call *calls)
{
    size_t ncalls = 0;
    struct hc_error err;
    for (size_t s = 0; s < c->nnodes; s++) {
        struct probe_req probe = {.pairs = x->by_from + x->from_off[s]};
        json_t *body = probe_body(c, x, s, &probe);
        int owned = 0;
        for (int kind = 0; kind < 2; kind++) {
            if ((kind == 0 && !body) || (kind == 1 && !refresh))
                continue;
            struct probe_req *r = &reqs[ncalls];
            *r = (struct probe_req){
                .check = c, .node = s, .ifaces = kind, .body = kind ? NULL : body};
            if (kind && owned)
                r->probe = &reqs[ncalls - 1];
            if (!kind) {
                r->pairs = probe.pairs;
                r->npairs = probe.npairs;
            }
            if (hc_agent_url(r->url, sizeof(r->url), c->nodes[s].agent_url,
                             kind ? "/v1/interfaces" : "/v1/net/probe", &err) < 0)
                continue;
            calls[ncalls] = (struct hc_http_call){.method = kind ? "GET" : "POST",
                                                  .url = r->url,
                                                  .body = r->body,
                                                  .timeout_ms = kind ? NET_IFACES_TIMEOUT_MS
                                                                     : probe_call_timeout(c),
                                                  .done = call_done,
                                                  .user = r};
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
        snprintf(buf, len, "the agent on %s does not know %s (an older hcagent?)", node, call->url);
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

static int result_is(const json_t *r, const char *addr, int size)
{
    return strcmp(hc_json_str(r, "address", ""), addr) == 0 && hc_json_int(r, "size", -1) == size;
}

/* The agent's result for the target at position pos (matched by address and size): the agent
 * answers in the targets' order, so the one at pos is it; a search covers an agent that does
 * not. */
static const json_t *result_for(const json_t *results, size_t pos, const char *addr, int size)
{
    size_t i;
    const json_t *r = json_array_get(results, pos);
    if (r && result_is(r, addr, size))
        return r;
    json_array_foreach(results, i, r)
    {
        if (result_is(r, addr, size))
            return r;
    }
    return NULL;
}

static void pair_from_json(struct hc_net_check *c, struct hc_net_pair *p, const json_t *r)
{
    const json_t *rtt = json_object_get(r, "rtt_ms");
    const char *name = hc_json_str(r, "result", "?");
    p->result = result_parse(name);
    p->largest_ok = (int)hc_json_int(r, "largest_ok", 0);
    p->path_mtu = (int)hc_json_int(r, "path_mtu", 0);
    p->rtt_ms = json_is_number(rtt) ? json_number_value(rtt) : -1;
    p->neighbor = (uint8_t)hc_net_neighbor_parse(hc_json_str(r, "neighbor", NULL));
    hc_net_pair_detail(c, p, "%s", hc_json_str(r, "detail", ""));
    if (p->result == HC_NET_OK)
        p->path_mtu = p->path_mtu > p->size ? p->path_mtu : p->size;
    else if (p->path_mtu == 0)
        p->path_mtu = p->largest_ok;
    if (p->result == HC_NET_NOT_PROBED && !p->detail)
        hc_net_pair_detail(c, p, "the agent answered an unknown result '%s'", name);
}

/* The agent's "neighbors" object; anything else (an older agent: absent) leaves it unknown. */
static void neigh_apply(struct hc_net_neigh_table *t, const json_t *o)
{
    memset(t, 0, sizeof(*t));
    if (!json_is_object(o) || !json_is_integer(json_object_get(o, "gc_thresh3")))
        return;
    t->entries = (long)hc_json_int(o, "entries", 0);
    t->thresh1 = (long)hc_json_int(o, "gc_thresh1", 0);
    t->thresh2 = (long)hc_json_int(o, "gc_thresh2", 0);
    t->thresh3 = (long)hc_json_int(o, "gc_thresh3", 0);
    t->fulls = (long)hc_json_int(o, "table_fulls", 0);
    t->known = t->thresh3 > 0 && t->entries >= 0 && t->fulls >= 0;
}

/* A compact answer's target j (docs/api.md): passed when j is in "passed", else its result is
 * the one with "index" j. Fills by_index[j] with the result, or with `passed_mark`. */
static void compact_index(const json_t *answer, size_t npairs, const json_t **by_index,
                          const json_t *passed_mark)
{
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(answer, "passed"), i, v)
    {
        json_int_t j = json_is_integer(v) ? json_integer_value(v) : -1;
        if (j >= 0 && (size_t)j < npairs)
            by_index[j] = passed_mark;
    }
    json_array_foreach(json_object_get(answer, "results"), i, v)
    {
        json_int_t j = hc_json_int(v, "index", -1);
        if (j >= 0 && (size_t)j < npairs && !by_index[j])
            by_index[j] = v;
    }
}

static void pair_passed(struct hc_net_check *c, struct hc_net_pair *p)
{
    p->result = HC_NET_OK;
    p->path_mtu = p->largest_ok = p->size;
    p->rtt_ms = -1;
    p->neighbor = HC_NET_NEIGH_UNKNOWN;
    hc_net_pair_detail(c, p, "%s", "");
}

void hc_net_probe_answer(struct hc_net_check *c, size_t source, const uint32_t *pairs,
                         size_t npairs, const json_t *targets, const json_t *answer)
{
    struct hc_net_node *src = &c->nodes[source];
    const json_t *results = json_object_get(answer, "results");
    const json_t **by_index = NULL, *passed_mark = results;
    if (answer && !json_is_array(results)) {
        src->agent_ok = 0;
        snprintf(src->agent_error, sizeof(src->agent_error),
                 "the agent on %s answered without results", src->name);
    } else if (answer) {
        src->agent_ok = 1;
        neigh_apply(&src->neigh, json_object_get(answer, "neighbors"));
        if (json_is_array(json_object_get(answer, "passed")) &&
            (by_index = calloc(npairs + 1, sizeof(*by_index))))
            compact_index(answer, npairs, by_index, passed_mark);
    }
    for (size_t j = 0; j < npairs; j++) {
        struct hc_net_pair *p = &c->pairs[pairs[j]];
        /* the address the probe was aimed at: fresh interfaces may have changed the node's */
        const char *addr = hc_json_str(json_array_get(targets, j), "address", "");
        const json_t *res = NULL;
        if (src->agent_ok == 1)
            res = by_index ? by_index[j] : result_for(results, j, addr, p->size);
        if (res == passed_mark && by_index)
            pair_passed(c, p);
        else if (res && (!by_index || result_is(res, addr, p->size)))
            pair_from_json(c, p, res);
        else if (src->agent_ok == 1)
            pair_not_probed(c, p, "the agent returned no result for %s", addr);
        else
            pair_not_probed(c, p, "%s", src->agent_error);
    }
    free(by_index);
}

static void probe_apply(struct hc_net_check *c, const struct hc_http_call *call)
{
    const struct probe_req *r = call->user;
    struct hc_net_node *src = &c->nodes[r->node];
    if (!call_good(call)) {
        src->agent_ok = 0;
        call_error(call, src->name, src->agent_error, sizeof(src->agent_error));
    }
    hc_net_probe_answer(c, r->node, r->pairs, r->npairs, json_object_get(r->body, "targets"),
                        call_good(call) ? call->resp.body : NULL);
}

/* Fresh interfaces, so that the verdicts judge what the probes met. Whether the agent answered
 * is the probe's to say when it has: its answer has the last word, whichever came first. */
static void ifaces_apply(struct hc_net_check *c, const struct hc_http_call *call)
{
    const struct probe_req *r = call->user;
    struct hc_net_node *n = &c->nodes[r->node];
    const json_t *list = json_object_get(call->resp.body, "interfaces");
    int good = call_good(call) && json_is_array(list);
    if (good)
        hc_net_node_apply(n, list);
    if (r->probe && r->probe->applied)
        return;
    n->agent_ok = good;
    if (!good)
        call_error(call, n->name, n->agent_error, sizeof(n->agent_error));
}

/* A call's answer into the check as soon as it arrives, then freed: 1,000 answers of ~200 KB
 * each are never all held at once. */
static void call_done(struct hc_http_call *call)
{
    struct probe_req *r = call->user;
    if (r->ifaces)
        ifaces_apply(r->check, call);
    else
        probe_apply(r->check, call);
    r->applied = 1;
    hc_http_response_clear(&call->resp);
}

/* Every agent probes at the same time, so that a check lasts one agent's probe, not one per
 * wave: up to HC_NET_MAX_PARALLEL calls, within a quarter of the descriptors (the HTTPS server
 * keeps its own quarter; common/https_server.c). */
static size_t fanout_parallel(void)
{
    size_t share = hc_nofile_share(4, 16);
    return share < HC_NET_MAX_PARALLEL ? share : HC_NET_MAX_PARALLEL;
}

/* One fan-out over c->pairs at c->search. */
static void probe_round(struct hc_http_client *client, struct hc_net_check *c, int refresh)
{
    size_t max = 2 * c->nnodes + 1, ncalls;
    struct probe_req *reqs = calloc(max, sizeof(*reqs));
    struct hc_http_call *calls = calloc(max, sizeof(*calls));
    struct hc_net_index x = {0};
    if (c->probe_timeout_ms <= 0)
        c->probe_timeout_ms = HC_NET_PROBE_TIMEOUT_MS;
    for (size_t k = 0; k < c->npairs; k++)
        pair_not_probed(c, &c->pairs[k], "%s", "not probed");
    if (!reqs || !calls || hc_net_index_build(&x, c) < 0)
        goto cleanup;
    ncalls = probe_prepare(c, &x, refresh, reqs, calls);
    hc_http_fanout(client, calls, ncalls, fanout_parallel());
    /* the calls that could not start: their error is their answer (interfaces first) */
    for (int kind = 1; kind >= 0; kind--)
        for (size_t i = 0; i < ncalls; i++)
            if (!reqs[i].applied && reqs[i].ifaces == kind)
                call_done(&calls[i]);
    hc_net_explain_neighbors(c);
    for (size_t i = 0; i < ncalls; i++) {
        hc_http_response_clear(&calls[i].resp);
        json_decref(reqs[i].body);
    }
cleanup:
    hc_net_index_free(&x);
    free(reqs);
    free(calls);
}

size_t hc_net_pick_searches(const struct hc_net_check *c, size_t per_node, unsigned char *pick)
{
    size_t *from = calloc(c->nnodes + 1, sizeof(*from)), *to = calloc(c->nnodes + 1, sizeof(*to));
    size_t n = 0;
    for (size_t k = 0; from && to && k < c->npairs; k++) {
        const struct hc_net_pair *p = &c->pairs[k];
        pick[k] = p->result == HC_NET_BLACKHOLE && from[p->from] < per_node && to[p->to] < per_node;
        if (!pick[k])
            continue;
        from[p->from]++, to[p->to]++;
        n++;
    }
    free(from);
    free(to);
    return n;
}

/* The second round of a large check: the picked blackholes searched, in a check of their own
 * with a copy of the nodes, so that an agent failing now does not undo what the first round
 * learnt of it; a pair this round could not probe keeps the first round's result. */
static void search_round(struct hc_http_client *client, struct hc_net_check *c)
{
    unsigned char *pick = calloc(c->npairs + 1, 1);
    size_t n = pick ? hc_net_pick_searches(c, HC_NET_SEARCH_PER_NODE, pick) : 0;
    struct hc_net_check sub = {.mtu = c->mtu,
                               .mtu_source = c->mtu_source,
                               .nnodes = c->nnodes,
                               .cluster_nodes = c->cluster_nodes,
                               .probe_timeout_ms = c->probe_timeout_ms,
                               .search = 1};
    size_t *map = calloc(n + 1, sizeof(*map));
    sub.nodes = calloc(c->nnodes + 1, sizeof(*sub.nodes));
    sub.pairs = calloc(n + 1, sizeof(*sub.pairs));
    if (n == 0 || !map || !sub.nodes || !sub.pairs)
        goto cleanup;
    memcpy(sub.nodes, c->nodes, c->nnodes * sizeof(*c->nodes));
    for (size_t k = 0; k < c->npairs; k++) {
        if (!pick[k])
            continue;
        map[sub.npairs] = k;
        sub.pairs[sub.npairs++] = (struct hc_net_pair){
            .from = c->pairs[k].from, .to = c->pairs[k].to, .size = c->pairs[k].size};
    }
    probe_round(client, &sub, 0);
    for (size_t j = 0; j < sub.npairs; j++) {
        const struct hc_net_pair *q = &sub.pairs[j];
        struct hc_net_pair *p = &c->pairs[map[j]];
        if (q->result == HC_NET_NOT_PROBED)
            continue;
        *p = *q;
        p->detail = NULL; /* the text is sub's: interned again in c */
        if (q->detail)
            hc_net_pair_detail(c, p, "%s", q->detail);
    }
cleanup:
    hc_net_check_clear(&sub);
    free(map);
    free(pick);
}

void hc_net_probe(struct hc_http_client *client, struct hc_net_check *c, int refresh)
{
    if (!c->search || !large_check(c)) {
        probe_round(client, c, refresh);
        return;
    }
    c->search = 0;
    probe_round(client, c, refresh);
    c->search = 1;
    search_round(client, c);
}
