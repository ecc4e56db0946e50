/*
 * `hcctl events`: the controller's append-only event log, printed oldest first. By default the
 * newest --limit events (what an operator looks for), with a note on stderr when older ones
 * exist and how to page back (--before); --since ID reads forward from an event id instead.
 * --follow prints the newest page (or the events after --since), then reads the controller's
 * watch stream (GET /v1/watch, docs/api.md "Watch") from the last event printed until
 * SIGINT/SIGTERM, reconnecting from there when the stream ends (a controller without the watch
 * is polled instead); with -o json it streams JSON Lines (one compact event object per line),
 * the one exception to "one JSON document per command".
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/api_client.h"
#include "cli/exit_codes.h"
#include "cli/groups.h"
#include "common/json_util.h"
#include "common/stop.h"

#define FOLLOW_POLL_MS 1000
#define FOLLOW_IDLE_MS 35000 /* a watch silent this long (3 heartbeats missed) is reconnected */

static const struct hc_col event_cols[] = {
    {"ID", "id", NULL},       {"TIME", "ts", NULL}, /* raw RFC 3339: an age in a log line is stale a
                                                       second later */
    {"TYPE", "type", NULL},   {"NODE", "node", NULL},       {"OPERATION", "op_id", NULL},
    {"ACTOR", "actor", NULL}, {"MESSAGE", "message", NULL}, {NULL, NULL, NULL},
};

static const struct hc_section events_view[] = {
    {HC_SECTION_TABLE, NULL, "events", event_cols},
    {0, NULL, NULL, NULL},
};

static struct hc_stop follow_stop;

static void on_stop(int sig)
{
    (void)sig;
    hc_stop_request(&follow_stop);
}

/* Adds "&key=N" for n > 0. */
static int query_num(char *path, size_t len, const char *key, int64_t n)
{
    char num[32];
    snprintf(num, sizeof(num), "%lld", (long long)n);
    return n > 0 ? hc_api_client_query_add(path, len, key, num) : 0;
}

/* "/v1/events?since=..&before=..&limit=..&newest=1&type=..&node=..": newest asks for the newest
 * page rather than the oldest. Returns 0 or -1 when it does not fit. */
static int events_path(const struct hc_cmd_ctx *ctx, int64_t since, int newest, char *path,
                       size_t len)
{
    const char *type = hc_cmd_opt_str(ctx, "type"), *node = hc_cmd_opt_str(ctx, "node");
    snprintf(path, len, "/v1/events");
    if (query_num(path, len, "since", since) < 0 ||
        query_num(path, len, "before", hc_cmd_opt_int(ctx, "before")) < 0 ||
        query_num(path, len, "limit", hc_cmd_opt_int(ctx, "limit")) < 0 ||
        (newest && hc_api_client_query_add(path, len, "newest", "1") < 0))
        return -1;
    if (type && hc_api_client_query_add(path, len, "type", type) < 0)
        return -1;
    return node ? hc_api_client_query_add(path, len, "node", node) : 0;
}

/* State of a --follow loop. */
struct follow {
    int64_t since;
    int newest;     /* the first round asks for the newest page (no --since given) */
    int widths[16]; /* column widths so far (text) */
    int header;     /* the header is still to be printed (text) */
    int answered;   /* the controller answered at least once */
    int warned;     /* "retrying" was said for the current outage */
    int code;       /* exit code when the loop ends on an error */
    int poll;       /* the controller has no watch stream: poll GET /v1/events */
    struct hc_cmd_ctx *ctx;
};

/* Prints one batch of a followed stream. */
static void follow_print(struct hc_cmd_ctx *ctx, struct follow *f, const json_t *events)
{
    if (ctx->out.json) {
        size_t i;
        json_t *ev;
        json_array_foreach(events, i, ev) hc_output_json(&ctx->out, ev);
        return;
    }
    if (f->header || json_array_size(events) > 0) {
        hc_output_table(&ctx->out, event_cols, events, f->widths, f->header);
        fflush(ctx->out.out);
        f->header = 0;
    }
}

static void follow_sleep(void)
{
    struct timespec ts = {FOLLOW_POLL_MS / 1000, (FOLLOW_POLL_MS % 1000) * 1000000L};
    if (!hc_stop_requested(&follow_stop))
        nanosleep(&ts, NULL); /* SIGINT interrupts it: no SA_RESTART */
}

/* One round of --follow: fetch, print, advance since. Returns 1 to go on, 0 to stop (f->code
 * says how). */
