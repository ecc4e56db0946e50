/*
 * `hcctl node`: list, show, set (the failure domain) and remove nodes. Removal is disruptive: it
 * asks on a TTY, needs
 * --yes otherwise, and follows the node.remove operation unless --no-wait. It passes the gates
 * of maintenance (availability budget, the storage service's ok-to-stop: refused, exit 5)
 * unless --force --reason TEXT, and keeps the service's data on the node unless --purge.
 * `renew-cert` renews a node's certificate now (docs/certificates.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"
#include "common/util.h"

static const struct hc_col list_cols[] = {
    {"NAME", "name", NULL},
    {"ADDRESS", "address", NULL},
    {"HEALTH", "health", hc_fmt_health},
    {"STATE", "state", NULL},
    {"MAINTENANCE", "maintenance", NULL},
    {"AGENT", "agent_version", NULL},
    {"API", "api_compat", NULL},
    {"SERVICE", "service_state", NULL},
    {"CERT", "cert_state", NULL},
    {"DOMAIN", "failure_domain", NULL},
    {"LAST SEEN", "last_seen", hc_fmt_age},
    {NULL, NULL, NULL},
};

static const struct hc_section list_view[] = {
    {HC_SECTION_TABLE, NULL, "nodes", list_cols},
    {0, NULL, NULL, NULL},
};

static const struct hc_col show_fields[] = {
    {"Name", "name", NULL},
    {"Hostname", "hostname", NULL},
    {"Address", "address", NULL},
    {"Agent URL", "agent_url", NULL},
    {"Domain", "failure_domain", NULL},
    {"State", "state", NULL},
    {"Health", "health", hc_fmt_health},
    {"Health detail", "health_detail", NULL},
    {"Maintenance", "maintenance", NULL},
    {"Agent version", "agent_version", NULL},
    {"Agent API", "api_version", NULL},
    {"API compat", "api_compat", NULL},
    {"Software", "software_version", NULL},
    {"Service", "service_state", NULL},
    {"Uptime", "uptime_seconds", hc_fmt_seconds},
    {"Poll latency", "poll_latency_ms", hc_fmt_ms},
    {"Last seen", "last_seen", hc_fmt_time},
    {"Joined", "joined_at", hc_fmt_time},
    {"Cert serial", "cert_serial", NULL},
    {"Cert expires", "cert_not_after", hc_fmt_time},
    {"Cert state", "cert_state", NULL},
    {"Cert error", "cert_renew_error", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_col iface_cols[] = {
    {"NAME", "name", NULL},
    {"MTU", "mtu", NULL},
    {"STATE", "state", NULL},
    {"KIND", "kind", NULL},
    {"MASTER", "master", NULL},
    {"ADDRESSES", "addresses", NULL},
    {"UPDATED", "updated_at", hc_fmt_age},
    {NULL, NULL, NULL},
};

static const struct hc_section show_view[] = {
    {HC_SECTION_FIELDS, NULL, "node", show_fields},
    {HC_SECTION_TABLE, "Interfaces", "interfaces", iface_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_list(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_show_list(ctx, "/v1/nodes", "nodes", list_view);
}

static int cmd_show(struct hc_cmd_ctx *ctx)
{
    char path[1024];
    if (hc_cmd_path(path, sizeof(path), "/v1/nodes/", ctx->argv[0]) < 0)
        return hc_cmd_usage(ctx, NULL, "node name '%.64s...' is too long", ctx->argv[0]);
    return hc_cmd_show(ctx, path, show_view);
}

/* After a removal: what became of the service's data (step "service_data"), on stderr. */
static void say_service_data(struct hc_cmd_ctx *ctx, const char *id)
{
    struct hc_error err = {0};
    char path[1024];
    size_t i;
    json_t *s;
    if (ctx->out.json || hc_cmd_path(path, sizeof(path), "/v1/operations/", id) < 0)
        return;
    json_t *doc = hc_cmd_request(ctx, "GET", path, NULL, &err);
    json_array_foreach(json_object_get(doc, "steps"), i, s)
    {
        if (!strcmp(hc_json_str(s, "step", ""), "service_data"))
            hc_output_info(&ctx->out, "the service's data: %s", hc_json_str(s, "detail", "?"));
    }
    json_decref(doc);
}

