/*
 * POST /v1/cluster (cluster create) and POST /v1/nodes (node add): validate the request and
 * start a cluster.create / node.add operation (controller/ops/op_bootstrap.c does the work).
 *
 * Body: {"name" (create only), "nodes":["[USER@]HOST[:PORT]",...], "ssh_key"?, "known_hosts"?,
 *        "accept_new_host_keys"?, "storage_interface"?, "mtu"?, "parallel"?,
 *        "join_timeout_seconds"?, "failure_domains"?: {"[USER@]HOST[:PORT]": DOMAIN}}
 * failure_domains names hosts as in "nodes" (compared as user@host:port) and is stored keyed so.
 * Paths (ssh_key, known_hosts) are files on the controller's host.
 */
#include <string.h>
#include <unistd.h>

#include "common/constants.h"
#include "common/json_util.h"
#include "common/ssh_target.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/ops/op_bootstrap.h"
#include "controller/ops/ops.h"
#include "controller/state/nodes.h"

static int check_file(const json_t *body, const char *key, struct hc_error *err)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v) || access(json_string_value(v), R_OK) != 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "'%s' is not a readable file on "
                            "the controller's host",
                            json_is_string(v) ? json_string_value(v) : key);
    return 0;
}

static int iface_name_valid(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 16 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_.-@:") == n;
}

/* "failure_domains" {host: domain} checked (every host one of nodes, every domain a valid name)
 * and keyed by the canonical user@host:port (what the operation names each host by); a new
 * object in *out (NULL when absent). 0 or -1 with 400. */
static int domains_param(const json_t *body, const json_t *nodes, json_t **out,
                         struct hc_error *err)
{
    const json_t *fd = json_object_get(body, "failure_domains"), *v, *n;
    const char *host;
    size_t i;
    *out = NULL;
    if (!fd || json_is_null(fd))
        return 0;
    if (!json_is_object(fd))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "'failure_domains' must be an object {host: domain}");
    json_t *keyed = json_object();
    json_object_foreach((json_t *)fd, host, v)
    {
        struct hc_ssh_target t, u;
        char want[400], have[400];
        int listed = 0;
        if (hc_ssh_target_parse(host, &t, err) < 0)
            goto bad;
        hc_ssh_target_format(&t, want, sizeof(want));
        json_array_foreach(nodes, i, n)
        {
            hc_ssh_target_parse(json_string_value(n), &u, NULL);
            hc_ssh_target_format(&u, have, sizeof(have));
            listed |= !strcmp(want, have);
        }
        if (!listed) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT),
                         "failure domain given for '%.100s', which is not one of the nodes", host);
            hc_error_hint(err, "give --failure-domain HOST=DOMAIN for a host given with --node");
            goto bad;
        }
        if (!json_is_string(v) || !hc_failure_domain_valid(json_string_value(v))) {
            hc_error_set(err, HC_E(INVALID_DOMAIN), "invalid failure domain '%.80s' for '%.100s'",
                         json_is_string(v) ? json_string_value(v) : "(not a string)", host);
            hc_error_hint(err, "lowercase letters, digits, '.', '-', '_', starting with a letter "
                               "or digit; up to 63 characters");
            goto bad;
        }
        json_object_set_new(keyed, want, json_string(json_string_value(v)));
    }
    *out = keyed;
    return 0;
bad:
    json_decref(keyed);
    return -1;
}