static int follow_round(struct hc_cmd_ctx *ctx, struct follow *f)
{
    char path[2048];
    struct hc_error err = {0};
    if (events_path(ctx, f->since, f->newest, path, sizeof(path)) < 0) {
        f->code = hc_cmd_usage(ctx, NULL, "--type or --node value is too long");
        return 0;
    }
    json_t *doc = hc_cmd_request(ctx, "GET", path, NULL, &err);
    if (!doc && hc_stop_requested(&follow_stop))
        return 0; /* the request was cut short by Ctrl-C */
    /* Once the controller has answered, a transport failure is a restart, a failover or a
     * network blip: keep trying. Before that, it is a wrong address: fail at once. */
    if (!doc && f->answered && hc_api_client_transient(&err)) {
        if (!f->warned)
            hc_output_info(&ctx->out, "%s; retrying", err.message);
        f->warned = 1;
        follow_sleep();
        return 1;
    }
    if (!doc) {
        f->code = hc_cmd_fail(ctx, &err, NULL);
        return 0;
    }
    const json_t *events = json_object_get(doc, "events");
    f->answered = 1;
    f->warned = 0;
    f->newest = 0; /* from here on: whatever comes after the last event seen */
    follow_print(ctx, f, events);
    f->since = hc_json_int(doc, "last_id", f->since);
    /* A full page means more are waiting: ask again at once. The watch stream (not f->poll)
     * needs no pause: it waits itself. */
    if (f->poll && (int64_t)json_array_size(events) < hc_cmd_opt_int(ctx, "limit"))
        follow_sleep();
    json_decref(doc);
    return 1;
}

static int watch_line(void *arg, const json_t *obj)
{
    struct follow *f = arg;
    json_t *ev = json_object_get(obj, "event");
    if (!ev)
        return 0; /* heartbeats and node changes */
    json_t *one = json_pack("[O]", ev);
    follow_print(f->ctx, f, one);
    json_decref(one);
    f->since = hc_json_int(ev, "id", f->since);
    return 0;
}

static int watch_stop(void *arg)
{
    (void)arg;
    return hc_stop_requested(&follow_stop);
}

/* One connection of the watch stream, from f->since; 1 to go on, 0 to stop (as follow_round). */
static int watch_round(struct hc_cmd_ctx *ctx, struct follow *f)
{
    char path[2048], num[32];
    struct hc_error err = {0};
    const char *type = hc_cmd_opt_str(ctx, "type"), *node = hc_cmd_opt_str(ctx, "node");
    struct hc_api_client *api = hc_cmd_api(ctx, &err);
    snprintf(num, sizeof(num), "%lld", (long long)f->since);
    snprintf(path, sizeof(path), "/v1/watch");
    if (api && (hc_api_client_query_add(path, sizeof(path), "since", num) < 0 ||
                (type && hc_api_client_query_add(path, sizeof(path), "type", type) < 0) ||
                (node && hc_api_client_query_add(path, sizeof(path), "node", node) < 0))) {
        f->code = hc_cmd_usage(ctx, NULL, "--type or --node value is too long");
        return 0;
    }
    if (api &&
        hc_api_client_stream(api, path, FOLLOW_IDLE_MS, watch_line, watch_stop, f, &err) == 0)
        return 1; /* the controller ended the stream (a restart): connect again */
    if (hc_stop_requested(&follow_stop))
        return 0;
    if (!strcmp(err.code, HC_ERR_NOT_FOUND) || !strcmp(err.code, "method_not_allowed")) {
        f->poll = 1; /* an older controller */
        return 1;
    }
    if (hc_api_client_transient(&err) || !strcmp(err.code, "too_many_watchers")) {
        if (!f->warned)
            hc_output_info(&ctx->out, "%s; retrying", err.message);
        f->warned = 1;
        follow_sleep();
        return 1;
    }
    f->code = hc_cmd_fail(ctx, &err, NULL);
    return 0;
}

static int follow(struct hc_cmd_ctx *ctx, int64_t since, int newest)
{
    struct sigaction sa, old_int, old_term;
    /* Typical widths up front, so that rows arriving after an empty first batch line up with
     * the header: id, RFC 3339 time, type, node, "op-" + 12 hex, actor. */
    struct follow f = {since, newest, {4, 24, 19, 6, 15, 10}, 1, 0, 0, HC_EXIT_OK, 0, ctx};
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    hc_stop_reset(&follow_stop);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    ctx->out.stream = 1;
    /* The first page (the newest, or from --since) as before; then the watch stream. */
    int go = follow_round(ctx, &f);
    while (go && !hc_stop_requested(&follow_stop))
        go = f.poll ? follow_round(ctx, &f) : watch_round(ctx, &f);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    /* Ended by the user: that is success (f.code stays 0). */
    return f.code;
}

