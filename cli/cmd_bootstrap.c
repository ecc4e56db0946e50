/*
 * What `cluster create` and `node add` share: their SSH options and the request that starts
 * the cluster.create / node.add operation, followed like every operation (progress on stderr,
 * --no-wait to detach).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"
#include "common/ssh_target.h"
#include "common/util.h"

/* A local path as the controller must see it: absolute (the controller has another cwd). */
static json_t *abs_path(const char *path)
{
    char buf[PATH_MAX];
    return json_string(realpath(path, buf) ? buf : path);
}

/* --failure-domain [HOST=]DOMAIN...: {"HOST": DOMAIN} for the request (a bare DOMAIN is every
 * host's; a HOST=DOMAIN after it overrides it for that host), or NULL with a usage error in err
 * (a bad name, a host not among the nodes). *out NULL when none was given. */
static int domains_body(struct hc_cmd_ctx *ctx, const char *const *nodes, size_t n, json_t **out,
                        struct hc_error *err)
{
    size_t k;
    const char *const *vals = hc_cmd_opt_list(ctx, "failure-domain", &k);
    *out = NULL;
    if (k == 0)
        return 0;
    json_t *map = json_object();
    for (size_t i = 0; i < k; i++) {
        const char *eq = strrchr(vals[i], '='), *domain = eq ? eq + 1 : vals[i];
        if (!hc_failure_domain_valid(domain)) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid failure domain '%.80s'", domain);
            hc_error_hint(err, "lowercase letters, digits, '.', '-', '_', starting with a letter "
                               "or digit; up to 63 characters");
            goto bad;
        }
        size_t matched = 0;
        for (size_t j = 0; j < n; j++) {
            if (eq && (strlen(nodes[j]) != (size_t)(eq - vals[i]) ||
                       strncmp(nodes[j], vals[i], (size_t)(eq - vals[i])) != 0))
                continue;
            json_object_set_new(map, nodes[j], json_string(domain));
            matched++;
        }
        if (!matched) {
            hc_error_set(err, HC_E(INVALID_ARGUMENT),
                         "--failure-domain '%.120s' names no host given to this command", vals[i]);
            hc_error_hint(err, "write HOST exactly as given, e.g. --node root@10.0.0.11 "
                               "--failure-domain root@10.0.0.11=rack1");
            goto bad;
        }
    }
    *out = map;
    return 0;
bad:
    json_decref(map);
    return -1;
}

static json_t *bootstrap_body(struct hc_cmd_ctx *ctx, const char *name, const char *const *nodes,
                              size_t n)
{
    json_t *body = json_object(), *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_string(nodes[i]));
    json_object_set_new(body, "nodes", list);
    if (name)
        json_object_set_new(body, "name", json_string(name));
    if (hc_cmd_opt_set(ctx, "ssh-key"))
        json_object_set_new(body, "ssh_key", abs_path(hc_cmd_opt_str(ctx, "ssh-key")));
    if (hc_cmd_opt_set(ctx, "known-hosts"))
        json_object_set_new(body, "known_hosts", abs_path(hc_cmd_opt_str(ctx, "known-hosts")));
    if (hc_cmd_opt_set(ctx, "storage-interface"))
        json_object_set_new(body, "storage_interface",
                            json_string(hc_cmd_opt_str(ctx, "storage-interface")));
    if (hc_cmd_opt_set(ctx, "mtu"))
        json_object_set_new(body, "mtu", json_integer(hc_cmd_opt_int(ctx, "mtu")));
    json_object_set_new(body, "accept_new_host_keys",
                        json_boolean(hc_cmd_opt_bool(ctx, "accept-new-host-keys")));
    json_object_set_new(body, "parallel", json_integer(hc_cmd_opt_int(ctx, "parallel")));
    json_object_set_new(body, "join_timeout_seconds",
                        json_integer(hc_cmd_opt_ms(ctx, "join-timeout") / 1000));
    return body;
}

int hc_cmd_bootstrap(struct hc_cmd_ctx *ctx, const char *name, const char *const *nodes, size_t n)
{
    struct hc_error err = {0};
    int64_t mtu = hc_cmd_opt_int(ctx, "mtu"), parallel = hc_cmd_opt_int(ctx, "parallel");
    if (hc_cmd_opt_set(ctx, "mtu") && (mtu < 68 || mtu > 65535))
        return hc_cmd_usage(ctx, "an MTU is 68 to 65535 bytes, e.g. 9000", "invalid --mtu %lld",
                            (long long)mtu);
    if (parallel < 1 || parallel > 64)
        return hc_cmd_usage(ctx, "1 to 64", "invalid --parallel %lld", (long long)parallel);
    for (size_t i = 0; i < n; i++) {
        struct hc_ssh_target t;
        if (hc_ssh_target_parse(nodes[i], &t, &err) < 0)
            return hc_cmd_usage(ctx, err.hint, "%s", err.message);
    }
    json_t *domains;
    if (domains_body(ctx, nodes, n, &domains, &err) < 0)
        return hc_cmd_usage(ctx, err.hint, "%s", err.message);
    json_t *body = bootstrap_body(ctx, name, nodes, n);
    if (domains)
        json_object_set_new(body, "failure_domains", domains);
    json_t *doc = hc_cmd_request(ctx, "POST", name ? "/v1/cluster" : "/v1/nodes", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    int rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"), "%s %zu node(s)",
                           name ? "creating the cluster with" : "adding", n);
    json_decref(doc);
    return rc;
}
