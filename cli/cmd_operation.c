/*
 * `hcctl operation`: list, show and wait for operations (the controller's durable state
 * machines). hc_cmd_op_wait is also how every command that starts an operation follows it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "cli/progress.h"
#include "common/json_util.h"
#include "common/op_state.h"
#include "common/util.h"

#define POLL_MIN_MS 250
#define POLL_MAX_MS 1000

static const char *const *const op_states = hc_op_state_names;

/* {"node","step"} -> "step 'leave' on n2". */
static void fmt_progress(const struct hc_output *o, const json_t *v, char *buf, size_t len,
                         enum hc_color *color)
{
    const char *step = hc_json_str(v, "step", NULL), *node = hc_json_str(v, "node", NULL);
    *color = HC_COLOR_NONE;
    if (!step) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(buf, len, "step '%s'%s%s", step, node ? " on " : "", node ? node : "");
}

static const struct hc_col list_cols[] = {
    {"ID", "id", NULL},
    {"KIND", "kind", NULL},
    {"STATE", "state", hc_fmt_state},
    {"REQUESTED BY", "requested_by", NULL},
    {"WAITING ON", "waiting_on", NULL},
    {"CREATED", "created_at", hc_fmt_age},
    {"FINISHED", "finished_at", hc_fmt_age},
    {NULL, NULL, NULL},
};

static const struct hc_section list_view[] = {
    {HC_SECTION_TABLE, NULL, "operations", list_cols},
    {0, NULL, NULL, NULL},
};

static const struct hc_col show_fields[] = {
    {"ID", "id", NULL},
    {"Kind", "kind", NULL},
    {"State", "state", hc_fmt_state},
    {"Disruptive", "disruptive", NULL},
    {"Params", "params", NULL},
    {"Requested by", "requested_by", NULL},
    {"Progress", "progress", fmt_progress},
    {"Waiting on", "waiting_on", NULL},
    {"Error", "error", hc_fmt_error},
    {"Hint", "error.hint", NULL},
    {"Created", "created_at", hc_fmt_time},
    {"Started", "started_at", hc_fmt_time},
    {"Finished", "finished_at", hc_fmt_time},
    {NULL, NULL, NULL},
};

static const struct hc_col step_cols[] = {
    {"SEQ", "seq", NULL},
    {"NODE", "node", NULL},
    {"STEP", "step", NULL},
    {"STATE", "state", hc_fmt_state},
    {"ATTEMPTS", "attempts", NULL},
    {"STARTED", "started_at", hc_fmt_age},
    {"FINISHED", "finished_at", hc_fmt_age},
    {"DETAIL", "detail", NULL},
    {NULL, NULL, NULL},
};

static const struct hc_section show_view[] = {
    {HC_SECTION_FIELDS, NULL, "operation", show_fields},
    {HC_SECTION_TABLE, "Steps", "steps", step_cols},
    {0, NULL, NULL, NULL},
};

static int cmd_list(struct hc_cmd_ctx *ctx)
{
    char path[256] = "/v1/operations";
    const char *state = hc_cmd_opt_str(ctx, "state");
    if (state && hc_api_client_query_add(path, sizeof(path), "state", state) < 0)
        return hc_cmd_usage(ctx, NULL, "--state value is too long");
    return hc_cmd_show_list(ctx, path, "operations", list_view);
}

static int cmd_show(struct hc_cmd_ctx *ctx)
{
    char path[1024];
    if (hc_cmd_path(path, sizeof(path), "/v1/operations/", ctx->argv[0]) < 0)
        return hc_cmd_usage(ctx, NULL, "operation id '%.64s...' is too long", ctx->argv[0]);
    return hc_cmd_show(ctx, path, show_view);
}

/* "op-1 running: step 'leave' on n2 (waiting on agent n2 to answer)". */
static void progress_line(const json_t *op, char *buf, size_t len)
{
    char where[300];
    enum hc_color unused;
    const char *waiting = hc_json_str(op, "waiting_on", NULL);
    fmt_progress(NULL, json_object_get(op, "progress"), where, sizeof(where), &unused);
    snprintf(buf, len, "%s %s%s%s%s%s%s", hc_json_str(op, "id", "?"), hc_json_str(op, "state", "?"),
             strcmp(where, "-") ? ": " : "", strcmp(where, "-") ? where : "",
             waiting ? " (waiting on " : "", waiting ? waiting : "", waiting ? ")" : "");
}

