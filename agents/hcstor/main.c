/*
 * hcstor: the reference storage-node service, a small replicated block store (docs/hcstor.md),
 * shipped as a signed bundle and supervised by hcagent.
 *
 *   hcstor --listen HOST:PORT --data DIR --version VERSION [--node NAME] [--peers FILE]
 *          [--replication N] [--fail-health] [--settings FILE] [--log-level LEVEL]
 *          [--resync-parallelism N] [--fsync always|batch] [--fsync-interval-ms MS]
 *          [--min-free-mb MB]
 *
 * Plain HTTP on HOST:PORT, libevent evhttp, one thread. Clients:
 *   PUT /blocks/{key}   201 once the block is durable (fsync) on every healthy replica
 *   GET /blocks/{key}   the bytes (X-Hcstor-Version: the block's version)
 * Any member takes any request: it coordinates it when it is an in-sync replica of the block,
 * otherwise it forwards it to one that is (X-Hcstor-Forwarded marks a forwarded request, which
 * is never forwarded again). 503 when no replica is serving: the client tries another node.
 * Hooks, for the agent (docs/bundles.md):
 *   GET /health  GET /ok-to-stop  POST /drain  GET /resync
 * Settings (settings.c): GET /settings, POST /reload (also SIGHUP).
 * Peers (cluster.c): /internal/blocks/{key} (PUT a replica write, GET a block), /internal/keys,
 * /internal/hello, /internal/state, /internal/resync, /internal/holds (drops of moved copies).
 * The command line is the table at the end, read by the shared engine (common/cmdline.h).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agents/hcstor/hcstor.h"
#include "common/cmdline.h"
#include "common/util.h"

void hcstor_log(const struct hcstor *s, enum hcstor_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char ts[40];
    va_list ap;
    if ((int)level < s->set.log_level)
        return;
    va_start(ap, fmt);
    fprintf(stderr, "%s hcstor %s %s %s: ", hc_time_format(hc_now_ms(), ts, sizeof(ts)), s->version,
            s->node, names[level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void hcstor_reply_json(struct evhttp_request *req, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    struct evbuffer *out = evbuffer_new();
    json_decref(body);
    if (out && text)
        evbuffer_add_printf(out, "%s\n", text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, status, NULL, out);
    if (out)
        evbuffer_free(out);
    free(text);
}

void hcstor_reply_error(struct evhttp_request *req, const struct hc_code *code, const char *fmt,
                        ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hcstor_reply_json(req, code->status,
                      json_pack("{s:{s:s, s:s}}", "error", "code", code->wire, "message", msg));
}

static const char *header(struct evhttp_request *req, const char *name)
{
    return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

/* ---- drain: answered once no request is in flight and every peer was told --------------- */

static void drain_maybe_answer(struct hcstor *s)
{
    if (!s->drain_reply || s->in_flight > 0 || s->drain_notices)
        return;
    hcstor_reply_json(s->drain_reply, 200, json_pack("{s:b, s:i}", "drained", 1, "in_flight", 0));
    s->drain_reply = NULL;
    hcstor_log(s, HCSTOR_INFO, "drained: no request in flight, peers told");
}

static void request_finished(struct hcstor *s)
{
    s->in_flight--;
    drain_maybe_answer(s);
}

static void drain_announced(struct hcstor *s)
{
    s->drain_notices = 0;
    drain_maybe_answer(s);
}

static void drain(struct hcstor *s, struct evhttp_request *req)
{
    if (s->drain_reply) {
        hcstor_reply_error(req, HC_E(CONFLICT), "a drain is already in progress");
        return;
    }
    s->drain_reply = req;
    if (s->state == HCSTOR_DRAINING) {
        drain_maybe_answer(s);
        return;
    }
    hcstor_set_state(s, HCSTOR_DRAINING);
    s->drain_notices = 1;
    hcstor_announce(s, drain_announced);
}

/* ---- client requests: coordinate here, or forward to an in-sync replica ------------------ */

struct client_op {
    struct hcstor *s;
    struct evhttp_request *req;
    enum evhttp_cmd_type cmd;
    char key[HCSTOR_KEY_MAX + 1];
    int64_t version;
    size_t bytes;
    int waiting;   /* replica writes not answered yet */
    json_t *acked; /* names of the replicas holding the write */
    int replicas[HCSTOR_PEERS_MAX + 1];
    size_t nreplicas;
    size_t tried;          /* forward: candidates already tried */
    struct evbuffer *body; /* forward: the request body, kept for a retry */
};

static struct client_op *op_new(struct hcstor *s, struct evhttp_request *req, const char *key)
{
    struct client_op *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->s = s;
    op->req = req;
    op->cmd = evhttp_request_get_command(req);
    snprintf(op->key, sizeof(op->key), "%s", key);
    op->nreplicas = hcstor_replicas(s, key, op->replicas, HC_ARRAY_LEN(op->replicas));
    s->in_flight++;
    return op;
}

static void op_free(struct client_op *op)
{
    struct hcstor *s = op->s;
    json_decref(op->acked);
    if (op->body)
        evbuffer_free(op->body);
    free(op);
    request_finished(s);
}

static void read_local(struct hcstor *s, struct evhttp_request *req, const char *key)
{
    off_t off;
    size_t len;
    int64_t version;
    char vh[32];
    int fd = hcstor_store_open_block(s, key, &off, &len, &version);
    if (fd < 0) {
        if (errno == ENOENT)
            hcstor_reply_error(req, HC_E(NOT_FOUND), "no block '%s'", key);
        else
            hcstor_reply_error(req, HC_E(IO), "cannot read block '%s': %s", key, strerror(errno));
        return;
    }
    struct evbuffer *out = evbuffer_new();
    /* evbuffer_add_file takes over the descriptor, also on failure */
    if (!out || evbuffer_add_file(out, fd, off, (ev_off_t)len) != 0) {
        if (!out)
            close(fd);
        if (out)
            evbuffer_free(out);
        hcstor_reply_error(req, HC_E(IO), "cannot read block '%s'", key);
        return;
    }
    snprintf(vh, sizeof(vh), "%" PRId64, version);
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Hcstor-Version", vh);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/octet-stream");
    evhttp_send_reply(req, 200, NULL, out);
    evbuffer_free(out);
}