/* A page that does not hold every matching event says so, on stderr (the data stays clean),
 * with the option that shows the rest. */
static void note_more(struct hc_cmd_ctx *ctx, const json_t *doc, int newest)
{
    const json_t *events = json_object_get(doc, "events");
    size_t n = json_array_size(events);
    if (!hc_json_bool(doc, "more", 0) || ctx->out.json || n == 0)
        return;
    if (newest)
        hc_output_info(&ctx->out,
                       "showing the newest %zu events; older ones exist: see them with "
                       "--before %lld, or raise --limit (at most 1000)",
                       n, (long long)hc_json_int(json_array_get(events, 0), "id", 0));
    else
        hc_output_info(&ctx->out, "showing %zu events; newer ones exist: go on with --since %lld",
                       n, (long long)hc_json_int(doc, "last_id", 0));
}

static int cmd_events(struct hc_cmd_ctx *ctx)
{
    struct hc_error err = {0};
    char path[2048];
    int64_t limit = hc_cmd_opt_int(ctx, "limit"), since = hc_cmd_opt_int(ctx, "since");
    /* Without --since: the newest page, the end of the log being what one looks for. */
    int newest = !hc_cmd_opt_set(ctx, "since");
    if (limit < 1 || limit > 1000)
        return hc_cmd_usage(ctx, NULL, "--limit must be between 1 and 1000");
    if (since < 0)
        return hc_cmd_usage(ctx, NULL, "--since must be an event id (0 or more)");
    if (hc_cmd_opt_set(ctx, "before") && hc_cmd_opt_int(ctx, "before") < 1)
        return hc_cmd_usage(ctx, NULL, "--before must be an event id (1 or more)");
    if (hc_cmd_opt_bool(ctx, "follow") && hc_cmd_opt_set(ctx, "before"))
        return hc_cmd_usage(ctx, "--follow prints what comes after the newest event",
                            "--before cannot be combined with --follow");
    if (hc_cmd_opt_bool(ctx, "follow"))
        return follow(ctx, since, newest);
    if (events_path(ctx, since, newest, path, sizeof(path)) < 0)
        return hc_cmd_usage(ctx, NULL, "--type or --node value is too long");
    json_t *doc = hc_cmd_request(ctx, "GET", path, NULL, &err);
    if (!doc)
        return hc_cmd_fail(ctx, &err, NULL);
    hc_output_render(&ctx->out, events_view, doc);
    note_more(ctx, doc, newest);
    json_decref(doc);
    return HC_EXIT_OK;
}

static const struct hc_cmd_opt events_opts[] = {
    HC_OPT(.name = "since", .type = HC_OPT_INT,
           .help = "the events after this event id, oldest first (default: the newest events)",
           .value_name = "ID"),
    HC_OPT(.name = "before", .type = HC_OPT_INT,
           .help = "only events before this event id (pages back)", .value_name = "ID"),
    HC_OPT(.name = "limit", .type = HC_OPT_INT,
           .help = "at most this many events (1-1000; with --follow, per request)",
           .value_name = "N", .def = "100"),
    HC_OPT(.name = "type", .type = HC_OPT_STRING,
           .help = "only events of this type (node.joined, api.call, ...)", .value_name = "TYPE"),
    HC_OPT(.name = "node", .type = HC_OPT_STRING, .help = "only events about this node",
           .value_name = "NODE", .completer = HC_COMPLETE_NODE),
    HC_OPT(.name = "follow", .short_name = 'f', .type = HC_OPT_BOOL,
           .help = "keep printing new events until interrupted (Ctrl-C)"),
    {.name = NULL},
};

static const struct hc_cmd_verb events_verbs[] = {
    HC_VERB(.name = "events", .handler = cmd_events, .opts = events_opts,
            .summary = "show the newest events of the log (or those after --since), oldest first"),
    {.name = NULL},
};

const struct hc_cmd_group hc_cmd_group_events = {
    .name = "events",
    .summary = "the controller's event log",
    .verbs = events_verbs,
    .flags = HC_GROUP_STANDALONE,
};