static int cmd_remove(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *name = ctx->argv[0];
    const char *reason = hc_cmd_opt_str(ctx, "reason");
    int force = hc_cmd_opt_bool(ctx, "force"), purge = hc_cmd_opt_bool(ctx, "purge");
    char path[1024];
    int rc;
    if (hc_cmd_path(path, sizeof(path), "/v1/nodes/", name) < 0)
        return hc_cmd_usage(ctx, NULL, "node name '%.64s...' is too long", name);
    if (force && (!reason || !reason[0]))
        return hc_cmd_usage(ctx, "it is recorded with the operation and the node.removed event",
                            "--force skips the availability budget and ok-to-stop: it needs "
                            "--reason TEXT");
    if (reason && !force)
        return hc_cmd_usage(ctx, NULL, "--reason goes with --force");
    if (hc_cmd_confirm(ctx, &err, "remove node '%s'%s%s", name,
                       force ? " without the availability checks (--force)" : "",
                       purge ? " and delete its service's data (--purge)" : "") < 0)
        return hc_cmd_fail(ctx, &err, NULL);
    json_t *body = json_pack("{s:b, s:b}", "force", force, "purge", purge);
    if (reason)
        json_object_set_new(body, "reason", json_string(reason));
    json_t *doc = hc_cmd_request(ctx, "DELETE", path, body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    const char *id = hc_json_str(json_object_get(doc, "operation"), "id", NULL);
    if (!id) {
        hc_error_set(&err, HC_E(INTERNAL),
                     "removing node '%s': the controller's answer "
                     "names no operation",
                     name);
        rc = hc_cmd_fail(ctx, &err, NULL);
    } else {
        rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"), "removing node '%s'", name);
        if (rc == HC_EXIT_OK && !hc_cmd_opt_bool(ctx, "no-wait"))
            say_service_data(ctx, id);
    }
    json_decref(doc);
    return rc;
}

/* Asks for a renewal, then waits until the node serves a new certificate (the poller renews it
 * at its next cycle: controller/remote/cert_renew.h), or the renewal failed. */
static int cmd_renew_cert(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *name = ctx->argv[0];
    char path[1024], ask[1100];
    if (hc_cmd_path(path, sizeof(path), "/v1/nodes/", name) < 0)
        return hc_cmd_usage(ctx, NULL, "node name '%.64s...' is too long", name);
    snprintf(ask, sizeof(ask), "%s/renew-cert", path);
    json_t *asked = hc_cmd_request(ctx, "POST", ask, NULL, &err);
    if (!asked)
        return hc_cmd_fail(ctx, &err, NULL);
    char *old = strdup(hc_json_str(asked, "cert_serial", ""));
    json_decref(asked);
    int64_t deadline = hc_mono_ms() + hc_cmd_opt_ms(ctx, "timeout");
    json_t *doc = NULL;
    int rc = -1;
    while (rc < 0) {
        json_decref(doc);
        const json_t *node = NULL;
        if (!(doc = hc_cmd_request(ctx, "GET", path, NULL, &err)) ||
            !json_is_object(node = json_object_get(doc, "node"))) {
            if (doc)
                hc_error_set(&err, HC_E(INTERNAL), "the controller's answer has no node");
            rc = hc_cmd_fail(ctx, &err, NULL);
        } else if (strcmp(hc_json_str(node, "cert_serial", ""), old) != 0) {
            if (ctx->out.json)
                hc_output_json(&ctx->out, node);
            else
                printf("node %s: certificate renewed: serial %s, valid until %s\n", name,
                       hc_json_str(node, "cert_serial", "?"),
                       hc_json_str(node, "cert_not_after", "?"));
            rc = HC_EXIT_OK;
        } else if (hc_json_str(node, "cert_renew_error", NULL)) {
            hc_error_set(&err, HC_E(AGENT_ERROR), "%s", hc_json_str(node, "cert_renew_error", ""));
            rc = hc_cmd_fail(ctx, &err, NULL);
        } else if (hc_mono_ms() >= deadline) {
            hc_error_set(&err, HC_E(TIMEOUT),
                         "node '%s' still serves certificate %s: the controller has not renewed "
                         "it yet",
                         name, old);
            hc_error_hint(&err,
                          "the controller renews it at its next poll of a reachable node; "
                          "see 'hcctl events --node %s'",
                          name);
            rc = hc_cmd_fail(ctx, &err, NULL);
        } else {
            hc_sleep_ms(250);
        }
    }
    json_decref(doc);
    free(old);
    return rc;
}

/* node set NODE --failure-domain NAME (or "" for none): a node.set operation, followed. */
static int cmd_set(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *name = ctx->argv[0], *domain = hc_cmd_opt_str(ctx, "failure-domain");
    char path[1024];
    if (!hc_cmd_opt_set(ctx, "failure-domain"))
        return hc_cmd_usage(ctx, "e.g. hcctl node set n1 --failure-domain rack1",
                            "nothing to set: give --failure-domain NAME");
    if (*domain && !hc_failure_domain_valid(domain))
        return hc_cmd_usage(ctx,
                            "lowercase letters, digits, '.', '-', '_', starting with a letter or "
                            "digit; up to 63 characters ('' for none)",
                            "invalid failure domain '%.80s'", domain);
    if (hc_cmd_path(path, sizeof(path), "/v1/nodes/", name) < 0 ||
        strlen(path) + sizeof("/failure-domain") > sizeof(path))
        return hc_cmd_usage(ctx, NULL, "node name '%.64s...' is too long", name);
    strcat(path, "/failure-domain");
    json_t *body = json_pack("{s:s?}", "failure_domain", *domain ? domain : NULL);
    if (!*domain)
        json_object_set_new(body, "failure_domain", json_null());
    json_t *doc = hc_cmd_request(ctx, "PUT", path, body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    int rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"),
                           "setting the failure domain of '%s'", name);
    json_decref(doc);
    return rc;
}

static int cmd_add(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_bootstrap(ctx, NULL, (const char *const *)ctx->argv, (size_t)ctx->argc);
}

static const struct hc_cmd_opt add_opts[] = {
    HC_BOOTSTRAP_OPTS,
    {.name = NULL},
};

static const struct hc_cmd_opt remove_opts[] = {
    HC_OPT(.name = "force", .type = HC_OPT_BOOL,
           .help = "skip the availability budget and the service's ok-to-stop"),
    HC_OPT(.name = "reason", .type = HC_OPT_STRING,
           .help = "why --force (required with it; recorded)", .value_name = "TEXT"),
    HC_OPT(.name = "purge", .type = HC_OPT_BOOL,
           .help = "delete the service's data on the node too (kept by default)"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "how long to wait for the operation to end", .value_name = "DUR", .def = "10m"),
    {.name = NULL},
};

static const struct hc_cmd_opt renew_opts[] = {
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "how long to wait for the node to serve its new certificate",
           .value_name = "DUR", .def = "1m"),
    {.name = NULL},
};