/* The end of a wait: the final document, or the operation's error (exit 1, or 5 when the
 * operation refused an unsafe precondition). */
static int op_finished(struct hc_cmd_ctx *ctx, const json_t *doc)
{
    const json_t *op = json_object_get(doc, "operation");
    const char *id = hc_json_str(op, "id", "?"), *state = hc_json_str(op, "state", "?");
    const json_t *oerr = json_object_get(op, "error");
    struct hc_error err = {0};
    if (strcmp(state, "succeeded") == 0) {
        hc_output_info(&ctx->out, "operation %s (%s) succeeded", id, hc_json_str(op, "kind", "?"));
        if (ctx->out.json)
            hc_output_json(&ctx->out, doc);
        return HC_EXIT_OK;
    }
    const char *message = hc_json_str(oerr, "message", NULL);
    const char *hint = hc_json_str(oerr, "hint", NULL);
    hc_error_set_wire(&err, 0, hc_json_str(oerr, "code", "operation_failed"),
                      "operation %s (%s) %s%s%s", id, hc_json_str(op, "kind", "?"), state,
                      message ? ": " : "", message ? message : "");
    if (hint)
        hc_error_hint(&err, "%s", hint);
    else
        hc_error_hint(&err, "see 'hcctl operation show %s'", id);
    hc_cmd_fail(ctx, &err, doc);
    return hc_exit_code_for_operation(&err);
}

static int op_timed_out(struct hc_cmd_ctx *ctx, const char *id, int64_t timeout_ms,
                        const json_t *last)
{
    struct hc_error err;
    char line[512] = "", span[32];
    if (last)
        progress_line(json_object_get(last, "operation"), line, sizeof(line));
    if (timeout_ms % 1000)
        snprintf(span, sizeof(span), "%lldms", (long long)timeout_ms);
    else
        hc_output_duration(timeout_ms / 1000, span, sizeof(span));
    hc_error_set(&err, HC_E(TIMEOUT), "operation %s did not end within %s%s%s", id, span,
                 line[0] ? "; last seen: " : "", line);
    hc_error_hint(&err,
                  "it goes on in the controller: 'hcctl operation wait %s' to keep "
                  "waiting, 'hcctl operation show %s' for its steps",
                  id, id);
    return hc_cmd_fail(ctx, &err, last);
}

/* A transport failure or a failover while polling: the controller may be restarting, or
 * another one taking over (operations are durable, their ids the same on every controller), so
 * keep polling until the deadline, and say so once. */
static int poll_again(struct hc_cmd_ctx *ctx, const struct hc_error *err, int *warned)
{
    if (!hc_api_client_transient(err))
        return 0;
    if (!*warned)
        hc_output_info(&ctx->out, "%s; retrying", err->message);
    *warned = 1;
    return 1;
}

/* Live progress (rows redrawn in place) when both stdout and stderr are terminals, plain lines
 * otherwise, nothing with -q. NULL: no progress. */
static struct hc_progress *progress_start(struct hc_cmd_ctx *ctx)
{
    int width = 0, out_fd = fileno(ctx->out.out);
    if (ctx->out.quiet)
        return NULL;
    int live =
        !ctx->out.json && out_fd >= 0 && isatty(out_fd) && hc_progress_tty(ctx->out.err, &width);
    return hc_progress_new(ctx->out.err, live, width, hc_now_ms());
}

int hc_cmd_follow(struct hc_cmd_ctx *ctx, const json_t *doc, int64_t timeout_ms, const char *fmt,
                  ...)
{
    const char *id = hc_json_str(json_object_get(doc, "operation"), "id", "");
    if (hc_cmd_opt_bool(ctx, "no-wait")) {
        hc_output_info(&ctx->out,
                       "operation %s started; follow it with 'hcctl operation wait "
                       "%s'",
                       id, id);
        if (ctx->out.json)
            hc_output_json(&ctx->out, doc);
        else
            fprintf(ctx->out.out, "%s\n", id);
        return HC_EXIT_OK;
    }
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    hc_output_info(&ctx->out, "%s: operation %s", what, id);
    return hc_cmd_op_wait(ctx, id, timeout_ms);
}