static void write_acked(struct client_op *op)
{
    hcstor_reply_json(op->req, 201,
                      json_pack("{s:s, s:I, s:I, s:O}", "key", op->key, "bytes",
                                (json_int_t)op->bytes, "version", (json_int_t)op->version,
                                "replicas", op->acked));
    op_free(op);
}

struct replica_write {
    struct client_op *op;
    char peer[HCSTOR_NAME_MAX];
};

static void replica_written(struct evhttp_request *res, void *arg)
{
    struct replica_write *w = arg;
    struct client_op *op = w->op;
    struct hcstor_peer *p = hcstor_peer_by_name(op->s, w->peer);
    int code = res ? evhttp_request_get_response_code(res) : 0;
    if (code == 200)
        json_array_append_new(op->acked, json_string(w->peer));
    else if (p) {
        /* not healthy: the write is acknowledged without it, and it resyncs when back */
        hcstor_log(op->s, HCSTOR_WARN, "replica write of '%s' to %s failed (%d): marked down",
                   op->key, w->peer, code);
        hcstor_peer_mark_down(op->s, p);
        p->suspect = 1;
    }
    free(w);
    if (--op->waiting == 0)
        write_acked(op);
}

static void send_replica(struct client_op *op, struct hcstor_peer *p, const void *data, size_t len)
{
    char uri[HCSTOR_KEY_MAX + 40], vh[32];
    struct replica_write *w = calloc(1, sizeof(*w));
    if (p->state != HCSTOR_SERVING && p->state != HCSTOR_RESYNCING) {
        p->suspect = 1; /* it will miss this write */
        free(w);
        return;
    }
    snprintf(uri, sizeof(uri), "/internal/blocks/%s", op->key);
    snprintf(vh, sizeof(vh), "%" PRId64, op->version);
    if (!w)
        return;
    w->op = op;
    snprintf(w->peer, sizeof(w->peer), "%s", p->name);
    op->waiting++;
    if (hcstor_peer_request(op->s, hcstor_peer_conn(p), EVHTTP_REQ_PUT, uri, data, len, vh,
                            replica_written, w) < 0) {
        op->waiting--;
        free(w);
        hcstor_peer_mark_down(op->s, p);
        p->suspect = 1;
    }
}

/* The coordinator: a new version, durable here, then on every other healthy replica. */
static void coordinate_write(struct client_op *op)
{
    struct hcstor *s = op->s;
    struct evbuffer *body = evhttp_request_get_input_buffer(op->req);
    size_t len = evbuffer_get_length(body);
    const unsigned char *data = len ? evbuffer_pullup(body, -1) : (const unsigned char *)"";
    char why[300];
    op->version = hcstor_next_version(s, op->key);
    op->bytes = len;
    if (hcstor_store_put(s, op->key, op->version, data, len, why, sizeof(why)) < 0) {
        hcstor_reply_error(op->req, HC_E(IO), "%s", why);
        op_free(op);
        return;
    }
    hcstor_log(s, HCSTOR_DEBUG, "write of '%s' (%zu bytes) coordinated here: version %" PRId64,
               op->key, len, op->version);
    op->acked = json_pack("[s]", s->node);
    op->waiting = 1; /* released below, after every replica write was sent */
    int to[HCSTOR_PEERS_MAX + 1];
    size_t n = hcstor_write_targets(s, op->key, to, HC_ARRAY_LEN(to));
    for (size_t i = 0; i < n; i++)
        if (to[i] >= 0)
            send_replica(op, &s->peers[to[i]], data, len);
    if (--op->waiting == 0)
        write_acked(op);
}

static void forward(struct client_op *op);

static void forwarded(struct evhttp_request *res, void *arg)
{
    struct client_op *op = arg;
    int code = res ? evhttp_request_get_response_code(res) : 0;
    if (code == 0 || code == 503) {
        int idx = op->replicas[op->tried - 1];
        if (code == 0)
            hcstor_peer_mark_down(op->s, &op->s->peers[idx]);
        forward(op); /* the next in-sync replica, if any */
        return;
    }
    struct evkeyvalq *in = evhttp_request_get_input_headers(res);
    struct evkeyvalq *out = evhttp_request_get_output_headers(op->req);
    const char *ct = evhttp_find_header(in, "Content-Type");
    const char *vh = evhttp_find_header(in, "X-Hcstor-Version");
    if (ct)
        evhttp_add_header(out, "Content-Type", ct);
    if (vh)
        evhttp_add_header(out, "X-Hcstor-Version", vh);
    evhttp_send_reply(op->req, code, NULL, evhttp_request_get_input_buffer(res));
    op_free(op);
}

