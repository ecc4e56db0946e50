/*
 * The watch stream (controller/api/watch.h). One shared snapshot of the nodes' listed fields
 * (less the ones the poller rewrites every cycle: last_seen, poll_latency_ms, uptime_seconds),
 * taken when the first watcher arrives and compared again whenever the nodes counter moves; each
 * watcher keeps its own last event id.
 */
#include "controller/api/watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"
#include "controller/state/events.h"
#include "controller/state/nodes.h"

#define WATCH_FILTER_MAX 128

struct watcher {
    struct hc_watch *w;
    struct hc_stream *s; /* NULL: free slot */
    int64_t last_id;
    int behind;         /* the last batch was full or cut short: more events wait */
    int64_t stalled_ms; /* since when its output has been above the soft bound, 0: it is not */
    int64_t heartbeat_ms;
    char token[HC_AUTH_TOKEN_TEXT_MAX];
    char type[WATCH_FILTER_MAX + 1], node[WATCH_FILTER_MAX + 1]; /* "" for any */
};

struct hc_watch {
    struct hc_api *api;
    struct event *tick;
    int count;
    int64_t events_gen, nodes_gen, tokens_gen;
    json_t *snapshot; /* {name: the node's compared fields, serialized} */
    struct watcher watchers[HC_WATCH_MAX];
};

static void watcher_free(struct watcher *x)
{
    x->s = NULL;
    if (--x->w->count == 0) {
        event_del(x->w->tick);
        json_decref(x->w->snapshot);
        x->w->snapshot = NULL;
    }
}

static void watcher_gone(struct hc_stream *s, void *arg)
{
    (void)s;
    watcher_free(arg);
}

static void watcher_drop(struct watcher *x, const char *why)
{
    HC_INFO("dropping a watcher of /v1/watch: %s", why);
    hc_stream_drop(x->s);
    watcher_free(x);
}

/* Sends one line (stolen); drops the watcher when it reads too slowly. 0, or -1 once
 * dropped. */
static int send_line(struct watcher *x, json_t *line)
{
    char *text = line ? hc_json_dump(line) : NULL;
    json_decref(line);
    if (!text) {
        watcher_drop(x, "out of memory");
        return -1;
    }
    size_t len = strlen(text);
    text[len] = '\n';
    int rc = hc_stream_write(x->s, text, len + 1);
    free(text);
    if (rc < 0 || hc_stream_pending(x->s) > HC_WATCH_MAX_PENDING) {
        watcher_drop(x, rc < 0 ? "cannot write" : "it reads too slowly");
        return -1;
    }
    return 0;
}

static int watcher_send(struct watcher *x, const char *key, json_t *value)
{
    return send_line(x, json_pack("{s:o}", key, value));
}

/* The events after the watcher's last id, at most HC_WATCH_BATCH (the rest next tick). */
static void watcher_events(struct watcher *x)
{
    struct hc_error err = {0};
    struct hc_events_query q = {
        x->last_id, 0, HC_WATCH_BATCH, 0, x->type[0] ? x->type : NULL, x->node[0] ? x->node : NULL};
    json_t *doc = hc_events_query(x->w->api->db, &q, &err);
    if (!doc) {
        HC_WARN("watch: cannot read events: %s", err.message);
        return;
    }
    size_t i;
    json_t *ev;
    int cut = 0;
    json_array_foreach(json_object_get(doc, "events"), i, ev)
    {
        if (hc_stream_pending(x->s) > HC_WATCH_SOFT_PENDING) {
            cut = 1; /* the rest when it has read some */
            break;
        }
        if (watcher_send(x, "event", json_incref(ev)) < 0)
            break;
        x->last_id = hc_json_int(ev, "id", x->last_id);
    }
    if (x->s)
        x->behind = cut || json_is_true(json_object_get(doc, "more"));
    json_decref(doc);
}

static char *node_fingerprint(const json_t *node)
{
    json_t *copy = json_deep_copy(node);
    json_object_del(copy, "last_seen");
    json_object_del(copy, "poll_latency_ms");
    json_object_del(copy, "uptime_seconds");
    char *text = copy ? json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(copy);
    return text;
}