/* Validates the body and turns it into operation params (new reference) or NULL with err. */
static json_t *bootstrap_params(const json_t *body, int create, struct hc_error *err)
{
    const json_t *nodes = json_object_get(body, "nodes");
    const char *name = hc_json_str(body, "name", NULL);
    const char *iface = hc_json_str(body, "storage_interface", NULL);
    size_t i;
    const json_t *n;
    if (create && (!name || !hc_node_name_valid(name))) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid cluster name '%s'", name ? name : "");
        hc_error_hint(err, "lowercase letters, digits, '.', '-', '_'; up to 63 characters");
        return NULL;
    }
    if (!json_is_array(nodes) || json_array_size(nodes) == 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "'nodes' must be a non-empty array");
        hc_error_hint(err, "give at least one --node [USER@]HOST[:PORT]");
        return NULL;
    }
    json_array_foreach(nodes, i, n)
    {
        struct hc_ssh_target t;
        if (!json_is_string(n) || hc_ssh_target_parse(json_string_value(n), &t, err) < 0)
            return NULL;
    }
    if (iface && !iface_name_valid(iface)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid interface name '%s'", iface);
        return NULL;
    }
    if (check_file(body, "ssh_key", err) < 0 || check_file(body, "known_hosts", err) < 0 ||
        hc_api_body_int(body, "mtu", HC_MTU_MIN, HC_MTU_MAX, 0, NULL, err) < 0 ||
        hc_api_body_int(body, "parallel", 1, HC_BOOTSTRAP_MAX_PARALLEL, 0, NULL, err) < 0 ||
        hc_api_body_int(body, "join_timeout_seconds", 1, 3600, 0, NULL, err) < 0)
        return NULL;
    json_t *domains;
    if (domains_param(body, nodes, &domains, err) < 0)
        return NULL;
    json_t *p = json_deep_copy(body);
    if (domains)
        json_object_set_new(p, "failure_domains", domains);
    if (json_object_get(body, "join_timeout_seconds"))
        json_object_set_new(p, "join_timeout_ms",
                            json_integer(hc_json_int(body, "join_timeout_seconds", 60) * 1000));
    return p;
}

/* Refuses (409) a host that an unfinished create or add is bringing in already: two pushes to
 * one node would race (one of them then finds an agent it did not start). The API thread runs
 * one request at a time, so the check and the submission cannot interleave with another. */
static int hosts_free(struct hc_db *db, const json_t *nodes, struct hc_error *err)
{
    json_t *busy = hc_db_query_json(db, err,
                                    "SELECT o.id AS id, j.value AS node "
                                    "FROM operations o, json_each(o.params_json, '$.nodes') j "
                                    "WHERE o.kind IN ('cluster.create', 'node.add') "
                                    "AND o.state NOT IN ('succeeded', 'failed', 'aborted')",
                                    "");
    if (!busy)
        return -1;
    size_t i, j;
    const json_t *n, *row;
    int rc = 0;
    json_array_foreach(nodes, i, n)
    {
        struct hc_ssh_target want, have;
        char a[400], b[400];
        hc_ssh_target_parse(json_string_value(n), &want, NULL);
        hc_ssh_target_format(&want, a, sizeof(a));
        json_array_foreach(busy, j, row)
        {
            if (hc_ssh_target_parse(hc_json_str(row, "node", ""), &have, NULL) < 0)
                continue;
            hc_ssh_target_format(&have, b, sizeof(b));
            if (strcmp(a, b) == 0) {
                const char *id = hc_json_str(row, "id", "");
                hc_error_set(err, HC_E(CONFLICT),
                             "'%s' is already being brought in by operation %s", a, id);
                hc_error_hint(err, "wait for it: hcctl operation wait %s", id);
                rc = -1;
                goto done;
            }
        }
    }
done:
    json_decref(busy);
    return rc;
}

static void bootstrap(struct hc_request *req, struct hc_api *api, int create)
{
    struct hc_error err = {0};
    json_t *reply = NULL, *params = NULL;
    json_t *body = hc_api_body(req);
    char op_id[32];
    if (!body)
        return;
    params = bootstrap_params(body, create, &err);
    if (!params || hosts_free(api->db, json_object_get(params, "nodes"), &err) < 0)
        goto cleanup;
    if (hc_ops_submit(api->db, api->ctl->cluster_id, create ? "cluster.create" : "node.add", params,
                      hc_api_actor(req), op_id, &err) < 0)
        goto cleanup;
    if (api->ctl->ops)
        hc_ops_pool_kick(api->ctl->ops);
    reply = hc_res_operation_body(api->db, op_id, &err);
cleanup:
    json_decref(body);
    json_decref(params);
    hc_api_reply(req, 202, reply, &err);
}

void hc_res_cluster_create(struct hc_request *req, void *arg)
{
    bootstrap(req, arg, 1);
}

void hc_res_nodes_add(struct hc_request *req, void *arg)
{
    bootstrap(req, arg, 0);
}