int hc_cmd_op_wait(struct hc_cmd_ctx *ctx, const char *id, int64_t timeout_ms)
{
    char path[1024], line[512], last_line[512] = "";
    int64_t deadline = hc_mono_ms() + timeout_ms, interval = POLL_MIN_MS;
    json_t *last = NULL;
    int rc, warned = 0;
    struct hc_progress *progress = NULL;
    if (hc_cmd_path(path, sizeof(path), "/v1/operations/", id) < 0)
        return hc_cmd_usage(ctx, NULL, "operation id '%.64s...' is too long", id);
    progress = progress_start(ctx);
    for (;;) {
        struct hc_error err = {0};
        json_t *doc = hc_cmd_request(ctx, "GET", path, NULL, &err);
        /* Retry only once a controller has answered (this poll or the request that started the
         * operation): a wrong URL fails at once. */
        int answered = last || (ctx->api && hc_api_client_answered(ctx->api));
        if (!doc && (!answered || !poll_again(ctx, &err, &warned))) {
            rc = hc_cmd_fail(ctx, &err, NULL);
            goto cleanup;
        }
        if (!doc)
            hc_progress_break(progress); /* "retrying" went below the frame */
        if (doc) {
            json_decref(last);
            last = doc;
            warned = 0;
            const json_t *op = json_object_get(doc, "operation");
            if (progress)
                hc_progress_update(progress, doc, hc_now_ms());
            if (hc_op_state_terminal(hc_json_str(op, "state", ""))) {
                rc = op_finished(ctx, doc);
                goto cleanup;
            }
            /* Back off while nothing changes; any change resets the pace. */
            progress_line(op, line, sizeof(line));
            interval = strcmp(line, last_line) ? POLL_MIN_MS : interval * 2;
            if (interval > POLL_MAX_MS)
                interval = POLL_MAX_MS;
            snprintf(last_line, sizeof(last_line), "%s", line);
        }
        int64_t left = deadline - hc_mono_ms();
        if (left <= 0) {
            rc = op_timed_out(ctx, id, timeout_ms, last);
            goto cleanup;
        }
        hc_sleep_ms(interval < left ? interval : left);
    }
cleanup:
    hc_progress_free(progress);
    json_decref(last);
    return rc;
}

static int cmd_wait(struct hc_cmd_ctx *ctx)
{
    return hc_cmd_op_wait(ctx, ctx->argv[0], hc_cmd_opt_ms(ctx, "timeout"));
}

static const struct hc_cmd_opt list_opts[] = {
    HC_OPT(.name = "state", .type = HC_OPT_STRING, .help = "only operations in this state",
           .value_name = "STATE", .completer = HC_COMPLETE_CHOICES, .choices = op_states),
    {.name = NULL},
};

static const struct hc_cmd_opt wait_opts[] = {
    HC_OPT(.name = "timeout", .type = HC_OPT_DURATION,
           .help = "how long to wait for the operation to end", .value_name = "DUR", .def = "10m"),
    {.name = NULL},
};

static const struct hc_cmd_verb operation_verbs[] = {
    HC_VERB(.name = "list", .handler = cmd_list, .opts = list_opts,
            .summary = "list operations, newest first"),
    HC_VERB(.name = "show", .handler = cmd_show, .min_args = 1, .max_args = 1,
            .summary = "show one operation and its steps", .usage = "ID",
            .arg_completer = HC_COMPLETE_OPERATION),
    HC_VERB(.name = "wait", .handler = cmd_wait, .opts = wait_opts, .min_args = 1, .max_args = 1,
            .summary =
                "wait until an operation ends (exit 0 succeeded, 1 failed or aborted, 6 timed out)",
            .usage = "ID", .arg_completer = HC_COMPLETE_OPERATION),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_operation = {
    .name = "operation",
    .summary = "the controller's long-running operations",
    .verbs = operation_verbs,
};
