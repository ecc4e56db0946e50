/* The storage members sent to every agent (see storage_peers.h). */
#include "controller/remote/storage_peers.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/controller.h"
#include "controller/remote/agent_client.h"
#include "controller/state/nodes.h"
#include "db/db.h"

/* The host part of an agent URL ("https://198.18.0.11:7444" -> "198.18.0.11"). */
static int url_host(const char *url, char *host, size_t len)
{
    struct hc_error err = {0};
    int port;
    const char *p = strstr(url, "://");
    char hostport[300];
    snprintf(hostport, sizeof(hostport), "%s", p ? p + 3 : url);
    hostport[strcspn(hostport, "/")] = '\0';
    return hc_split_host_port(hostport, host, len, &port, &err);
}

/* {"epoch", "nodes": [{"name", "host"}]} from the member rows (new reference). */
static json_t *peers_list(const struct hc_node_row *rows, size_t n)
{
    json_t *nodes = json_array();
    char host[256];
    for (size_t i = 0; i < n; i++)
        if (url_host(rows[i].agent_url, host, sizeof(host)) == 0)
            json_array_append_new(nodes,
                                  json_pack("{s:s, s:s}", "name", rows[i].name, "host", host));
    return json_pack("{s:I, s:o}", "epoch", (json_int_t)hc_now_ms(), "nodes", nodes);
}

struct push {
    struct hc_http_client *client;
};

static int push_step(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    struct push *p = arg;
    struct hc_node_filter members = {.desired_state = "member"};
    struct hc_node_row *rows;
    json_t *list;
    size_t n, sent = 0, at = 0;
    if (hc_nodes_rows(hc_op_db(ctx), &members, &rows, &n, err) < 0)
        return -1;
    list = peers_list(rows, n);
    detail[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const struct hc_node_row *row = &rows[i];
        struct hc_http_response resp = {0};
        struct hc_error e = {0};
        hc_op_waiting(ctx, "agent %s to take the storage peers", row->name);
        if (hc_agent_call(p->client, row->agent_url, "PUT", "/v1/service/peers", list,
                          hc_agent_timeout_ms(hc_op_controller(ctx)), &resp, &e) == 0)
            sent++;
        else if (at < len)
            at += (size_t)snprintf(detail + at, len - at, "%s%s: %s", at ? "; " : "not sent to ",
                                   row->name, e.message);
        hc_http_response_clear(&resp);
    }
    hc_op_waiting(ctx, NULL);
    int none_took = sent == 0 && n > 0;
    if (none_took)
        hc_error_set(err, HC_E(UNREACHABLE), "no agent took the storage peers: %s", detail);
    else if (at == 0)
        snprintf(detail, len, "%zu members sent to every agent (epoch %lld)",
                 json_array_size(json_object_get(list, "nodes")),
                 (long long)json_integer_value(json_object_get(list, "epoch")));
    hc_node_rows_free(rows, n);
    json_decref(list);
    return none_took ? -1 : 0;
}

int hc_storage_peers_step(struct hc_op_ctx *ctx, struct hc_http_client *client,
                          struct hc_error *err)
{
    struct push p = {client};
    return hc_op_step_observe(ctx, NULL, "storage_peers", push_step, &p, err);
}