static const struct hc_cmd_opt set_opts[] = {
    HC_OPT(.name = "failure-domain", .type = HC_OPT_STRING,
           .help = "the rack, chassis or power feed the node shares with others ('' for none: the "
                   "node is a domain of its own); replicas are moved to match",
           .value_name = "NAME"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "how long to wait for the operation to end", .value_name = "DUR", .def = "10m"),
    {.name = NULL},
};

static const struct hc_cmd_verb node_verbs[] = {
    HC_VERB(.name = "list", .handler = cmd_list, .summary = "list the nodes with their health"),
    HC_VERB(.name = "show", .handler = cmd_show, .min_args = 1, .max_args = 1,
            .summary = "show one node and its network interfaces", .usage = "NODE",
            .arg_completer = HC_COMPLETE_NODE),
    HC_VERB(.name = "add", .handler = cmd_add, .opts = add_opts, .min_args = 1,
            .max_args = HC_ARGS_MANY,
            .summary = "bring hosts in over SSH: push, enroll and start the agent on each",
            .usage = "[USER@]HOST[:PORT]..."),
    HC_VERB(.name = "set", .handler = cmd_set, .opts = set_opts, .min_args = 1, .max_args = 1,
            .summary = "set a node's failure domain (the storage service moves replicas to match)",
            .usage = "NODE", .arg_completer = HC_COMPLETE_NODE),
    HC_VERB(.name = "remove", .handler = cmd_remove, .opts = remove_opts, .min_args = 1,
            .max_args = 1,
            .summary = "remove a node from the cluster (disruptive: asks, or needs --yes)",
            .usage = "NODE", .flags = HC_CMD_DISRUPTIVE, .arg_completer = HC_COMPLETE_NODE),
    HC_VERB(.name = "renew-cert", .handler = cmd_renew_cert, .opts = renew_opts, .min_args = 1,
            .max_args = 1,
            .summary = "renew the node's certificate now (also one that has expired)",
            .usage = "NODE", .arg_completer = HC_COMPLETE_NODE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_node = {
    .name = "node",
    .summary = "the cluster's nodes",
    .verbs = node_verbs,
};
