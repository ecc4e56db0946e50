/*
 * `hcctl config`: the storage service's configuration, a revision at a time (docs/config.md).
 *   config show [--node NODE] [--defaults]
 *   config set KEY=VALUE... [-m MESSAGE] [--max-unavailable N] [--batch node|domain] [--dry-run]
 * [--no-wait] [--yes]
 *     [--skip-checks ID,...]
 *   config unset KEY... [same options]
 *   config revert REV [same options]
 *   config history | diff [REV [REV]] | status | apply [--max-unavailable N] [--batch node|domain]
 * [--dry-run] A change that touches a restart setting restarts the service node by node:
 * disruptive, so it asks (or needs --yes); a live one is handed to every node at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"
#include "common/settings.h"

static const struct hc_col settings_cols[] = {
    {"SETTING", "name", NULL}, {"VALUE", "value", NULL},     {"DEFAULT", "default", NULL},
    {"APPLY", "apply", NULL},  {"ALLOWED", "allowed", NULL}, {NULL, NULL, NULL},
};

static const struct hc_section show_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL,
     (const struct hc_col[]){{"Revision", "revision", NULL},
                             {"Version", "version", NULL},
                             {"Node", "node", NULL},
                             {"State", "state", NULL},
                             {"Detail", "detail", NULL},
                             {NULL, NULL, NULL}}},
    {HC_SECTION_TABLE, "Settings", "settings", settings_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_show(struct hc_cmd_ctx *ctx)
{
    char path[512] = "/v1/config", node[400];
    const char *name = hc_cmd_opt_str(ctx, "node");
    if (name && hc_cmd_path(node, sizeof(node), "", name) < 0)
        return hc_cmd_usage(ctx, "a node name", "--node is too long");
    snprintf(path, sizeof(path), "/v1/config?%s%s%s", name ? "node=" : "", name ? node : "",
             hc_cmd_opt_bool(ctx, "defaults") ? (name ? "&defaults=1" : "defaults=1") : "");
    return hc_cmd_show(ctx, path, show_view);
}

static const struct hc_col change_cols[] = {
    {"SETTING", "name", NULL}, {"OLD", "old", NULL}, {"NEW", "new", NULL},
    {"APPLY", "apply", NULL},  {NULL, NULL, NULL},
};

static const struct hc_section change_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL,
     (const struct hc_col[]){{"Revision", "revision", NULL},
                             {"From", "from", NULL},
                             {"To", "to", NULL},
                             {"Restart", "restart", NULL},
                             {NULL, NULL, NULL}}},
    {HC_SECTION_TABLE, "Changes", "changes", change_cols},
    {0, NULL, NULL, NULL},
};

/* POST /v1/config with body (taken over): a dry run, or the new revision followed to its end. */
static int change(struct hc_cmd_ctx *ctx, json_t *body, const char *what)
{
    struct hc_error err = {0};
    int64_t maxu = hc_cmd_opt_int(ctx, "max-unavailable");
    int dry = hc_cmd_opt_bool(ctx, "dry-run");
    if (maxu < 1) {
        json_decref(body);
        return hc_cmd_usage(ctx, "at least 1", "invalid --max-unavailable %lld", (long long)maxu);
    }
    json_object_set_new(body, "max_unavailable", json_integer(maxu));
    json_object_set_new(body, "node_timeout_seconds",
                        json_integer(hc_cmd_opt_ms(ctx, "node-timeout") / 1000));
    json_object_set_new(body, "dry_run", json_boolean(1));
    int skip_rc = hc_cmd_skip_checks(ctx, body);
    if (skip_rc == HC_EXIT_OK)
        skip_rc = hc_cmd_batch(ctx, body);
    if (skip_rc != HC_EXIT_OK) {
        json_decref(body);
        return skip_rc;
    }
    if (hc_cmd_opt_set(ctx, "message"))
        json_object_set_new(body, "message", json_string(hc_cmd_opt_str(ctx, "message")));
    /* The dry run first: it validates everything and says whether a restart is needed. */
    json_t *plan = hc_cmd_request(ctx, "POST", "/v1/config", body, &err), *doc = NULL;
    int rc = HC_EXIT_OK;
    if (!plan) {
        json_decref(body);
        return hc_cmd_fail(ctx, &err, NULL);
    }
    int restart = json_is_true(json_object_get(plan, "restart"));
    if (dry || json_array_size(json_object_get(plan, "changes")) == 0) {
        if (!dry)
            hc_output_info(&ctx->out, "no change: revision %lld already has these values",
                           (long long)hc_json_int(plan, "revision", 0));
        if (ctx->out.json)
            hc_output_json(&ctx->out, plan);
        else if (dry) {
            hc_output_render(&ctx->out, change_view, plan);
            fprintf(ctx->out.out, "\nPre-flight checks (errors refuse the change):\n");
            hc_cmd_checks_render(ctx, json_object_get(plan, "checks"));
        }
        goto done;
    }
    if (restart && hc_cmd_confirm(ctx, &err,
                                  "%s restarts the storage service on every node, %lld at a "
                                  "time",
                                  what, (long long)maxu) < 0) {
        rc = hc_cmd_fail(ctx, &err, NULL);
        goto done;
    }
    json_object_set_new(body, "dry_run", json_boolean(0));
    if (!(doc = hc_cmd_request(ctx, "POST", "/v1/config", body, &err))) {
        rc = hc_cmd_fail(ctx, &err, NULL);
        goto done;
    }
    hc_output_info(&ctx->out, "revision %lld recorded (%zu change(s), %s)",
                   (long long)hc_json_int(doc, "revision", 0),
                   json_array_size(json_object_get(doc, "changes")),
                   restart ? "restart: node by node" : "live: every node at once");
    rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"), "configuration revision %lld",
                       (long long)hc_json_int(doc, "revision", 0));
