/*
 * `hcctl maintenance`: storage maintenance of one node, its own operation.
 *   maintenance enter NODE [--mode ensure-accessibility|full|none] [--force] [--timeout DUR]
 *   maintenance exit NODE [--timeout DUR]
 *   maintenance status
 * Enter is refused (exit 5, with the storage service's reason) when it would leave data without
 * a serving replica or exceed the unavailable budget.
 */
#include <stdio.h>
#include <string.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"

static int cmd_enter(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *node = ctx->argv[0];
    char path[1024];
    if (hc_cmd_path(path, sizeof(path), "/v1/nodes/", node) < 0)
        return hc_cmd_usage(ctx, NULL, "node name too long");
    snprintf(path + strlen(path), sizeof(path) - strlen(path), "/maintenance");
    if (hc_cmd_confirm(ctx, &err, "put node '%s' into storage maintenance (%s)", node,
                       hc_cmd_opt_str(ctx, "mode")) < 0)
        return hc_cmd_fail(ctx, &err, NULL);
    json_t *body = json_pack("{s:s, s:b, s:I}", "mode", hc_cmd_opt_str(ctx, "mode"), "force",
                             hc_cmd_opt_bool(ctx, "force"), "timeout_seconds",
                             (json_int_t)(hc_cmd_opt_ms(ctx, "timeout") / 1000));
    json_t *doc = hc_cmd_request(ctx, "POST", path, body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    int rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout") + 30000,
                           "node %s entering maintenance", node);
    json_decref(doc);
    return rc;
}

static int cmd_exit(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *node = ctx->argv[0];
    char path[1024];
    if (hc_cmd_path(path, sizeof(path), "/v1/nodes/", node) < 0)
        return hc_cmd_usage(ctx, NULL, "node name too long");
    snprintf(path + strlen(path), sizeof(path) - strlen(path), "/maintenance");
    json_t *body =
        json_pack("{s:I}", "timeout_seconds", (json_int_t)(hc_cmd_opt_ms(ctx, "timeout") / 1000));
    json_t *doc = hc_cmd_request(ctx, "DELETE", path, body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    int rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout") + 30000,
                           "node %s leaving maintenance", node);
    json_decref(doc);
    return rc;
}

static const struct hc_col status_cols[] = {
    {"NODE", "name", NULL},
    {"MAINTENANCE", "maintenance", NULL},
    {"MODE", "mode", NULL},
    {"HEALTH", "health", hc_fmt_health},
    {"SERVICE", "service_state", NULL},
    {"OPERATION", "operation_id", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section status_view[] = {
    {HC_SECTION_TABLE, NULL, "nodes", status_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_status(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_show_list(ctx, "/v1/maintenance", "nodes", status_view);
}

static const char *const modes[] = {"ensure-accessibility", "full", "none", NULL};

static const struct hc_cmd_opt enter_opts[] = {
    HC_OPT(.name = "mode", .type = HC_OPT_STRING, .help = "how the data stays safe",
           .value_name = "MODE", .completer = HC_COMPLETE_CHOICES, .def = "ensure-accessibility",
           .choices = modes),
    HC_OPT(.name = "force", .type = HC_OPT_BOOL,
           .help = "with --mode none: skip the service's ok-to-stop"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "bound on every wait (drain, health, resync)", .value_name = "DUR", .def = "5m"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    {.name = NULL},
};

static const struct hc_cmd_opt exit_opts[] = {
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "bound on every wait (health, resync)", .value_name = "DUR", .def = "5m"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    {.name = NULL},
};

static const struct hc_cmd_verb maintenance_verbs[] = {
    HC_VERB(.name = "enter", .handler = cmd_enter, .opts = enter_opts, .min_args = 1, .max_args = 1,
            .summary = "drain and stop a node's storage service (disruptive: asks, or needs --yes)",
            .usage = "NODE", .flags = HC_CMD_DISRUPTIVE, .arg_completer = HC_COMPLETE_NODE),
    HC_VERB(.name = "exit", .handler = cmd_exit, .opts = exit_opts, .min_args = 1, .max_args = 1,
            .summary = "restart the service and wait until it is resynced", .usage = "NODE",
            .arg_completer = HC_COMPLETE_NODE),
    HC_VERB(.name = "status", .handler = cmd_status, .summary = "every node's maintenance state"),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_maintenance = {
    .name = "maintenance",
    .summary = "storage maintenance of one node at a time",
    .verbs = maintenance_verbs,
};
