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
#include "controller/remote/agent_client.h"

static enum hc_net_result result_parse(const char *s)
{
    for (int r = HC_NET_OK; r <= HC_NET_UNREACHABLE; r++)
        if (s && strcmp(s, hc_net_result_name((enum hc_net_result)r)) == 0)
            return (enum hc_net_result)r;
    return HC_NET_NOT_PROBED;
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

static void pair_not_probed(struct hc_net_check *c, struct hc_net_pair *p, const char *fmt,
                            const char *arg)
{
    p->result = HC_NET_NOT_PROBED;
    p->path_mtu = p->largest_ok = 0;
    p->rtt_ms = -1;
    hc_net_pair_detail(c, p, fmt, arg);
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
            pair_not_probed(c, p, "no storage address known for %s", c->nodes[p->to].name);
            continue;
        }
        json_array_append_new(
            targets, json_pack("{s:s, s:i}", "address", c->nodes[p->to].addr, "size", p->size));
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
            calls[ncalls] = (struct hc_http_call){.method = kind ? "GET" : "POST",
                                                  .url = r->url,
                                                  .body = r->body,
                                                  .timeout_ms = kind ? NET_IFACES_TIMEOUT_MS
                                                                     : probe_call_timeout(c),
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

static void pair_from_json(struct hc_net_check *c, struct hc_net_pair *p, const json_t *r)
{
    const json_t *rtt = json_object_get(r, "rtt_ms");
    const char *name = hc_json_str(r, "result", "?");
    p->result = result_parse(name);
    p->largest_ok = (int)hc_json_int(r, "largest_ok", 0);
    p->path_mtu = (int)hc_json_int(r, "path_mtu", 0);
    p->rtt_ms = json_is_number(rtt) ? json_number_value(rtt) : -1;
    hc_net_pair_detail(c, p, "%s", hc_json_str(r, "detail", ""));
    if (p->result == HC_NET_OK)
        p->path_mtu = p->path_mtu > p->size ? p->path_mtu : p->size;
    else if (p->path_mtu == 0)
        p->path_mtu = p->largest_ok;
    if (p->result == HC_NET_NOT_PROBED && !p->detail)
        hc_net_pair_detail(c, p, "the agent answered an unknown result '%s'", name);
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
        const json_t *res =
            src->agent_ok == 1 ? result_for(results, c->nodes[p->to].addr, p->size) : NULL;
        if (res)
            pair_from_json(c, p, res);
        else if (src->agent_ok == 1)
            pair_not_probed(c, p, "the agent returned no result for %s", c->nodes[p->to].addr);
        else
            pair_not_probed(c, p, "%s", src->agent_error);
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
        pair_not_probed(c, &c->pairs[k], "%s", "not probed");
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