/* Tries the in-sync replicas in placement order; 503 when none is left. */
static void forward(struct client_op *op)
{
    struct hcstor *s = op->s;
    char uri[HCSTOR_KEY_MAX + 20];
    snprintf(uri, sizeof(uri), "/blocks/%s", op->key);
    while (op->tried < op->nreplicas) {
        int idx = op->replicas[op->tried++];
        if (idx < 0 || s->peers[idx].state != HCSTOR_SERVING)
            continue;
        struct evhttp_request *r = evhttp_request_new(forwarded, op);
        struct evkeyvalq *h = r ? evhttp_request_get_output_headers(r) : NULL;
        if (!r)
            break;
        evhttp_add_header(h, "Host", "hcstor");
        evhttp_add_header(h, "X-Hcstor-Forwarded", s->node);
        if (op->body)
            evbuffer_add_buffer_reference(evhttp_request_get_output_buffer(r), op->body);
        hcstor_log(s, HCSTOR_DEBUG, "%s of '%s' forwarded to %s",
                   op->cmd == EVHTTP_REQ_PUT ? "write" : "read", op->key, s->peers[idx].name);
        if (evhttp_make_request(hcstor_peer_fwd_conn(&s->peers[idx]), r, op->cmd, uri) == 0)
            return;
    }
    hcstor_reply_error(op->req, HC_E(UNAVAILABLE),
                       "no in-sync replica of block '%s' is serving (replication %d)", op->key,
                       hcstor_effective_rf(s));
    op_free(op);
}

static void client_block(struct hcstor *s, struct evhttp_request *req, const char *key)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_PUT) {
        hcstor_reply_error(req, HC_E(METHOD_NOT_ALLOWED), "use GET or PUT");
        return;
    }
    if (s->state == HCSTOR_DRAINING || s->fail_health) {
        hcstor_reply_error(req, s->fail_health ? HC_E(UNHEALTHY) : HC_E(DRAINING),
                           "hcstor on %s is %s: use another node", s->node,
                           s->fail_health ? "failing its health check" : "draining");
        return;
    }
    const char *by = header(req, "X-Hcstor-Forwarded");
    if (by && !hcstor_peer_by_name(s, by)) {
        /* Routed here by a members list this node does not have yet (a node just added, still
         * alone, would take itself for the only replica of everything). */
        hcstor_reply_error(req, HC_E(UNAVAILABLE),
                           "forwarded by %s, not a member in this node's list (epoch %" PRId64
                           "): ask another replica",
                           by, s->peers_epoch);
        return;
    }
    if (cmd == EVHTTP_REQ_GET && hcstor_in_sync_for(s, key)) {
        read_local(s, req, key);
        return;
    }
    /* A write may be coordinated even while a peer sharing the block was skipped by the
     * resync: its version comes from the clock, above anything that peer may hold. */
    if (cmd == EVHTTP_REQ_PUT && s->state == HCSTOR_SERVING && hcstor_is_replica(s, key)) {
        struct client_op *op = op_new(s, req, key);
        if (!op)
            hcstor_reply_error(req, HC_E(INTERNAL), "out of memory");
        else
            coordinate_write(op);
        return;
    }
    if (by) {
        hcstor_reply_error(req, HC_E(UNAVAILABLE), "%s is not an in-sync replica of '%s' (%s)",
                           s->node, key, hcstor_state_name(s->state));
        return;
    }
    struct client_op *op = op_new(s, req, key);
    if (!op || (cmd == EVHTTP_REQ_PUT && !(op->body = evbuffer_new()))) {
        hcstor_reply_error(req, HC_E(INTERNAL), "out of memory");
        if (op)
            op_free(op);
        return;
    }
    if (op->body)
        evbuffer_add_buffer(op->body, evhttp_request_get_input_buffer(req));
    forward(op);
}

/* ---- peer requests --------------------------------------------------------------------- */

static void internal_block(struct hcstor *s, struct evhttp_request *req, const char *key)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (cmd == EVHTTP_REQ_GET) {
        read_local(s, req, key);
        return;
    }
    const char *vh = header(req, "X-Hcstor-Version");
    int64_t v = vh ? strtoll(vh, NULL, 10) : 0;
    if (cmd != EVHTTP_REQ_PUT || v <= 0) {
        hcstor_reply_error(req, HC_E(INVALID_ARGUMENT),
                           "a replica write is a PUT with "
                           "X-Hcstor-Version");
        return;
    }
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    char why[300];
    int stored = v > hcstor_store_version(s, key); /* never over a newer version */
    if (stored && hcstor_store_put(s, key, v, len ? evbuffer_pullup(body, -1) : (void *)"", len,
                                   why, sizeof(why)) < 0) {
        hcstor_reply_error(req, HC_E(IO), "%s", why);
        return;
    }
    hcstor_log(s, HCSTOR_DEBUG, "replica write of '%s' version %" PRId64 " from %s: %s", key, v,
               header(req, "X-Hcstor-From") ? header(req, "X-Hcstor-From") : "?",
               stored ? "stored" : "older than ours, ignored");
    hcstor_reply_json(req, 200,
                      json_pack("{s:b, s:I}", "stored", stored, "version",
                                (json_int_t)hcstor_store_version(s, key)));
}

/* The blocks held here that are placed on NODE, with their versions: what NODE resyncs. */
static void internal_keys(struct hcstor *s, struct evhttp_request *req)
{
    struct evkeyvalq q;
    const char *uri = evhttp_request_get_uri(req);
    const char *query = strchr(uri, '?');
    json_t *keys = json_array(), *v;
    const char *key;
    if (!query || evhttp_parse_query_str(query + 1, &q) != 0) {
        json_decref(keys);
        hcstor_reply_error(req, HC_E(INVALID_ARGUMENT), "expected ?for=NODE");
        return;
    }
    const char *who = evhttp_find_header(&q, "for");
    const char *epoch = evhttp_find_header(&q, "epoch");
    if (epoch && strtoll(epoch, NULL, 10) > s->peers_epoch) {
        /* Placed by our older list, the answer would miss blocks the asker now holds. */
        evhttp_clear_headers(&q);
        json_decref(keys);
        hcstor_reply_error(req, HC_E(MEMBERS_BEHIND),
                           "this node's members list is older "
                           "than the asker's");
        return;
    }
    int rs[HCSTOR_PEERS_MAX + 1];
    struct hcstor_peer *p = hcstor_peer_by_name(s, who);
    int want = p ? (int)(p - s->peers) : -2;
    json_object_foreach(s->index, key, v)
    {
        size_t n = hcstor_replicas(s, key, rs, HC_ARRAY_LEN(rs));
        for (size_t i = 0; i < n; i++)
            if (rs[i] == want)
                json_array_append_new(keys, json_pack("[s, O]", key, v));
    }
    evhttp_clear_headers(&q);
    hcstor_reply_json(req, 200, json_pack("{s:s, s:o}", "node", s->node, "keys", keys));
}