/* Every watcher (of that node, with a node filter) gets the line. */
static void broadcast(struct hc_watch *w, const char *name, const char *key, const json_t *value)
{
    for (int i = 0; i < HC_WATCH_MAX; i++) {
        struct watcher *x = &w->watchers[i];
        if (x->s && (!x->node[0] || strcmp(x->node, name) == 0))
            watcher_send(x, key, json_deep_copy(value));
    }
}

/* The nodes list again, compared with the snapshot: changed and new nodes, and removed ones,
 * are broadcast (announce 0: only the snapshot is taken). */
static void nodes_compare(struct hc_watch *w, int announce)
{
    struct hc_error err = {0};
    json_t *doc = hc_nodes_list(w->api->db, &err);
    if (!doc) {
        HC_WARN("watch: cannot read nodes: %s", err.message);
        return;
    }
    json_t *next = json_object(), *node;
    size_t i;
    json_array_foreach(json_object_get(doc, "nodes"), i, node)
    {
        const char *name = hc_json_str(node, "name", "");
        char *fp = node_fingerprint(node);
        if (!fp)
            continue;
        const char *before = json_string_value(json_object_get(w->snapshot, name));
        if (announce && (!before || strcmp(before, fp) != 0))
            broadcast(w, name, "node", node);
        json_object_set_new(next, name, json_string(fp));
        free(fp);
    }
    const char *name;
    json_t *v;
    json_object_foreach(w->snapshot, name, v)
    {
        if (announce && !json_object_get(next, name)) {
            json_t *s = json_string(name);
            broadcast(w, name, "node_removed", s);
            json_decref(s);
        }
    }
    json_decref(w->snapshot);
    w->snapshot = next;
    json_decref(doc);
}

/* A revoked, rotated or expired token ends its watchers. */
static void tokens_recheck(struct hc_watch *w)
{
    for (int i = 0; i < HC_WATCH_MAX; i++) {
        struct watcher *x = &w->watchers[i];
        struct hc_auth_identity who;
        struct hc_error err = {0};
        if (x->s && hc_auth_verify(w->api->db, x->token, &who, &err) < 0 &&
            strcmp(err.code, HC_ERR_UNAUTHORIZED) == 0)
            watcher_drop(x, "its token is no longer valid");
    }
}

static void watch_tick(evutil_socket_t fd, short what, void *arg)
{
    struct hc_watch *w = arg;
    struct hc_api_cache *c = w->api->cache;
    struct hc_error err = {0};
    (void)fd, (void)what;
    if (hc_api_cache_refresh(c, w->api->db, &err) < 0) {
        HC_WARN("watch: %s", err.message);
        return;
    }
    int64_t now = hc_mono_ms();
    if (hc_api_cache_gen(c, HC_CHG_TOKENS) != w->tokens_gen) {
        w->tokens_gen = hc_api_cache_gen(c, HC_CHG_TOKENS);
        tokens_recheck(w);
    }
    int events = hc_api_cache_gen(c, HC_CHG_EVENTS) != w->events_gen;
    w->events_gen = hc_api_cache_gen(c, HC_CHG_EVENTS);
    for (int i = 0; i < HC_WATCH_MAX; i++) {
        struct watcher *x = &w->watchers[i];
        if (!x->s)
            continue;
        if (hc_stream_pending(x->s) <= HC_WATCH_SOFT_PENDING)
            x->stalled_ms = 0;
        else if (!x->stalled_ms)
            x->stalled_ms = now;
        else if (now - x->stalled_ms > HC_WATCH_STALL_MS) {
            watcher_drop(x, "it reads too slowly");
            continue;
        }
        /* a watcher resuming from an old id catches up HC_WATCH_BATCH events a tick */
        if (events || x->behind)
            watcher_events(x);
    }
    if (w->count && hc_api_cache_gen(c, HC_CHG_NODES) != w->nodes_gen) {
        w->nodes_gen = hc_api_cache_gen(c, HC_CHG_NODES);
        nodes_compare(w, 1);
    }
    for (int i = 0; i < HC_WATCH_MAX; i++) {
        struct watcher *x = &w->watchers[i];
        if (!x->s || now - x->heartbeat_ms < HC_WATCH_HEARTBEAT_MS)
            continue;
        char when[32];
        x->heartbeat_ms = now;
        if (send_line(x, json_pack("{s:s, s:I}", "heartbeat",
                                   hc_time_format(hc_now_ms(), when, sizeof(when)), "last_id",
                                   (json_int_t)x->last_id)) < 0)
            continue;
    }
}

