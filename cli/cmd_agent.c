/*
 * `hcctl agent`: the node agents themselves (docs/agent-upgrade.md).
 *   agent upgrade --to VERSION [--dry-run] [--confirm-timeout DUR] [--node-timeout DUR]
 *                 [--yes] [--no-wait] [--timeout DUR]
 * An agent bundle is uploaded like a service bundle (hcctl software upload FILE); the upgrade
 * runs the operation agent.upgrade, one node at a time, and follows it.
 */
#include <stdio.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"

static const struct hc_col plan_cols[] = {
    {"NODE", "name", NULL},       {"FROM", "from_version", NULL},
    {"API", "api_version", NULL}, {"COMPAT", "api_compat", NULL},
    {"ACTION", "action", NULL},   {"STEPS", "steps", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section plan_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL,
     (const struct hc_col[]){{"To version", "to_version", NULL}, {NULL, NULL, NULL}}},
    {HC_SECTION_TABLE, "Plan (one node at a time; nothing is changed by --dry-run)", "nodes",
     plan_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_upgrade(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    const char *to = hc_cmd_opt_str(ctx, "to");
    int dry = hc_cmd_opt_bool(ctx, "dry-run"), rc = HC_EXIT_OK;
    json_t *body = json_pack(
        "{s:s, s:I, s:I, s:b}", "to_version", to, "confirm_timeout_seconds",
        (json_int_t)(hc_cmd_opt_ms(ctx, "confirm-timeout") / 1000), "node_timeout_seconds",
        (json_int_t)(hc_cmd_opt_ms(ctx, "node-timeout") / 1000), "dry_run", dry);
    if (!dry && hc_cmd_confirm(ctx, &err, "replace the agent on every node with %s, one at a time",
                               to) < 0) {
        json_decref(body);
        return hc_cmd_fail(ctx, &err, NULL);
    }
    json_t *doc = hc_cmd_request(ctx, "POST", "/v1/agent/upgrade", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (dry && ctx->out.json)
        hc_output_json(&ctx->out, doc);
    else if (dry)
        hc_output_render(&ctx->out, plan_view, json_object_get(doc, "plan"));
    else
        rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"), "agent upgrade to %s", to);
    json_decref(doc);
    return rc;
}

static const struct hc_cmd_opt upgrade_opts[] = {
    HC_OPT(.name = "to", .type = HC_OPT_STRING, .required = 1,
           .help = "the uploaded agent bundle's version", .value_name = "VERSION",
           .completer = HC_COMPLETE_BUNDLE),
    HC_OPT(.name = "dry-run", .type = HC_OPT_BOOL,
           .help = "print the ordered steps per node and change nothing"),
    HC_OPT(.name = "confirm-timeout", .type = HC_OPT_DURATION,
           .help = "how long a new agent has to come up before the node rolls it back",
           .value_name = "DUR", .def = "30s"),
    HC_OPT(.name = "node-timeout", .type = HC_OPT_DURATION,
           .help = "how long the controller waits for a node's agent to answer",
           .value_name = "DUR", .def = "1m"),
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION, .help = "how long to follow the operation",
           .value_name = "DUR", .def = "1h"),
    {.name = NULL},
};

static const struct hc_cmd_verb agent_verbs[] = {
    HC_VERB(.name = "upgrade", .handler = cmd_upgrade, .opts = upgrade_opts,
            .summary = "replace the node agents with an uploaded agent bundle, one node at a "
                       "time; the storage service keeps running (asks, or needs --yes)",
            .flags = HC_CMD_DISRUPTIVE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_agent = {
    .name = "agent",
    .summary = "the node agents: self-upgrade",
    .verbs = agent_verbs,
};