static json_t *body_json(struct evhttp_request *req)
{
    struct evbuffer *b = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(b);
    return n ? json_loadb((const char *)evbuffer_pullup(b, -1), n, 0, NULL) : NULL;
}

/* hello, state and resync messages: {"node", "incarnation", "state"} from a peer. */
static void internal_message(struct hcstor *s, struct evhttp_request *req, const char *what)
{
    json_t *j = body_json(req);
    struct hcstor_peer *p = hcstor_peer_by_name(s, json_string_value(json_object_get(j, "node")));
    const char *st = json_string_value(json_object_get(j, "state"));
    const char *inc = json_string_value(json_object_get(j, "incarnation"));
    if (!p) {
        json_decref(j);
        hcstor_reply_error(req, HC_E(UNKNOWN_PEER), "not a member of this node's cluster");
        return;
    }
    p->changed_ms = p->heard_ms = hc_mono_ms();
    p->unreachable_since = 0;
    snprintf(p->incarnation, sizeof(p->incarnation), "%s", inc ? inc : "");
    if (!strcmp(what, "hello")) {
        /* it resyncs from us: it lists our blocks after this answer, so it has missed nothing */
        p->state = HCSTOR_RESYNCING;
        p->suspect = 0;
        hcstor_log(s, HCSTOR_INFO, "%s says hello: resyncing from us", p->name);
        if ((p->skipped || p->behind) && !p->listing) {
            p->need_list = 1; /* and we list it too: our resync skipped it */
            hcstor_resync_kick(s);
        }
    } else if (!strcmp(what, "state")) {
        p->state = HCSTOR_DOWN;
        for (int i = HCSTOR_RESYNCING; i <= HCSTOR_DRAINING; i++)
            if (st && !strcmp(st, hcstor_state_name(i)))
                p->state = i;
        hcstor_log(s, HCSTOR_INFO, "%s is %s", p->name, hcstor_state_name(p->state));
    } else {
        p->state = st && !strcmp(st, "serving") ? HCSTOR_SERVING : p->state;
        /* It wrote around this node: this node was down in its view, so it was likely down in
         * the others' too (hung, cut off) and they wrote around it as well, but may not have
         * told it yet. Listing only this peer would serve the others' blocks stale meanwhile. */
        hcstor_log(s, HCSTOR_INFO, "%s says we missed writes: resyncing from every peer", p->name);
        hcstor_resync_all(s);
    }
    json_decref(j);
    hcstor_reply_json(req, 200,
                      json_pack("{s:s, s:s, s:s}", "node", s->node, "incarnation", s->incarnation,
                                "state", hcstor_state_name(s->state)));
}

/* ---- hooks ----------------------------------------------------------------------------- */

/* Why the node is not healthy ("" when it is): --fail-health, or less free space in the data
 * directory than min_free_mb (a service that keeps writing into a full disk loses data). */
static void unhealthy_reason(const struct hcstor *s, char *why, size_t len)
{
    struct statvfs fs;
    why[0] = '\0';
    if (s->fail_health) {
        snprintf(why, len, "started with --fail-health");
    } else if (s->set.min_free_mb > 0 && statvfs(s->data, &fs) == 0) {
        unsigned long long free_mb = (unsigned long long)fs.f_bavail * fs.f_frsize >> 20;
        if (free_mb < (unsigned long long)s->set.min_free_mb)
            snprintf(why, len, "only %llu MB free in %s, below min_free_mb %d", free_mb, s->data,
                     s->set.min_free_mb);
    }
}

static void health(struct hcstor *s, struct evhttp_request *req)
{
    char why[1300];
    unhealthy_reason(s, why, sizeof(why));
    json_t *body =
        json_pack("{s:b, s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:I}", "ok", !why[0], "version",
                  s->version, "state", hcstor_state_name(s->state), "node", s->node, "incarnation",
                  s->incarnation, "blocks", (json_int_t)json_object_size(s->index), "pending",
                  (json_int_t)hcstor_resync_pending(s), "members", (int)s->npeers + 1,
                  "replication", hcstor_effective_rf(s), "epoch", (json_int_t)s->peers_epoch);
    json_t *pending = hcstor_settings_pending(s), *names = json_array(), *v;
    const char *name;
    json_object_foreach(pending, name, v) json_array_append_new(names, json_string(name));
    json_decref(pending);
    /* the failure domains: this node's (null: none) and how many the members span */
    json_object_set_new(body, "domain", s->domain[0] ? json_string(s->domain) : json_null());
    json_object_set_new(body, "domains", json_integer((json_int_t)hcstor_domain_count(s)));
    /* the settings in effect; those changed in the file that wait for a restart, by name */
    json_object_set_new(body, "settings", hcstor_settings_json(&s->set));
    json_object_set_new(body, "pending_restart", names);
    json_object_set_new(body, "store",
                        json_pack("{s:s, s:I, s:I, s:I}", "fsync", hcstor_fsync_name(s->set.fsync),
                                  "unsynced", (json_int_t)s->ndirty, "syncs", (json_int_t)s->syncs,
                                  "flushes", (json_int_t)s->flushes));
    if (why[0])
        json_object_set_new(body, "reason", json_string(why));
    hcstor_reply_json(req, why[0] ? 503 : 200, body);
}