done:
    json_decref(plan);
    json_decref(doc);
    json_decref(body);
    return rc;
}

static int cmd_set(struct hc_cmd_ctx *ctx)
{
    json_t *set = json_object();
    for (int i = 0; i < ctx->argc; i++) {
        const char *eq = strchr(ctx->argv[i], '=');
        char key[HC_SETTING_NAME_MAX + 2];
        if (!eq || eq == ctx->argv[i] || (size_t)(eq - ctx->argv[i]) > HC_SETTING_NAME_MAX) {
            json_decref(set);
            return hc_cmd_usage(ctx, "KEY=VALUE, e.g. log_level=debug (see hcctl config show)",
                                "'%s' is not KEY=VALUE", ctx->argv[i]);
        }
        snprintf(key, sizeof(key), "%.*s", (int)(eq - ctx->argv[i]), ctx->argv[i]);
        if (json_object_get(set, key)) {
            json_decref(set);
            return hc_cmd_usage(ctx, "give each setting once", "%s is given twice", key);
        }
        json_object_set_new(set, key, json_string(eq + 1));
    }
    return change(ctx, json_pack("{s:o}", "set", set), "this change");
}

static int cmd_unset(struct hc_cmd_ctx *ctx)
{
    json_t *unset = json_array();
    for (int i = 0; i < ctx->argc; i++)
        json_array_append_new(unset, json_string(ctx->argv[i]));
    return change(ctx, json_pack("{s:o}", "unset", unset), "this change");
}

static int parse_rev(struct hc_cmd_ctx *ctx, const char *s, int64_t *out)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < 0)
        return hc_cmd_usage(ctx, "a revision number (hcctl config history)",
                            "'%s' is not a revision", s);
    *out = v;
    return 0;
}

static int cmd_revert(struct hc_cmd_ctx *ctx)
{
    int64_t rev = 0;
    if (parse_rev(ctx, ctx->argv[0], &rev) != 0)
        return HC_EXIT_USAGE;
    return change(ctx, json_pack("{s:I}", "revert", (json_int_t)rev), "this revert");
}

