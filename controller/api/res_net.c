/*
 * /v1/net: the storage network as recorded (GET, `hcctl net show`), and the requests that start
 * the network operations: POST /v1/net/check (net.check), POST /v1/net/mtu (net.set_mtu,
 * disruptive), POST /v1/net/bench (net.bench). The result document an operation stored (the
 * pair matrix of a check) is read at GET /v1/operations/{id}/result (res_operations.c).
 *
 * The handlers only validate and submit: the probing runs on the operation workers, never on
 * the API thread.
 */
#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "controller/api/api.h"
#include "controller/state/net.h"
#include "controller/state/nodes.h"

#define BENCH_MAX_S 60
#define CONFIRM_MIN_MS 1000
#define CONFIRM_MAX_MS 3600000

/* An optional array of at least `min` distinct names of existing nodes. */
static int body_nodes(struct hc_db *db, const json_t *body, size_t min, struct hc_error *err)
{
    const json_t *v = json_object_get(body, "nodes"), *name;
    size_t i, j;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) < min) {
        /* An unknown name is the more useful answer (404) when there is one. */
        json_array_foreach(v, i, name)
        {
            int exists =
                json_is_string(name) ? hc_node_exists(db, json_string_value(name), err) : 1;
            if (exists < 0)
                return -1;
            if (!exists)
                return hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found",
                                    json_string_value(name));
        }
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "'nodes' must be an array of at least "
                     "%zu node names",
                     min);
        return hc_error_hint(err,
                             "pairs of nodes are measured: name at least %zu, or leave "
                             "'nodes' out for every node",
                             min);
    }
    json_array_foreach(v, i, name)
    {
        if (!json_is_string(name))
            return hc_error_set(err, HC_E(INVALID_ARGUMENT), "'nodes' must hold names");
        for (j = 0; j < i; j++)
            if (json_equal(name, json_array_get(v, j)))
                return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                    "node '%s' is named "
                                    "twice",
                                    json_string_value(name));
        int exists = hc_node_exists(db, json_string_value(name), err);
        if (exists < 0)
            return -1;
        if (!exists) {
            hc_error_set(err, HC_E(NOT_FOUND), "node '%s' not found", json_string_value(name));
            return hc_error_hint(err, "see 'hcctl node list'");
        }
    }
    return 0;
}

/* Copies the listed members that are present and not null. */
static json_t *params_of(const json_t *body, const char *const *keys)
{
    json_t *p = json_object();
    for (; *keys; keys++) {
        json_t *v = json_object_get(body, *keys);
        if (v && !json_is_null(v))
            json_object_set(p, *keys, v);
    }
    return p;
}

/* Submits kind with params (stolen) and replies 202 {"operation":OP} or the error. */
static void submit(struct hc_request *req, struct hc_api *api, const char *kind, json_t *params)
{
    struct hc_error err = {0};
    hc_res_operation_submit(req, api, kind, params, &err);
    json_decref(params);
}

void hc_res_net_check(struct hc_request *req, void *arg)
{
    static const char *const keys[] = {"mtu", "nodes", NULL};
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req);
    if (!body)
        return;
    /* A check proves pairs: one named node has none (the whole cluster may have one node: then
     * the result says there is nothing to check). */
    if (hc_api_body_int(body, "mtu", HC_MTU_MIN, HC_MTU_MAX, 0, NULL, &err) < 0 ||
        body_nodes(api->db, body, 2, &err) < 0) {
        json_decref(body);
        hc_reply_error(req, &err);
        return;
    }
    submit(req, api, "net.check", params_of(body, keys));
    json_decref(body);
}

void hc_res_net_mtu(struct hc_request *req, void *arg)
{
    static const char *const keys[] = {"mtu", "confirm_timeout_ms", NULL};
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req);
    if (!body)
        return;
    if (!json_is_integer(json_object_get(body, "mtu"))) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "'mtu' must be an integer from %d to %d",
                     HC_MTU_MIN, HC_MTU_MAX);
        hc_error_hint(&err, "e.g. {\"mtu\": 9000}");
    } else if (hc_api_body_int(body, "mtu", HC_MTU_MIN, HC_MTU_MAX, 0, NULL, &err) == 0) {
        hc_api_body_int(body, "confirm_timeout_ms", CONFIRM_MIN_MS, CONFIRM_MAX_MS, 0, NULL, &err);
    }
    if (err.code[0]) {
        json_decref(body);
        hc_reply_error(req, &err);
        return;
    }
    submit(req, api, "net.set_mtu", params_of(body, keys));
    json_decref(body);
}

