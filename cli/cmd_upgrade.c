/*
 * `hcctl upgrade`: the rolling upgrade of the storage software.
 *   upgrade --rolling --to VERSION [--max-unavailable N] [--batch node|domain] [--node-timeout DUR]
 * [--dry-run]
 *     [--skip-checks ID,...]
 *           [--yes] [--no-wait] [--timeout DUR]
 *   upgrade status | pause | resume | abort
 */
#include <stdio.h>
#include <string.h>

#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"

static const struct hc_col plan_cols[] = {
    {"NODE", "name", NULL},     {"FROM", "from_version", NULL},
    {"ACTION", "action", NULL}, {"STEPS", "steps", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_col batch_cols[] = {
    {"DOMAINS", "domains", NULL},
    {"NODES", "nodes", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section plan_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL,
     (const struct hc_col[]){{"To version", "to_version", NULL},
                             {"Min upgrade from", "min_upgrade_from", NULL},
                             {"Max unavailable", "max_unavailable", NULL},
                             {"Batch", "batch", NULL},
                             {NULL, NULL, NULL}}},
    {HC_SECTION_TABLE, "Plan (in this order; nothing is changed by --dry-run)", "nodes", plan_cols},
    {HC_SECTION_TABLE,
     "Batches (--batch domain: each at once when the storage service answers ok-to-stop for it "
     "as a set, else one node at a time)",
     "batches", batch_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_rolling(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    if (!hc_cmd_opt_bool(ctx, "rolling"))
        return hc_cmd_usage(ctx, "hcctl upgrade --rolling --to VERSION",
                            "only rolling upgrades exist: add --rolling");
    int64_t maxu = hc_cmd_opt_int(ctx, "max-unavailable");
    if (maxu < 1)
        return hc_cmd_usage(ctx, "at least 1", "invalid --max-unavailable %lld", (long long)maxu);
    int dry = hc_cmd_opt_bool(ctx, "dry-run");
    json_t *body =
        json_pack("{s:s, s:I, s:I, s:b}", "to_version", hc_cmd_opt_str(ctx, "to"),
                  "max_unavailable", (json_int_t)maxu, "node_timeout_seconds",
                  (json_int_t)(hc_cmd_opt_ms(ctx, "node-timeout") / 1000), "dry_run", dry);
    int rc = hc_cmd_skip_checks(ctx, body);
    if (rc == HC_EXIT_OK)
        rc = hc_cmd_batch(ctx, body);
    if (rc != HC_EXIT_OK) {
        json_decref(body);
        return rc;
    }
    int domains = !strcmp(hc_json_str(body, "batch", "node"), "domain");
    if (!dry && hc_cmd_confirm(ctx, &err,
                               "upgrade the storage software on every node to %s, "
                               "%lld %s at a time",
                               hc_cmd_opt_str(ctx, "to"), (long long)maxu,
                               domains ? "failure domain(s)" : "node(s)") < 0) {
        json_decref(body);
        return hc_cmd_fail(ctx, &err, NULL);
    }
    json_t *doc = hc_cmd_request(ctx, "POST", "/v1/upgrade", body, &err);
    json_decref(body);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (dry && ctx->out.json) {
        hc_output_json(&ctx->out, doc); /* {"plan": ..., "checks": ...} */
    } else if (dry) {
        hc_output_render(&ctx->out, plan_view, json_object_get(doc, "plan"));
        fprintf(ctx->out.out, "\nPre-flight checks (errors refuse the upgrade):\n");
        hc_cmd_checks_render(ctx, json_object_get(doc, "checks"));
    } else {
        rc = hc_cmd_follow(ctx, doc, hc_cmd_opt_ms(ctx, "timeout"), "rolling upgrade to %s",
                           hc_cmd_opt_str(ctx, "to"));
    }
    json_decref(doc);
    return rc;
}

static const struct hc_col status_nodes[] = {
    {"NODE", "name", NULL},           {"FROM", "from_version", NULL}, {"TO", "to_version", NULL},
    {"STATE", "state", hc_fmt_state}, {"STEP", "step", NULL},         {NULL, NULL, NULL},
};

static const struct hc_section status_view[] = {
    {HC_SECTION_FIELDS, NULL, NULL,
     (const struct hc_col[]){{"Operation", "operation_id", NULL},
                             {"State", "state", hc_fmt_state},
                             {"To version", "to_version", NULL},
                             {"Done", "done", NULL},
                             {"Total", "total", NULL},
                             {"Waiting on", "waiting_on", NULL},
                             {"Error", "error.message", NULL},
                             {"Hint", "error.hint", NULL},
                             {NULL, NULL, NULL}}},
    {HC_SECTION_TABLE, "Nodes", "nodes", status_nodes},
    {0, NULL, NULL, NULL},
};

/* The controller answers state "none" (operation_id null) on a cluster that never ran an
 * upgrade: nothing is wrong, there is just nothing to show. */
static int never_ran(const json_t *st)
{
    return hc_json_str(st, "operation_id", NULL) == NULL;
}

static int cmd_status(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    json_t *doc = hc_cmd_request(ctx, "GET", "/v1/upgrade", NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    if (never_ran(doc) && !ctx->out.json) /* the text is the answer: stdout, exit 0 */
        fprintf(ctx->out.out, "no rolling upgrade has run\n");
    else
        hc_output_render(&ctx->out, status_view, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

/* pause / resume / abort the current upgrade through its operation. */
static int control(struct hc_cmd_ctx *ctx, const char *action)
{
    struct hc_error err = {0};
    char path[128];
    json_t *st = hc_cmd_request(ctx, "GET", "/v1/upgrade", NULL, &err);
    if (!st)
        return hc_cmd_fail(ctx, &err, NULL);
    if (never_ran(st)) {
        json_decref(st);
        hc_error_set(&err, HC_E(NOT_FOUND), "no rolling upgrade has run on this cluster");
        hc_error_hint(&err, "start one with 'hcctl upgrade --rolling --to VERSION'");
        return hc_cmd_fail(ctx, &err, NULL);
    }
    snprintf(path, sizeof(path), "/v1/operations/%s/%s", hc_json_str(st, "operation_id", ""),
             action);
    json_decref(st);
    if (!strcmp(action, "abort") &&
        hc_cmd_confirm(ctx, &err, "abort the rolling upgrade (nodes stay on working versions)") < 0)
        return hc_cmd_fail(ctx, &err, NULL);
    json_t *doc = hc_cmd_request(ctx, "POST", path, NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    const json_t *op = json_object_get(doc, "operation");
    hc_output_info(&ctx->out, "upgrade %s: %s requested, state %s", hc_json_str(op, "id", ""),
                   action, hc_json_str(op, "state", ""));
    if (ctx->out.json)
        hc_output_json(&ctx->out, doc);
    json_decref(doc);
    return HC_EXIT_OK;
}

static int cmd_pause(struct hc_cmd_ctx *ctx)
{
    return control(ctx, "pause");
}

static int cmd_resume(struct hc_cmd_ctx *ctx)
{
    return control(ctx, "resume");
}

static int cmd_abort(struct hc_cmd_ctx *ctx)
{
    return control(ctx, "abort");
}

static const struct hc_cmd_opt rolling_opts[] = {
    HC_OPT(.name = "rolling", .type = HC_OPT_BOOL,
           .help = "one node (or N) at a time, never more than the data tolerates"),
    HC_OPT(.name = "to", .type = HC_OPT_STRING, .required = 1,
           .help = "the uploaded version to run everywhere", .value_name = "VERSION",
           .completer = HC_COMPLETE_BUNDLE),
    HC_OPT(.name = "max-unavailable", .type = HC_OPT_INT,
           .help = "nodes (with --batch domain: failure domains) down at once, counting those "
                   "already down",
           .value_name = "N", .def = "1"),
    HC_BATCH_OPT,
    HC_OPT(.name = "node-timeout", .type = HC_OPT_DURATION,
           .help = "how long each wait on one node may take", .value_name = "DUR", .def = "5m"),
    HC_OPT(.name = "dry-run", .type = HC_OPT_BOOL,
           .help = "print the ordered steps per node and change nothing"),
    HC_SKIP_CHECKS_OPT,
    HC_OPT(.name = "no-wait", .type = HC_OPT_BOOL,
           .help = "return once the operation is accepted (prints its id)"),
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION, .help = "how long to follow the operation",
           .value_name = "DUR", .def = "2h"),
    {.name = NULL},
};

static const struct hc_cmd_verb upgrade_verbs[] = {
    /* the group's default verb, typed as its usage: "hcctl upgrade --rolling --to V" */
    HC_VERB(.name = "upgrade", .handler = cmd_rolling, .opts = rolling_opts,
            .summary =
                "upgrade every node to an uploaded version, N at a time (disruptive: asks, or "
                "needs --yes)",
            .usage = "--rolling", .flags = HC_CMD_DISRUPTIVE),
    HC_VERB(.name = "status", .handler = cmd_status, .summary = "the latest upgrade, node by node"),
    HC_VERB(.name = "pause", .handler = cmd_pause, .summary = "pause at the next safe point"),
    HC_VERB(.name = "resume", .handler = cmd_resume, .summary = "carry on a paused upgrade"),
    HC_VERB(.name = "abort", .handler = cmd_abort,
            .summary = "stop; every node is left on a working version", .flags = HC_CMD_DISRUPTIVE),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_upgrade = {
    .name = "upgrade",
    .summary = "rolling upgrades of the storage software",
    .verbs = upgrade_verbs,
};