static const struct hc_col history_cols[] = {
    {"REV", "revision", NULL},    {"ACTION", "action", NULL},
    {"AUTHOR", "author", NULL},   {"TIME", "created_at", hc_fmt_time},
    {"MESSAGE", "message", NULL}, {"OPERATION", "operation_id", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section history_view[] = {
    {HC_SECTION_TABLE, NULL, "revisions", history_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_history(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_show(ctx, "/v1/config/history", history_view);
}

static int cmd_diff(struct hc_cmd_ctx *ctx)
{
    char path[128] = "/v1/config/diff";
    int64_t a = 0, b = 0;
    if (ctx->argc >= 1 && parse_rev(ctx, ctx->argv[0], &a) != 0)
        return HC_EXIT_USAGE;
    if (ctx->argc == 2 && parse_rev(ctx, ctx->argv[1], &b) != 0)
        return HC_EXIT_USAGE;
    if (ctx->argc == 1)
        snprintf(path, sizeof(path), "/v1/config/diff?from=%lld", (long long)a);
    else if (ctx->argc == 2)
        snprintf(path, sizeof(path), "/v1/config/diff?from=%lld&to=%lld", (long long)a,
                 (long long)b);
    return hc_cmd_show(ctx, path, change_view);
}

static const struct hc_col status_cols[] = {
    {"NODE", "name", NULL},
    {"VERSION", "software_version", NULL},
    {"APPLIED", "applied_revision", NULL},
    {"STATE", "state", hc_fmt_state},
    {"DETAIL", "detail", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section status_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL,
     (const struct hc_col[]){{"Desired revision", "revision", NULL}, {NULL, NULL, NULL}}},
    {HC_SECTION_TABLE, "Nodes", "nodes", status_cols},
    {0, NULL, NULL, NULL},
};

/* Exit 4 when some node is not in sync (a check that found something), like net check-jumbo. */
static int cmd_status(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    json_t *doc = hc_cmd_request(ctx, "GET", "/v1/config/status", NULL, &err), *node;
    size_t i, off = 0;
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    hc_output_render(&ctx->out, status_view, doc);
    json_array_foreach(json_object_get(doc, "nodes"), i, node) off +=
        strcmp(hc_json_str(node, "state", ""), "in_sync") != 0;
    json_decref(doc);
    if (off)
        hc_output_info(&ctx->out, "%zu node(s) not in sync", off);
    return off ? HC_EXIT_CHECK : HC_EXIT_OK;
}

static int cmd_apply(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    int64_t maxu = hc_cmd_opt_int(ctx, "max-unavailable");
    if (maxu < 1)
        return hc_cmd_usage(ctx, "at least 1", "invalid --max-unavailable %lld", (long long)maxu);
    json_t *body =
        json_pack("{s:I, s:I, s:b}", "max_unavailable", (json_int_t)maxu, "node_timeout_seconds",
                  (json_int_t)(hc_cmd_opt_ms(ctx, "node-timeout") / 1000), "dry_run", 1);
    int rc = hc_cmd_batch(ctx, body);
    if (rc != HC_EXIT_OK) {
        json_decref(body);
        return rc;
    }
    json_t *plan = hc_cmd_request(ctx, "POST", "/v1/config/apply", body, &err), *doc = NULL;
    if (!plan) {
        rc = hc_cmd_fail(ctx, &err, NULL);
        goto done;
    }
    size_t n = json_array_size(json_object_get(plan, "nodes"));
    if (hc_cmd_opt_bool(ctx, "dry-run") || n == 0) {
        if (n == 0)
            hc_output_info(&ctx->out, "every reachable node has revision %lld",
                           (long long)hc_json_int(plan, "revision", 0));
        if (ctx->out.json)
            hc_output_json(&ctx->out, plan);
        goto done;
    }
    if (json_is_true(json_object_get(plan, "restart")) &&
        hc_cmd_confirm(ctx, &err,
                       "apply revision %lld to %zu node(s), restarting the service on each, "
                       "%lld at a time",
                       (long long)hc_json_int(plan, "revision", 0), n, (long long)maxu) < 0) {
        rc = hc_cmd_fail(ctx, &err, NULL);
        goto done;
    }
    json_object_set_new(body, "dry_run", json_boolean(0));
    if (!(doc = hc_cmd_request(ctx, "POST", "/v1/config/apply", body, &err)))
        rc = hc_cmd_fail(ctx, &err, NULL);
    else
        rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"),
                           "configuration revision %lld to %zu node(s)",
                           (long long)hc_json_int(doc, "revision", 0), n);
done:
    json_decref(body);
    json_decref(plan);
    json_decref(doc);
    return rc;
}

#define CHANGE_OPTS                                                                                \
    HC_OPT(.name = "message", .short_name = 'm', .type = HC_OPT_STRING,                            \
           .help = "why, recorded with the revision", .value_name = "TEXT"),                       \
        HC_OPT(.name = "max-unavailable", .type = HC_OPT_INT,                                      \
               .help = "nodes restarted at once for a restart setting, counting those down",       \
               .value_name = "N", .def = "1"),                                                     \
        HC_BATCH_OPT,                                                                              \
        HC_OPT(.name = "node-timeout", .type = HC_OPT_DURATION,                                    \
               .help = "how long each wait on one node may take", .value_name = "DUR",             \
               .def = "5m"),                                                                       \
        HC_OPT(.name = "dry-run", .type = HC_OPT_BOOL,                                             \
               .help = "validate and print the changes; record nothing"),                          \
        HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,                                             \
               .help = "return once the operation is accepted (prints its id)"),                   \
        HC_SKIP_CHECKS_OPT,                                                                        \
        HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,                                         \
               .help = "how long to follow the operation", .value_name = "DUR", .def = "2h")

static const struct hc_cmd_opt change_opts[] = {CHANGE_OPTS, {.name = NULL}};

static const struct hc_cmd_opt show_opts[] = {
    HC_OPT(.name = "node", .type = HC_OPT_STRING,
           .help = "what that node has (its applied revision under its version)",
           .value_name = "NODE", .completer = HC_COMPLETE_NODE),
    HC_OPT(.name = "defaults", .type = HC_OPT_BOOL, .help = "the schema's defaults alone"),
    {.name = NULL},
};

static const struct hc_cmd_opt apply_opts[] = {
    HC_OPT(.name = "max-unavailable", .type = HC_OPT_INT,
           .help = "nodes restarted at once, counting those down", .value_name = "N", .def = "1"),
    HC_BATCH_OPT,
    HC_OPT(.name = "node-timeout", .type = HC_OPT_DURATION,
           .help = "how long each wait on one node may take", .value_name = "DUR", .def = "5m"),
    HC_OPT(.name = "dry-run", .type = HC_OPT_BOOL, .help = "print the nodes it would change"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION, .help = "how long to follow the operation",
           .value_name = "DUR", .def = "2h"),
    {.name = NULL},
};

static const struct hc_cmd_verb config_verbs[] = {
    HC_VERB(.name = "show", .handler = cmd_show, .opts = show_opts,
            .summary = "the desired revision and every setting's value"),
    HC_VERB(.name = "set", .handler = cmd_set, .opts = change_opts, .min_args = 1,
            .max_args = HC_ARGS_MANY, .usage = "KEY=VALUE...",
            .summary = "record a new revision and apply it (a restart setting asks, or needs "
                       "--yes)",
            .flags = HC_CMD_DISRUPTIVE),
    HC_VERB(.name = "unset", .handler = cmd_unset, .opts = change_opts, .min_args = 1,
            .max_args = HC_ARGS_MANY, .usage = "KEY...",
            .summary = "back to the defaults for these settings (a new revision)",
            .flags = HC_CMD_DISRUPTIVE),
    HC_VERB(.name = "revert", .handler = cmd_revert, .opts = change_opts, .min_args = 1,
            .max_args = 1, .usage = "REV",
            .summary = "the values of an earlier revision again (a new revision)",
            .flags = HC_CMD_DISRUPTIVE),
    HC_VERB(.name = "history", .handler = cmd_history, .summary = "every revision, newest first"),
    HC_VERB(.name = "diff", .handler = cmd_diff, .max_args = 2, .usage = "[REV [REV]]",
            .summary = "what changed between two revisions (default: the last change)"),
    HC_VERB(.name = "status", .handler = cmd_status,
            .summary = "per node: applied revision and state (exit 4 when one is not in sync)"),
    HC_VERB(.name = "apply", .handler = cmd_apply, .opts = apply_opts,
            .summary = "the desired revision again, to the nodes not in sync",
            .flags = HC_CMD_DISRUPTIVE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_config = {
    .name = "config",
    .summary = "the storage service's settings and resource bounds, by revision",
    .verbs = config_verbs,
};