void hc_res_net_bench(struct hc_request *req, void *arg)
{
    static const char *const keys[] = {"nodes", "duration_s", NULL};
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *body = hc_api_body(req);
    if (!body)
        return;
    if (hc_api_body_int(body, "duration_s", 1, BENCH_MAX_S, 0, NULL, &err) < 0 ||
        body_nodes(api->db, body, 2, &err) < 0) {
        json_decref(body);
        hc_reply_error(req, &err);
        return;
    }
    submit(req, api, "net.bench", params_of(body, keys));
    json_decref(body);
}

/* --- GET /v1/net ---------------------------------------------------------------------------- */

static json_t *int_or_null(int v)
{
    return v > 0 ? json_integer(v) : json_null();
}

static json_t *str_or_null(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

/* Health and the storage interface's addresses of one node. */
static json_t *show_extra(struct hc_db *db, const struct hc_net_node *n, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT n.health, (SELECT i.addresses_json FROM "
                                    "interfaces i WHERE i.node_id = n.id AND i.name = ?) AS "
                                    "addresses_json FROM nodes n WHERE n.name = ?",
                                    "ss", n->iface, n->name);
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return row;
}

static json_t *show_node(struct hc_db *db, const struct hc_net_node *n, int mtu,
                         struct hc_error *err)
{
    char why[512] = "", fix[512] = "";
    int verdict = mtu > 0 ? hc_net_node_verdict(n, mtu, why, sizeof(why), fix, sizeof(fix)) : 0;
    json_t *extra = show_extra(db, n, err);
    if (!extra)
        return NULL;
    const json_t *addrs = json_object_get(extra, "addresses_json");
    json_t *o =
        json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "name", n->name, "health",
                  hc_json_str(extra, "health", "unknown"), "interface", str_or_null(n->iface),
                  "address", str_or_null(n->addr), "mtu", int_or_null(n->mtu), "state",
                  str_or_null(n->state), "kind", str_or_null(n->kind), "addresses",
                  json_is_array(addrs) ? json_incref((json_t *)addrs) : json_array());
    json_object_set_new(o, "master", str_or_null(n->master));
    json_object_set_new(o, "master_mtu", int_or_null(n->master_mtu));
    json_object_set_new(o, "port", str_or_null(n->port));
    json_object_set_new(o, "port_mtu", int_or_null(n->port_mtu));
    json_object_set_new(o, "mtu_matches", mtu > 0 ? json_boolean(n->mtu == mtu) : json_null());
    json_object_set_new(o, "problem", verdict ? json_string(why) : json_null());
    json_object_set_new(o, "fix", verdict ? json_string(fix) : json_null());
    json_decref(extra);
    return o;
}

/* A summary of the newest finished net.check, or JSON null. */
static json_t *last_check(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT id, result_json FROM operations WHERE "
                                    "kind = 'net.check' AND state = 'succeeded' AND result_json "
                                    "IS NOT NULL ORDER BY finished_at DESC, rowid DESC LIMIT 1",
                                    "");
    const json_t *row = json_array_get(rows, 0), *res = json_object_get(row, "result_json");
    json_t *out = NULL;
    if (!rows)
        return NULL;
    if (json_is_object(res))
        out = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?}", "operation_id", hc_json_str(row, "id", ""),
                        "checked_at", json_object_get(res, "checked_at"), "mtu",
                        json_object_get(res, "mtu"), "passed", json_object_get(res, "passed"),
                        "summary", json_object_get(res, "summary"));
    json_decref(rows);
    return out ? out : json_null();
}

static json_t *net_show(struct hc_db *db, struct hc_error *err)
{
    struct hc_net_check c = {0};
    json_t *nodes = NULL, *doc = NULL, *last = NULL;
    int mtu = hc_net_cluster_mtu(db, err);
    if (mtu < 0 || hc_net_gather(db, NULL, &c, err) < 0)
        goto cleanup;
    nodes = json_array();
    for (size_t i = 0; i < c.nnodes; i++) {
        json_t *o = show_node(db, &c.nodes[i], mtu, err);
        if (!o)
            goto cleanup;
        json_array_append_new(nodes, o);
    }
    if (!(last = last_check(db, err)))
        goto cleanup;
    doc = json_pack("{s:o, s:O, s:O}", "mtu", int_or_null(mtu), "nodes", nodes, "last_check", last);
cleanup:
    json_decref(nodes);
    json_decref(last);
    hc_net_check_clear(&c);
    return doc;
}

void hc_res_net_show(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    unsigned deps = HC_DEP(NODES) | HC_DEP(INTERFACES) | HC_DEP(OPERATIONS) | HC_DEP(CLUSTERS);
    if (hc_api_cached(api, req, deps))
        return;
    hc_api_reply_etag(api, req, deps, net_show(api->db, &err), &err);
}