/* An ok-to-stop being decided: answered when every peer answered a fresh probe, or after
 * HCSTOR_OK_TO_STOP_MS, whichever comes first; a peer not heard from since the question was
 * asked is not counted as a serving replica (a hung peer cannot be relied on). With a set
 * (?nodes=A,B,...: the nodes to stop together with this one), a replica in the set does not
 * count either. */
struct verdict {
    struct hcstor *s;
    struct evhttp_request *req;
    int64_t asked_ms;
    int refs; /* the probes' batch and the timer */
    int answered;
    struct event *timer;
    json_t *set; /* the names asked about (this node's included), NULL: this node alone */
};

static int in_set(const json_t *set, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(set, i, v)
    {
        if (!strcmp(json_string_value(v), name))
            return 1;
    }
    return 0;
}

/* The blocks held here with no other replica that is serving, answered since asked_ms and is
 * not in the set; *in_set_blocks of them have no replica outside the set at all (stopping the
 * set loses them whatever the states: waiting does not help). The first such block, else the
 * first unprotected one, is described in why. */
static size_t unprotected_blocks(struct hcstor *s, const struct verdict *v, size_t *in_set_blocks,
                                 char *why, size_t len)
{
    const char *key;
    json_t *val;
    size_t count = 0;
    int rs[HCSTOR_PEERS_MAX + 1];
    *in_set_blocks = 0;
    json_object_foreach(s->index, key, val)
    {
        size_t n = hcstor_replicas(s, key, rs, HC_ARRAY_LEN(rs)), others = 0, serving = 0;
        size_t outside = 0;
        char names[400] = "";
        for (size_t i = 0; i < n; i++) {
            if (rs[i] < 0)
                continue;
            struct hcstor_peer *p = &s->peers[rs[i]];
            int silent = p->heard_ms < v->asked_ms, stops = v->set && in_set(v->set, p->name);
            others++;
            outside += !stops;
            serving += p->state == HCSTOR_SERVING && !silent && !stops;
            size_t at = strlen(names);
            snprintf(names + at, sizeof(names) - at, "%s%s %s", at ? ", " : "", p->name,
                     stops                               ? "stops with it (in the set)"
                     : silent && p->state != HCSTOR_DOWN ? "is not answering"
                     : p->state == HCSTOR_SERVING        ? "is serving"
                     : p->state == HCSTOR_DOWN           ? "is down"
                     : p->state == HCSTOR_RESYNCING      ? "is resyncing"
                                                         : "is draining");
        }
        if (serving > 0)
            continue;
        int lost = v->set && others > 0 && outside == 0;
        if (count++ == 0 || (lost && *in_set_blocks == 0)) {
            if (lost)
                snprintf(why, len,
                         "block '%s' has every replica in the set: stopping %s with %s leaves "
                         "it no copy (%s)",
                         key, s->node, others > 1 ? "them" : "it", names);
            else
                snprintf(why, len, "block '%s' has no other in-sync serving replica (%s)", key,
                         others ? names : "replication factor 1: no other replica exists");
        }
        *in_set_blocks += lost;
    }
    return count;
}

static void verdict_answer(struct verdict *v)
{
    struct hcstor *s = v->s;
    char why[900] = "", reason[1000];
    size_t lost = 0;
    if (v->answered)
        return;
    v->answered = 1;
    size_t n = unprotected_blocks(s, v, &lost, why, sizeof(why));
    if (n == 0)
        snprintf(reason, sizeof(reason),
                 "each of the %zu blocks held here has another in-sync "
                 "serving replica%s",
                 json_object_size(s->index), v->set ? " outside the set" : "");
    else
        snprintf(reason, sizeof(reason), "%s%s", why,
                 n > 1 ? " and more blocks are in the same case" : "");
    json_t *body = json_pack("{s:b, s:s, s:I}", "ok_to_stop", n == 0, "reason", reason,
                             "unprotected_blocks", (json_int_t)n);
    if (v->set) {
        json_object_set(body, "nodes", v->set);
        json_object_set_new(body, "set_blocks", json_integer((json_int_t)lost));
    }
    hcstor_reply_json(v->req, 200, body);
    request_finished(s);
}

/* ?nodes=A,B,... into a new array of the names with this node's added; NULL (no set) when the
 * query has none, -1 in *bad when a name is not a member or the list is malformed. */
static json_t *stop_set(struct hcstor *s, struct evhttp_request *req, char *bad, size_t len)
{
    struct evkeyvalq q;
    const char *query = strchr(evhttp_request_get_uri(req), '?');
    bad[0] = '\0';
    if (!query || evhttp_parse_query_str(query + 1, &q) != 0)
        return NULL;
    const char *list = evhttp_find_header(&q, "nodes");
    json_t *set = list ? json_array() : NULL;
    if (list && !*list)
        snprintf(bad, len, "expected ?nodes=NAME,NAME...");
    char name[HCSTOR_NAME_MAX];
    for (const char *p = list; p && *p && !bad[0];) {
        size_t l = strcspn(p, ",");
        if (l == 0 || l >= sizeof(name)) {
            snprintf(bad, len, "expected ?nodes=NAME,NAME...");
            break;
        }
        snprintf(name, sizeof(name), "%.*s", (int)l, p);
        if (strcmp(name, s->node) != 0 && !hcstor_peer_by_name(s, name))
            snprintf(bad, len, "'%s' is not a member", name);
        else if (!in_set(set, name))
            json_array_append_new(set, json_string(name));
        p += l + (p[l] == ',');
    }
    evhttp_clear_headers(&q);
    if (set && !bad[0] && !in_set(set, s->node))
        json_array_append_new(set, json_string(s->node));
    if (bad[0]) {
        json_decref(set);
        return NULL;
    }
    return set;
}

