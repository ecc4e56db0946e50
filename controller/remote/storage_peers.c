/* The storage members sent to every agent (see storage_peers.h). */
#include "controller/remote/storage_peers.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/controller.h"
#include "controller/remote/agent_client.h"
#include "controller/state/net.h"
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

/* Where one member's storage service serves. The agent is the truth: with a storage interface
 * configured, its /v1/status "storage_host" (the address it renders for {storage_host}). An
 * agent without one (joined by hand, or from before storage addresses) serves on its listen
 * host: the host of its agent URL, as before. For an agent that did not answer, what the poller
 * recorded: the first IPv4 address of nodes.storage_interface (the rule the agent follows).
 * Anything but the agent's own word is said in note. */
static void member_host(const struct hc_node_row *row, const struct hc_http_call *status,
                        const struct hc_net_check *net, char *host, size_t len, char *note,
                        size_t note_len)
{
    const json_t *b = status->ok && status->resp.status == 200 ? status->resp.body : NULL;
    const char *said = hc_json_str(b, "storage_host", NULL);
    note[0] = '\0';
    if (url_host(row->agent_url, host, len) < 0)
        host[0] = '\0';
    if (b && !json_is_string(json_object_get(b, "storage_interface")))
        return;
    if (said && strlen(said) < len) {
        snprintf(host, len, "%s", said);
        return;
    }
    if (b) {
        snprintf(note, note_len, "%s has no storage address (%s): its management address sent",
                 row->name, hc_json_str(b, "storage_problem", "unknown"));
        return;
    }
    for (size_t i = 0; i < net->nnodes; i++)
        if (!strcmp(net->nodes[i].name, row->name) && net->nodes[i].iface[0] &&
            row->storage_interface && row->storage_interface[0]) {
            if (net->nodes[i].addr[0])
                snprintf(host, len, "%s", net->nodes[i].addr);
            snprintf(note, note_len, "%s did not answer: its %s address %s as last recorded",
                     row->name, net->nodes[i].addr[0] ? "storage" : "management", host);
            return;
        }
}

/* {"epoch", "nodes": [{"name", "host", "domain"?}]} from the member rows (domain: the failure
 * domain, absent when the node has none), each host where that member's
 * service serves (member_host), asking every agent at once (new reference; NULL when out of
 * memory). Notes about members not named by their own agent go to notes. */
static json_t *peers_list(struct hc_op_ctx *ctx, struct hc_http_client *client,
                          const struct hc_node_row *rows, size_t n, char *notes, size_t notes_len)
{
    struct hc_net_check net = {0};
    struct hc_error err = {0};
    struct hc_http_call *calls = calloc(n + 1, sizeof(*calls));
    char(*urls)[1100] = calloc(n + 1, sizeof(*urls));
    json_t *nodes = json_array(), *list = NULL;
    size_t at = 0;
    if (!calls || !urls || !nodes)
        goto cleanup;
    if (hc_net_gather(hc_op_db(ctx), NULL, &net, &err) < 0)
        HC_WARN("storage peers: the recorded storage addresses are unknown: %s", err.message);
    long timeout = hc_agent_timeout_ms(hc_op_controller(ctx));
    for (size_t i = 0; i < n; i++) {
        if (hc_agent_url(urls[i], sizeof(urls[i]), rows[i].agent_url, "/v1/status", &err) < 0)
            urls[i][0] = '\0';
        calls[i] = (struct hc_http_call){.method = "GET", .url = urls[i], .timeout_ms = timeout};
    }
    hc_op_waiting(ctx, "%zu agents to say where the storage service serves", n);
    hc_http_fanout(client, calls, n, 0);
    for (size_t i = 0; i < n; i++) {
        char host[256], note[400];
        member_host(&rows[i], &calls[i], &net, host, sizeof(host), note, sizeof(note));
        if (note[0] && at < notes_len)
            at += (size_t)snprintf(notes + at, notes_len - at, "%s%s", at ? "; " : "", note);
        if (host[0])
            json_array_append_new(nodes, json_pack("{s:s, s:s, s:s*}", "name", rows[i].name, "host",
                                                   host, "domain", rows[i].failure_domain));
    }
    list = json_pack("{s:I, s:O}", "epoch", (json_int_t)hc_now_ms(), "nodes", nodes);
cleanup:
    for (size_t i = 0; calls && i < n; i++)
        hc_http_response_clear(&calls[i].resp);
    free(calls);
    free(urls);
    json_decref(nodes);
    hc_net_check_clear(&net);
    return list;
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
    char notes[600] = "";
    if (hc_nodes_rows(hc_op_db(ctx), &members, &rows, &n, err) < 0)
        return -1;
    if (!(list = peers_list(ctx, p->client, rows, n, notes, sizeof(notes)))) {
        hc_node_rows_free(rows, n);
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    }
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
        snprintf(detail, len, "%zu members sent to every agent (epoch %lld)%s%s",
                 json_array_size(json_object_get(list, "nodes")),
                 (long long)json_integer_value(json_object_get(list, "epoch")),
                 notes[0] ? "; " : "", notes);
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