struct hc_watch *hc_watch_new(struct hc_api *api, struct event_base *base)
{
    struct hc_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->api = api;
    if (!(w->tick = event_new(base, -1, EV_PERSIST, watch_tick, w))) {
        free(w);
        return NULL;
    }
    for (int i = 0; i < HC_WATCH_MAX; i++)
        w->watchers[i].w = w;
    return w;
}

void hc_watch_free(struct hc_watch *w)
{
    if (!w)
        return;
    for (int i = 0; i < HC_WATCH_MAX; i++)
        if (w->watchers[i].s)
            hc_stream_drop(w->watchers[i].s);
    event_free(w->tick);
    json_decref(w->snapshot);
    free(w);
}

int hc_watch_count(const struct hc_watch *w)
{
    return w->count;
}

static int filter_copy(struct hc_request *req, const char *name, char *out, struct hc_error *err)
{
    const char *v = hc_req_query(req, name);
    if (v && strlen(v) > WATCH_FILTER_MAX)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "query parameter '%s' is longer than %d bytes", name, WATCH_FILTER_MAX);
    snprintf(out, WATCH_FILTER_MAX + 1, "%s", v ? v : "");
    return 0;
}

/* The newest event id: where a watcher without since starts. */
static int64_t last_event_id(struct hc_api *api, struct hc_error *err)
{
    struct hc_events_query q = {0, 0, 1, 1, NULL, NULL};
    json_t *doc = hc_events_query(api->db, &q, err);
    int64_t id = doc ? hc_json_int(doc, "last_id", 0) : -1;
    json_decref(doc);
    return id;
}

void hc_res_watch(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_watch *w = api->watch;
    struct hc_error err = {0};
    struct watcher *x = NULL;
    int64_t since = -1;
    for (int i = 0; i < HC_WATCH_MAX && !x; i++)
        if (!w->watchers[i].s)
            x = &w->watchers[i];
    if (!x) {
        hc_error_set(&err, HC_E(TOO_MANY_WATCHERS),
                     "%d watchers already, the most this controller serves", HC_WATCH_MAX);
        hc_error_hint(&err, "close another watch, or poll GET /v1/events");
        hc_reply_error(req, &err);
        return;
    }
    if (hc_api_query_int(req, "since", -1, 0, INT64_MAX, &since, &err) < 0 ||
        filter_copy(req, "type", x->type, &err) < 0 ||
        filter_copy(req, "node", x->node, &err) < 0 ||
        (since < 0 && (since = last_event_id(api, &err)) < 0)) {
        hc_reply_error(req, &err);
        return;
    }
    const char *token = hc_auth_bearer(hc_req_header(req, "Authorization"));
    snprintf(x->token, sizeof(x->token), "%s", token ? token : "");
    if (!(x->s = hc_req_stream(req, "application/x-ndjson", HC_WATCH_WRITE_TIMEOUT_S, watcher_gone,
                               x))) {
        /* out of memory, or a request without a connection (the fuzz targets' entry) */
        hc_error_set(&err, HC_E(INTERNAL), "cannot start the watch stream on this connection");
        hc_reply_error(req, &err);
        return;
    }
    x->last_id = since;
    x->behind = 1; /* the first tick sends what came after since */
    x->stalled_ms = 0;
    x->heartbeat_ms = 0; /* the first tick says hello at once */
    if (w->count++ == 0) {
        struct timeval tv = {0, HC_WATCH_TICK_MS * 1000};
        w->events_gen = w->nodes_gen = -1;
        w->tokens_gen = hc_api_cache_gen(api->cache, HC_CHG_TOKENS);
        nodes_compare(w, 0);
        w->nodes_gen = hc_api_cache_gen(api->cache, HC_CHG_NODES);
        event_add(w->tick, &tv);
    }
}