static void verdict_unref(struct verdict *v)
{
    if (--v->refs > 0)
        return;
    event_free(v->timer);
    json_decref(v->set);
    free(v);
}

static void verdict_probed(struct hcstor *s, void *arg)
{
    (void)s;
    verdict_answer(arg);
    verdict_unref(arg);
}

static void verdict_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    verdict_answer(arg);
    verdict_unref(arg);
}

/* False while DATA/pinned exists (an operator's hold, its first line the reason); otherwise
 * decided from a fresh probe of every peer. */
static void ok_to_stop(struct hcstor *s, struct evhttp_request *req)
{
    char path[1100], line[256] = "";
    snprintf(path, sizeof(path), "%s/pinned", s->data);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(line, sizeof(line), f))
            line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        char reason[400];
        snprintf(reason, sizeof(reason), "pinned: %s", line[0] ? line : "(no reason given)");
        hcstor_reply_json(req, 200, json_pack("{s:b, s:s}", "ok_to_stop", 0, "reason", reason));
        return;
    }
    char bad[200];
    json_t *set = stop_set(s, req, bad, sizeof(bad));
    if (bad[0]) {
        hcstor_reply_error(req, HC_E(INVALID_ARGUMENT), "%s", bad);
        return;
    }
    struct verdict *v = calloc(1, sizeof(*v));
    struct timeval tv = {0, HCSTOR_OK_TO_STOP_MS * 1000};
    if (v)
        v->timer = evtimer_new(s->base, verdict_timeout, v);
    if (!v || !v->timer || evtimer_add(v->timer, &tv) < 0) {
        if (v && v->timer)
            event_free(v->timer);
        free(v);
        json_decref(set);
        hcstor_reply_error(req, HC_E(INTERNAL), "out of memory");
        return;
    }
    *v = (struct verdict){s, req, hc_mono_ms(), 2, 0, v->timer, set};
    s->in_flight++;
    hcstor_probe_all(s, verdict_probed, v);
}

/* Reads a peers file the agent has just written first: an answer asked after a membership
 * change always counts the resync that change starts. */
static void resync_status(struct hcstor *s, struct evhttp_request *req)
{
    hcstor_members_reload(s);
    int64_t pending = hcstor_resync_pending(s);
    json_t *body =
        json_pack("{s:I, s:b, s:s, s:I, s:i, s:i, s:i}", "pending", (json_int_t)pending, "done",
                  s->state != HCSTOR_RESYNCING, "state", hcstor_state_name(s->state), "fetched",
                  (json_int_t)s->resynced_keys, "fetching", s->fetching, "fetch_peak",
                  s->fetch_peak, "parallelism", s->set.resync_parallelism);
    /* the membership: its epoch, whether every peer has it, the copies that moved away */
    json_object_set_new(body, "epoch", json_integer(s->peers_epoch));
    json_object_set_new(body, "settled", json_boolean(hcstor_members_settled(s)));
    json_object_set_new(body, "stale", json_integer(hcstor_stale_copies(s)));
    json_object_set_new(body, "dropped", json_integer(s->dropped));
    hcstor_reply_json(req, 200, body);
}

/* ---- settings -------------------------------------------------------------------------- */

static void settings_show(struct hcstor *s, struct evhttp_request *req)
{
    hcstor_reply_json(req, 200,
                      json_pack("{s:o, s:o, s:o, s:s?}", "settings", hcstor_settings_json(&s->set),
                                "pending_restart", hcstor_settings_pending(s), "defaults",
                                hcstor_settings_json(&s->flags), "file",
                                s->settings_path[0] ? s->settings_path : NULL));
}

/* POST /reload and SIGHUP: the answer, or NULL with why (the old values are all kept). */
static json_t *reload(struct hcstor *s, char *why, size_t len)
{
    json_t *answer = hcstor_settings_reload(s, why, len);
    if (!answer)
        hcstor_log(s, HCSTOR_WARN, "settings not reloaded, keeping the old values: %s", why);
    return answer;
}

static void reload_request(struct hcstor *s, struct evhttp_request *req)
{
    char why[600];
    json_t *answer = reload(s, why, sizeof(why));
    if (answer)
        hcstor_reply_json(req, 200, answer);
    else if (!s->settings_path[0])
        hcstor_reply_error(req, HC_E(CONFLICT), "%s", why);
    else
        hcstor_reply_error(req, HC_E(INVALID_ARGUMENT), "%s", why);
}

/* ---- routing --------------------------------------------------------------------------- */

static void route(struct evhttp_request *req, void *arg)
{
    struct hcstor *s = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    int get = cmd == EVHTTP_REQ_GET, post = cmd == EVHTTP_REQ_POST;
    if (!path)
        path = "/";
    hcstor_check_stall(s); /* before anything is served from copies a stall made stale */
    /* libevent reads up to twice the limit: the answer is ours, as JSON, not its HTML page. */
    size_t body = evbuffer_get_length(evhttp_request_get_input_buffer(req));
    if (body > HCSTOR_BLOCK_MAX) {
        hcstor_reply_error(req, HC_E(BODY_TOO_LARGE),
                           "body of %zu bytes exceeds the %d-byte "
                           "block limit",
                           body, HCSTOR_BLOCK_MAX);
        return;
    }
    if (!strncmp(path, "/blocks/", 8) || !strncmp(path, "/internal/blocks/", 17)) {
        const char *key = strchr(path + 1, '/') + 1;
        key = path[1] == 'i' ? strchr(key, '/') + 1 : key;
        if (!hcstor_key_valid(key))
            hcstor_reply_error(req, HC_E(INVALID_ARGUMENT), "invalid block key");
        else if (path[1] == 'i')
            internal_block(s, req, key);
        else
            client_block(s, req, key);
    } else if (!strcmp(path, "/health") && get) {
        health(s, req);
    } else if (!strcmp(path, "/ok-to-stop") && get) {
        ok_to_stop(s, req);
    } else if (!strcmp(path, "/drain") && post) {
        drain(s, req);
    } else if (!strcmp(path, "/resync") && get) {
        resync_status(s, req);
    } else if (!strcmp(path, "/settings") && get) {
        settings_show(s, req);
    } else if (!strcmp(path, "/reload") && post) {
        reload_request(s, req);
    } else if (!strcmp(path, "/internal/keys") && get) {
        internal_keys(s, req);
    } else if (!strcmp(path, "/internal/holds") && post) {
        json_t *j = body_json(req);
        hcstor_holds_answer(s, req, j);
        json_decref(j);
    } else if (!strncmp(path, "/internal/", 10) && post &&
               (!strcmp(path + 10, "hello") || !strcmp(path + 10, "state") ||
                !strcmp(path + 10, "resync"))) {
        internal_message(s, req, path + 10);
    } else {
        hcstor_reply_error(req, HC_E(NOT_FOUND), "no such endpoint");
    }
}

