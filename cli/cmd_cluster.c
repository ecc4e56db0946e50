/*
 * `hcctl cluster`: the cluster at a glance (status) and one-time join tokens for new nodes.
 */
#include <stdio.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"

static int cmd_join_token(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    int64_t ttl_ms = hc_cmd_opt_ms(ctx, "ttl");
    if (ttl_ms < 1000)
        return hc_cmd_usage(ctx, "for example --ttl 30m", "--ttl must be at least 1s");
    json_t *body = json_pack("{s:I}", "ttl_seconds", (json_int_t)(ttl_ms / 1000));
    json_t *doc = hc_cmd_request(ctx, "POST", "/v1/join-tokens", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (ctx->out.json) {
        hc_output_json(&ctx->out, doc);
    } else {
        /* The token alone on stdout, so that TOKEN=$(hcctl cluster join-token) works. */
        fprintf(ctx->out.out, "%s\n", json_string_value(json_object_get(doc, "token")));
        hc_output_info(&ctx->out, "join token '%s' expires at %s; use it once, on the new node: "
                                  "HCAGENT_TOKEN=... hcagent join --controller URL --data-dir DIR",
                       hc_json_str(doc, "id", "?"), hc_json_str(doc, "expires_at", "?"));
    }
    json_decref(doc);
    return HC_EXIT_OK;
}

static const struct hc_col status_fields[] = {
    {"Cluster", "cluster.name", NULL},
    {"ID", "cluster.id", NULL},
    {"MTU", "cluster.mtu", NULL},
    {"Created", "cluster.created_at", hc_fmt_time},
    {"Nodes", "nodes.total", NULL},
    {"Reachable", "nodes.reachable", NULL},
    {"Unreachable", "nodes.unreachable", NULL},
    {"Unknown", "nodes.unknown", NULL},
    {"Controller", "controller.version", NULL},
    {"Uptime", "controller.uptime_seconds", hc_fmt_seconds},
    {"Poll interval", "controller.poll_interval_ms", hc_fmt_ms},
    {NULL, NULL, NULL},
};

static const struct hc_col active_cols[] = {
    {"ID", "id", NULL},
    {"KIND", "kind", NULL},
    {"STATE", "state", hc_fmt_state},
    {"WAITING ON", "waiting_on", NULL},
    {"CREATED", "created_at", hc_fmt_age},
    {NULL, NULL, NULL},
};

static const struct hc_section status_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL, status_fields},
    {HC_SECTION_TABLE, "Active operations", "operations.active", active_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_status(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_show(ctx, "/v1/cluster", status_view);
}

static int cmd_create(struct hc_cmd_ctx *ctx)
{
    size_t n;
    const char *const *nodes = hc_cmd_opt_list(ctx, "node", &n);
    return hc_cmd_bootstrap(ctx, ctx->argv[0], nodes, n);
}

static const struct hc_cmd_opt create_opts[] = {
    {"node", 0, HC_OPT_LIST, 1, "a host to bring in over SSH (repeat for each node)",
     "[USER@]HOST[:PORT]", HC_COMPLETE_NONE, NULL, NULL},
    HC_BOOTSTRAP_OPTS,
    {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
};

static const struct hc_cmd_opt join_token_opts[] = {
    {"ttl", 0, HC_OPT_DURATION, 0, "how long the token stays valid", "DUR", HC_COMPLETE_NONE,
     "1h", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, NULL, NULL},
};

static const struct hc_cmd_verb cluster_verbs[] = {
    {"create", cmd_create, create_opts, 1, 1,
     "name the cluster and bring its first nodes in over SSH (agents pushed and enrolled)",
     "NAME", 0, HC_COMPLETE_NONE},
    {"join-token", cmd_join_token, join_token_opts, 0, 0,
     "create a one-time token with which a new node joins (hcagent join)", NULL, 0,
     HC_COMPLETE_NONE},
    {"status", cmd_status, NULL, 0, 0,
     "show the cluster, node health counts, active operations and the controller", NULL, 0,
     HC_COMPLETE_NONE},
    {NULL, NULL, NULL, 0, 0, NULL, NULL, 0, HC_COMPLETE_NONE},
};

const struct hc_cmd_group hc_cmd_group_cluster = {
    "cluster", "the cluster as a whole: create, status and join tokens", cluster_verbs, 0};
