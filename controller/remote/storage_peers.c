/* The storage members sent to every agent (see storage_peers.h). */
#include "controller/remote/storage_peers.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/util.h"
#include "controller/remote/agent_client.h"
#include "controller/controller.h"
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

static json_t *member_rows(struct hc_db *db, struct hc_error *err)
{
    return hc_db_query_json(db, err, "SELECT name, agent_url FROM nodes WHERE "
                            "desired_state = 'member' ORDER BY name", "");
}

/* {"epoch", "nodes": [{"name", "host"}]} from the member rows (new reference). */
static json_t *peers_list(const json_t *rows)
{
    json_t *nodes = json_array(), *row;
    size_t i;
    char host[256];
    json_array_foreach(rows, i, row)
        if (url_host(hc_json_str(row, "agent_url", ""), host, sizeof(host)) == 0)
            json_array_append_new(nodes, json_pack("{s:s, s:s}", "name",
                                                   hc_json_str(row, "name", ""), "host", host));
    return json_pack("{s:I, s:o}", "epoch", (json_int_t)hc_now_ms(), "nodes", nodes);
}

struct push {
    struct hc_http_client *client;
};

static int push_step(struct hc_op_ctx *ctx, void *arg, char *detail, size_t len,
                     struct hc_error *err)
{
    struct push *p = arg;
    json_t *rows = member_rows(hc_op_db(ctx), err), *list, *row;
    size_t i, sent = 0, at = 0;
    if (!rows)
        return -1;
    list = peers_list(rows);
    detail[0] = '\0';
    json_array_foreach(rows, i, row) {
        struct hc_http_response resp = {0};
        struct hc_error e = {0};
        hc_op_waiting(ctx, "agent %s to take the storage peers", hc_json_str(row, "name", ""));
        if (hc_agent_call(p->client, hc_json_str(row, "agent_url", ""), "PUT",
                          "/v1/service/peers", list,
                          hc_agent_timeout_ms(hc_op_controller(ctx)), &resp, &e) == 0)
            sent++;
        else if (at < len)
            at += (size_t)snprintf(detail + at, len - at, "%s%s: %s", at ? "; " : "not sent to ",
                                   hc_json_str(row, "name", ""), e.message);
        hc_http_response_clear(&resp);
    }
    hc_op_waiting(ctx, NULL);
    int none_took = sent == 0 && json_array_size(rows) > 0;
    if (none_took)
        hc_error_set(err, 503, HC_ERR_UNREACHABLE, "no agent took the storage peers: %s", detail);
    else if (at == 0)
        snprintf(detail, len, "%zu members sent to every agent (epoch %lld)",
                 json_array_size(json_object_get(list, "nodes")),
                 (long long)json_integer_value(json_object_get(list, "epoch")));
    json_decref(rows);
    json_decref(list);
    return none_took ? -1 : 0;
}

int hc_storage_peers_step(struct hc_op_ctx *ctx, struct hc_http_client *client,
                          struct hc_error *err)
{
    struct push p = {client};
    return hc_op_step_observe(ctx, NULL, "storage_peers", push_step, &p, err);
}