/* ---- start-up -------------------------------------------------------------------------- */

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    event_base_loopexit(arg, NULL);
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    char why[600];
    (void)sig;
    (void)what;
    json_decref(reload(arg, why, sizeof(why)));
}

static int serve(struct hcstor *s)
{
    struct evhttp *http = evhttp_new(s->base);
    struct event *term = evsignal_new(s->base, SIGTERM, on_signal, s->base);
    struct event *intr = evsignal_new(s->base, SIGINT, on_signal, s->base);
    struct event *hup = evsignal_new(s->base, SIGHUP, on_hup, s);
    int rc = 1;
    if (!http || !term || !intr || !hup || event_add(term, NULL) < 0 || event_add(intr, NULL) < 0 ||
        event_add(hup, NULL) < 0)
        goto cleanup;
    evhttp_set_max_body_size(http, 2 * HCSTOR_BLOCK_MAX);
    /* Every method reaches route(), which answers the unsupported ones with a JSON 405. */
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_PUT | EVHTTP_REQ_POST |
                                         EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD | EVHTTP_REQ_PATCH |
                                         EVHTTP_REQ_OPTIONS);
    evhttp_set_gencb(http, route, s);
    if (evhttp_bind_socket(http, s->host, (ev_uint16_t)s->port) != 0) {
        hcstor_log(s, HCSTOR_ERROR, "cannot listen on %s:%d: %s", s->host, s->port,
                   strerror(errno));
        goto cleanup;
    }
    if (hcstor_cluster_init(s) < 0) {
        hcstor_log(s, HCSTOR_ERROR, "cannot start: out of memory");
        goto cleanup;
    }
    hcstor_log(s, HCSTOR_INFO, "serving on http://%s:%d, %zu blocks in %s%s", s->host, s->port,
               json_object_size(s->index), s->data,
               s->fail_health ? " (--fail-health: health answers 503)" : "");
    json_t *set = hcstor_settings_json(&s->set);
    char *text = json_dumps(set, JSON_COMPACT | JSON_SORT_KEYS);
    hcstor_log(s, HCSTOR_INFO, "settings %s%s%s", text ? text : "?",
               s->settings_path[0] ? " from " : "", s->settings_path);
    free(text);
    json_decref(set);
    event_base_dispatch(s->base);
    hcstor_store_flush(s); /* fsync batch: a clean stop loses nothing */
    hcstor_log(s, HCSTOR_INFO, "stopped");
    rc = 0;
cleanup:
    /* The event base, the peer connections and the requests and timers still pending on them
     * are left to the exit: freeing them frees those without running their callbacks, which
     * would only turn what the callbacks own into leaks. */
    if (term)
        event_free(term);
    if (intr)
        event_free(intr);
    if (hup)
        event_free(hup);
    if (http)
        evhttp_free(http);
    return rc;
}

/* What the handler reads: the parsed command line (common/cmdline.h). */
struct hc_cmd_ctx {
    struct hc_cmdline cl;
};

/* A bad value: the message and the usage line, on stderr. */
static int bad_value(const struct hc_cmdline *cl, const char *fmt, const char *value)
{
    char line[256];
    hc_cmdline_usage_line(cl->prog->name, NULL, cl->verb, line, sizeof(line));
    fprintf(stderr, "hcstor: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\nusage: %s\n", line);
    return 2;
}

/* The flags of the settings: each overrides its built-in default (the file overrides both). */
static const char *const setting_flags[][2] = {
    {"log-level", "log_level"},
    {"resync-parallelism", "resync_parallelism"},
    {"fsync", "fsync"},
    {"fsync-interval-ms", "fsync_interval_ms"},
    {"min-free-mb", "min_free_mb"},
};

/* Defaults, flags, then the settings file: 2 (usage) when any of them is refused. */
static int settings_start(struct hcstor *s, const struct hc_cmdline *cl)
{
    char why[600], msg[700];
    hcstor_settings_defaults(&s->flags);
    for (size_t i = 0; i < HC_ARRAY_LEN(setting_flags); i++) {
        const char *text = hc_cmdline_opt_str(cl, setting_flags[i][0]);
        if (text &&
            hcstor_setting_from_text(&s->flags, setting_flags[i][1], text, why, sizeof(why)) < 0) {
            snprintf(msg, sizeof(msg), "invalid --%s: %s", setting_flags[i][0], why);
            return bad_value(cl, "%s", msg);
        }
    }
    if (hc_cmdline_opt_set(cl, "settings"))
        snprintf(s->settings_path, sizeof(s->settings_path), "%s",
                 hc_cmdline_opt_str(cl, "settings"));
    if (hcstor_settings_load(s, why, sizeof(why)) < 0) {
        fprintf(stderr, "hcstor: %s\n", why);
        return 2;
    }
    return 0;
}

static int run(struct hc_cmd_ctx *ctx)
{
    static struct hcstor s = {.replication = 2};
    const struct hc_cmdline *cl = &ctx->cl;
    const char *listen = hc_cmdline_opt_str(cl, "listen");
    const char *replication = hc_cmdline_opt_str(cl, "replication");
    char why[300], *end;
    struct hc_error err = {0};
    snprintf(s.data, sizeof(s.data), "%s", hc_cmdline_opt_str(cl, "data"));
    snprintf(s.version, sizeof(s.version), "%s", hc_cmdline_opt_str(cl, "version"));
    if (hc_cmdline_opt_set(cl, "node"))
        snprintf(s.node, sizeof(s.node), "%s", hc_cmdline_opt_str(cl, "node"));
    if (hc_cmdline_opt_set(cl, "peers"))
        snprintf(s.peers_path, sizeof(s.peers_path), "%s", hc_cmdline_opt_str(cl, "peers"));
    s.fail_health = hc_cmdline_opt_set(cl, "fail-health");
    int rc = settings_start(&s, cl);
    if (rc != 0)
        return rc;
    if (replication && ((s.replication = (int)strtol(replication, &end, 10)) < 1 || *end ||
                        s.replication > HCSTOR_PEERS_MAX))
        return bad_value(cl, "invalid --replication '%s'", replication);
    if (!s.data[0] || !s.version[0])
        return bad_value(cl, "%s", "--data and --version need a value");
    if (hc_split_host_port(listen, s.host, sizeof(s.host), &s.port, &err) < 0 || s.port <= 0) {
        fprintf(stderr, "hcstor: invalid --listen '%s'\n", listen);
        return 2;
    }
    if (!s.node[0] && gethostname(s.node, sizeof(s.node)) < 0)
        snprintf(s.node, sizeof(s.node), "%s", s.host);
    snprintf(s.blocks, sizeof(s.blocks), "%s/blocks", s.data);
    if (!s.peers_path[0])
        snprintf(s.peers_path, sizeof(s.peers_path), "%s/peers.json", s.data);
    signal(SIGPIPE, SIG_IGN);
    s.index = json_object();
    s.base = event_base_new();
    if (!s.index || !s.base || hc_random_hex(s.incarnation, 16) < 0)
        return 1;
    if (hcstor_store_open(&s, why, sizeof(why)) < 0) {
        hcstor_log(&s, HCSTOR_ERROR, "%s", why);
        return 1;
    }
    return serve(&s); /* s.base and s.index stay for the exit: see serve() */
}

static const struct hc_cmd_opt hcstor_opts[] = {
    HC_OPT(.name = "listen", .type = HC_OPT_STRING, .required = 1, .value_name = "HOST:PORT",
           .help = "address to serve plain HTTP on"),
    HC_OPT(.name = "data", .type = HC_OPT_STRING, .required = 1, .value_name = "DIR",
           .help = "where the blocks and the peer list live", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "version", .type = HC_OPT_STRING, .required = 1, .value_name = "VERSION",
           .help = "the version this service reports (its bundle's)"),
    HC_OPT(.name = "node", .type = HC_OPT_STRING, .value_name = "NAME",
           .help = "this member's name (default: the hostname)"),
    HC_OPT(.name = "peers", .type = HC_OPT_STRING, .value_name = "FILE",
           .help = "the peer list (default DIR/peers.json)", .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "replication", .type = HC_OPT_STRING, .value_name = "N",
           .help = "replicas of every block (default 2)"),
    HC_OPT(.name = "fail-health", .type = HC_OPT_BOOL,
           .help = "answer /health with 503 (tests of a failing upgrade)"),
    HC_OPT(.name = "settings", .type = HC_OPT_STRING, .value_name = "FILE",
           .help = "a JSON object of settings, over the flags; re-read on SIGHUP and POST /reload",
           .completer = HC_COMPLETE_FILE),
    HC_OPT(.name = "log-level", .type = HC_OPT_STRING, .value_name = "LEVEL",
           .help = "debug|info|warn|error (default info)"),
    HC_OPT(.name = "resync-parallelism", .type = HC_OPT_STRING, .value_name = "N",
           .help = "block fetches a resync runs at once, 1-64 (default 8)"),
    HC_OPT(.name = "fsync", .type = HC_OPT_STRING, .value_name = "MODE",
           .help = "always (every write durable before its answer) or batch (default always)"),
    HC_OPT(.name = "fsync-interval-ms", .type = HC_OPT_STRING, .value_name = "MS",
           .help = "batch: the longest a write waits for its fsync, 1-10000 (default 100)"),
    HC_OPT(.name = "min-free-mb", .type = HC_OPT_STRING, .value_name = "MB",
           .help = "/health fails while the data directory has less free space (default 0: off)"),
    {.name = NULL},
};

static const struct hc_cmd_verb hcstor_command = {
    .name = "hcstor",
    .handler = run,
    .opts = hcstor_opts,
    .summary = "the reference storage service: a small replicated block store over HTTP"};

static const struct hc_cmdline_prog hcstor_prog = {
    .name = "hcstor",
    .summary = "the reference storage service",
    .command = &hcstor_command,
    .globals = hc_cmdline_help_only,
    .epilog = "Exit codes: 0 stopped on SIGTERM or SIGINT, 1 failed, 2 usage.\n",
    .usage_exit = 2,
};

int main(int argc, char **argv)
{
    struct hc_cmd_ctx ctx;
    return hc_cmdline_main(&hcstor_prog, &ctx.cl, &ctx, argc, argv);
}
