/*
 * The agent API of one hollow node (hollow.h, docs/hollow.md "What a node answers"): the wire
 * formats of the real agent (agents/hcagent/agent_api.c, software_api.c, service_settings.c,
 * net_api.c), answered from an in-memory model instead of a service, a data directory and the
 * kernel. Staging really downloads the bundle from the controller (hashed, checked, its manifest
 * parsed and kept once per version), on a thread of its own; activation takes activate_ms.
 */
#include <arpa/inet.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/hcagent/agent.h"
#include "common/bundle.h"
#include "common/constants.h"
#include "common/https_client.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/settings.h"
#include "common/util.h"
#include "tools/hollow/hollow.h"

#define STAGE_TIMEOUT_MS 120000

static const char *const fault_names[] = {"none", "unreachable", "stalled", "slow", "failing"};

const char *hollow_fault_name(enum hollow_fault f)
{
    return (size_t)f < HC_ARRAY_LEN(fault_names) ? fault_names[f] : "none";
}

int hollow_fault_parse(const char *s, enum hollow_fault *out)
{
    for (size_t i = 0; i < HC_ARRAY_LEN(fault_names); i++)
        if (!strcmp(s, fault_names[i])) {
            *out = (enum hollow_fault)i;
            return 0;
        }
    return -1;
}

void hollow_node_init(struct hollow_node *n)
{
    n->history = json_array();
    n->overrides = json_object();
    n->mtu = n->h->default_mtu;
    n->disk_free_percent = 50;
}

void hollow_node_clear(struct hollow_node *n)
{
    hollow_unserve(n);
    if (n->echo_ev)
        event_free(n->echo_ev);
    if (n->echo_fd >= 0)
        close(n->echo_fd);
    json_decref(n->history);
    json_decref(n->overrides);
    json_decref(n->values);
    json_decref(n->started);
    hc_agent_fence_free(n->fence);
    n->fence = NULL;
}

/* ---------------------------------------------------------------- replies */

/* Pending deferred replies of a node: its server may only be freed once they are answered. */
struct delayed {
    struct hollow_node *n;
    struct hc_deferred *d;
    int status;
    json_t *body;
    struct hc_error err;
    struct event *ev;
};

static int pending_replies[HOLLOW_MAX_NODES];

static void delayed_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct delayed *x = arg;
    if (x->body)
        hc_deferred_reply_json(x->d, x->status, x->body);
    else
        hc_deferred_reply_error(x->d, &x->err);
    pending_replies[x->n->index]--;
    event_free(x->ev);
    free(x);
}

/* Answers d after ms (0: at the next loop turn). body stolen; NULL: err. */
static void answer_later(struct hollow_node *n, struct hc_deferred *d, int ms, int status,
                         json_t *body, const struct hc_error *err)
{
    struct delayed *x = calloc(1, sizeof(*x));
    if (!x || !(x->ev = evtimer_new(n->h->base, delayed_fire, x))) {
        free(x);
        if (body)
            hc_deferred_reply_json(d, status, body);
        else
            hc_deferred_reply_error(d, err);
        return;
    }
    *x = (struct delayed){.n = n, .d = d, .status = status, .body = body, .ev = x->ev};
    if (err)
        x->err = *err;
    pending_replies[n->index]++;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(x->ev, &tv);
}

/* Every answer goes through here: at once, or after slow_ms when the node is slow. */
static void reply(struct hollow_node *n, struct hc_request *req, int status, json_t *body)
{
    n->h->requests++;
    struct hc_deferred *d = n->fault == FAULT_SLOW ? hc_req_defer(req) : NULL;
    if (d)
        answer_later(n, d, n->slow_ms, status, body, NULL);
    else
        hc_reply_json(req, status, body);
}

static void reply_err(struct hollow_node *n, struct hc_request *req, const struct hc_code *code,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void reply_err(struct hollow_node *n, struct hc_request *req, const struct hc_code *code,
                      const char *fmt, ...)
{
    struct hc_error err;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hc_error_set(&err, code, "%s", msg);
    n->h->requests++;
    struct hc_deferred *d = n->fault == FAULT_SLOW ? hc_req_defer(req) : NULL;
    if (d)
        answer_later(n, d, n->slow_ms, 0, NULL, &err);
    else
        hc_reply_error(req, &err);
}

/* ---------------------------------------------------------------- the model */

static json_t *manifest_of(struct hollow *h, const char *version)
{
    pthread_mutex_lock(&h->manifests_mu);
    json_t *m = json_incref(json_object_get(h->manifests, version));
    pthread_mutex_unlock(&h->manifests_mu);
    return m;
}

static void history_add(struct hollow_node *n, const char *event, const char *version)
{
    char when[32];
    int64_t now = hc_now_ms();
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s}", "ts_ms", (json_int_t)now, "time",
                          hc_time_format(now, when, sizeof(when)), "event", event, "node", n->name,
                          "version", version);
    json_object_set_new(o, "pid", n->running ? json_integer(n->pid) : json_null());
    json_array_append_new(n->history, o);
    while (json_array_size(n->history) > HOLLOW_HISTORY_KEEP)
        json_array_remove(n->history, 0);
}

/* The effective settings of version under the node's overrides (NULL: no schema, or the
 * overrides do not fit it). Fills digest. */
static json_t *effective(struct hollow_node *n, const char *version, const json_t *overrides,
                         char digest[65], struct hc_error *err)
{
    json_t *m = manifest_of(n->h, version), *kept = NULL, *vanished = NULL, *values = NULL;
    struct hc_settings_schema *s = m ? hc_settings_schema_of(m, err) : NULL;
    if (s && hc_settings_schema_count(s) > 0 &&
        hc_settings_upgrade_check(s, overrides, &kept, &vanished, err) == 0 &&
        (values = hc_settings_normalize(s, kept, HC_SETTINGS_DEFAULTS, err)) &&
        hc_settings_digest(values, digest, err) < 0) {
        json_decref(values);
        values = NULL;
    }
    hc_settings_schema_free(s);
    json_decref(m);
    json_decref(kept);
    json_decref(vanished);
    return values;
}

static void settings_refresh(struct hollow_node *n)
{
    struct hc_error err = {0};
    json_decref(n->values);
    n->values = n->current[0] ? effective(n, n->current, n->overrides, n->digest, &err) : NULL;
}

/* Whether the running service started with values that differ from the current ones in a
 * restart setting. Judged when either changes (a start, a stop, an activation, a settings PUT),
 * not on every status request: the poller asks every node every cycle. */
static void judge_restart(struct hollow_node *n)
{
    n->restart_pending = 0;
    if (!n->running || !n->started || !n->values)
        return;
    json_t *m = manifest_of(n->h, n->current);
    struct hc_error err = {0};
    struct hc_settings_schema *s = m ? hc_settings_schema_of(m, &err) : NULL;
    if (s)
        json_decref(hc_settings_diff(s, n->started, n->values, &n->restart_pending));
    hc_settings_schema_free(s);
    json_decref(m);
}

static void service_start(struct hollow_node *n)
{
    n->running = 1;
    n->pid = ++n->h->pid_seq + 100000;
    n->started_wall = hc_now_ms();
    n->drained = 0;
    json_decref(n->started);
    n->started = json_incref(n->values);
    history_add(n, "started", n->current);
    history_add(n, "running", n->current);
    judge_restart(n);
}

static void service_stop(struct hollow_node *n)
{
    if (!n->running)
        return;
    history_add(n, "stopped", n->current);
    n->running = 0;
    n->pid = 0;
    judge_restart(n);
}

static const char *service_state(const struct hollow_node *n);

static int healthy(const struct hollow_node *n)
{
    return n->running && n->fault != FAULT_FAILING;
}

static json_t *service_json(struct hollow_node *n)
{
    char when[32];
    json_t *o = json_pack("{s:s, s:i, s:s, s:{}}", "state", service_state(n), "restarts",
                          n->restarts, "log", "(hollow)", "limits");
    json_object_set_new(o, "version", n->running ? json_string(n->current) : json_null());
    json_object_set_new(o, "pid", n->running ? json_integer(n->pid) : json_null());
    json_object_set_new(o, "started_at",
                        n->running
                            ? json_string(hc_time_format(n->started_wall, when, sizeof(when)))
                            : json_null());
    json_object_set_new(o, "uptime_seconds",
                        n->running ? json_integer((hc_now_ms() - n->started_wall) / 1000)
                                   : json_null());
    json_object_set_new(o, "last_exit", json_null());
    json_object_set_new(o, "healthy", json_boolean(healthy(n)));
    json_object_set_new(o, "health_detail",
                        n->running ? json_string(healthy(n) ? "ok" : "hollow: failing (fault)")
                                   : json_null());
    return o;
}

static json_t *software_json(struct hollow_node *n)
{
    json_t *installed = json_array();
    for (int i = 0; i < n->nstaged; i++)
        json_array_append_new(installed, json_pack("{s:s}", "version", n->staged[i]));
    json_t *o = json_pack("{s:o, s:s, s:o}", "installed", installed, "desired",
                          n->running ? "running" : "stopped", "service", service_json(n));
    json_object_set_new(o, "current", n->current[0] ? json_string(n->current) : json_null());
    json_object_set_new(o, "previous", n->previous[0] ? json_string(n->previous) : json_null());
    json_object_set_new(o, "staging", n->staging[0] ? json_string(n->staging) : json_null());
    return o;
}

static json_t *settings_status(struct hollow_node *n)
{
    if (!n->values)
        return json_null();
    return json_pack("{s:s, s:I, s:s, s:b}", "version", n->current, "revision",
                     (json_int_t)n->revision, "digest", n->digest, "pending_restart",
                     n->restart_pending);
}

static int is_staged(const struct hollow_node *n, const char *v)
{
    for (int i = 0; i < n->nstaged; i++)
        if (!strcmp(n->staged[i], v))
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- routes: status */

static void status_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    json_t *b = json_pack("{s:s, s:s, s:s, s:i}", "agent_version", HC_VERSION, "node_name", n->name,
                          "hostname", n->name, "uptime_seconds", 1);
    json_object_set_new(b, "software_version",
                        n->current[0] ? json_string(n->current) : json_null());
    json_object_set_new(b, "previous_software_version",
                        n->previous[0] ? json_string(n->previous) : json_null());
    json_object_set_new(b, "service", service_json(n));
    json_object_set_new(b, "settings", settings_status(n));
    json_object_set_new(b, "storage_interface", json_string("hollow0"));
    json_object_set_new(b, "storage_host", json_string(n->addr));
    json_object_set_new(b, "controller_term", json_integer(hc_agent_fence_highest(n->fence)));
    json_object_set_new(b, "time_ms", json_integer(hc_now_ms() + n->clock_offset_ms));
    json_object_set_new(b, "data_dir_free_bytes",
                        json_integer(HOLLOW_DISK_TOTAL / 100 * n->disk_free_percent));
    json_object_set_new(b, "data_dir_total_bytes", json_integer(HOLLOW_DISK_TOTAL));
    hc_agent_cert_status(n->cert, b); /* cert_serial, cert_not_after_ms, ca_digest */
    reply(n, req, 200, b);
}

static void interfaces_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    char cidr[40];
    snprintf(cidr, sizeof(cidr), "%s/8", n->addr);
    reply(n, req, 200,
          json_pack("{s:[{s:s, s:i, s:i, s:s, s:n, s:n, s:[s]}]}", "interfaces", "name", "hollow0",
                    "index", 2, "mtu", n->mtu, "state", "up", "kind", "master", "addresses", cidr));
}

static void leave_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    reply(n, req, 202, json_pack("{s:b, s:b, s:n}", "leaving", 1, "purge", 0, "service_data"));
}

/* ---------------------------------------------------------------- routes: software */

static void software_get(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    reply(n, req, 200, software_json(n));
}

struct stage_job {
    struct hollow_node *n;
    struct hc_deferred *d;
    struct event *done_ev;
    char version[65], url[700], token[512], sha256[65], signature[HC_BUNDLE_SIG_MAX];
    char got_sha[65];
    int failed;
    struct hc_error err;
    size_t bytes;
};

/* Off the loop: the download, its checks, and the manifest. */
static void *stage_thread(void *arg)
{
    struct stage_job *j = arg;
    struct hollow *h = j->n->h;
    char ca[1200];
    snprintf(ca, sizeof(ca), "%s/%s", j->n->dir, HC_AGENT_FILE_CA); /* what it trusts, as hcagent */
    struct hc_tls_client_config tls = {
        .ca_file = ca, .source_address = j->n->addr, .max_response = HC_BUNDLE_MAX_BYTES};
    struct hc_http_response resp = {0};
    struct hc_http_client *c = hc_http_client_new(&tls, &j->err);
    json_t *known = NULL;
    j->failed = 1;
    if (c && hc_http_request_raw(c, "GET", j->url, j->token, NULL, 0, NULL, NULL, STAGE_TIMEOUT_MS,
                                 &resp, &j->err) == 0) {
        if (resp.status != 200) {
            if (hc_error_from_json(&j->err, resp.body, (int)resp.status) < 0)
                hc_error_set(&j->err, HC_E(DOWNLOAD_FAILED), "HTTP %ld from %s", resp.status,
                             j->url);
        } else {
            j->bytes = resp.raw_len;
            hc_sha256_hex(resp.raw, resp.raw_len, j->got_sha);
            if (strcmp(j->got_sha, j->sha256) != 0) {
                hc_error_set(&j->err, HC_E(DOWNLOAD_FAILED), "bundle %s: sha256 %s, expected %s",
                             j->version, j->got_sha, j->sha256);
            } else if (!(known = manifest_of(h, j->version))) {
                /* the real agent's checks: the signature against the keys the controller
                 * trusts (hchollow --trust-key), the archive, the manifest */
                struct hc_bundle *b =
                    hc_bundle_open(resp.raw, resp.raw_len, j->signature, h->keys, &j->err);
                if (b) {
                    pthread_mutex_lock(&h->manifests_mu);
                    json_object_set_new(h->manifests, j->version,
                                        json_deep_copy(hc_bundle_manifest(b)));
                    pthread_mutex_unlock(&h->manifests_mu);
                    hc_bundle_free(b);
                    j->failed = 0;
                }
            } else {
                j->failed = 0;
            }
        }
    }
    json_decref(known);
    hc_http_response_clear(&resp);
    hc_http_client_free(c);
    event_active(j->done_ev, 0, 0);
    return NULL;
}

static void stage_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct stage_job *j = arg;
    struct hollow_node *n = j->n;
    n->staging[0] = '\0';
    n->h->staged_bytes += j->bytes;
    if (j->failed) {
        n->h->stage_failures++;
        answer_later(n, j->d, n->fault == FAULT_SLOW ? n->slow_ms : 0, 0, NULL, &j->err);
    } else {
        int already = is_staged(n, j->version);
        if (!already && n->nstaged < HOLLOW_MAX_STAGED)
            snprintf(n->staged[n->nstaged++], sizeof(n->staged[0]), "%s", j->version);
        answer_later(n, j->d, n->fault == FAULT_SLOW ? n->slow_ms : 0, 200,
                     json_pack("{s:s, s:s, s:b, s:b}", "version", j->version, "sha256", j->got_sha,
                               "staged", 1, "already_staged", already),
                     NULL);
    }
    event_free(j->done_ev);
    free(j);
}

static void stage_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    json_t *body = hc_req_json(req);
    if (!body)
        return; /* answered 400 */
    const char *version = hc_json_str(body, "version", "");
    const char *url = hc_json_str(body, "url", NULL);
    const char *token = hc_json_str(body, "token", "");
    const char *sha = hc_json_str(body, "sha256", "");
    if (!hc_bundle_version_valid(version) || strlen(sha) != 64 || strlen(token) >= 512 ||
        (url && strlen(url) >= 700)) {
        reply_err(n, req, HC_E(INVALID_ARGUMENT),
                  "stage needs a valid 'version', a 64-character 'sha256' and a 'token'");
        return;
    }
    if (n->staging[0]) {
        reply_err(n, req, HC_E(CONFLICT), "the agent is busy: staging %s", n->staging);
        return;
    }
    struct stage_job *j = calloc(1, sizeof(*j));
    pthread_t t;
    if (!j) {
        reply_err(n, req, HC_E(INTERNAL), "out of memory");
        return;
    }
    j->n = n;
    snprintf(j->version, sizeof(j->version), "%s", version);
    if (url)
        snprintf(j->url, sizeof(j->url), "%s", url);
    else
        snprintf(j->url, sizeof(j->url), "%s/v1/software/%s/bundle", n->h->controller, version);
    snprintf(j->token, sizeof(j->token), "%s", token);
    snprintf(j->sha256, sizeof(j->sha256), "%s", sha);
    snprintf(j->signature, sizeof(j->signature), "%s", hc_json_str(body, "signature", ""));
    j->done_ev = event_new(n->h->base, -1, 0, stage_done, j);
    j->d = hc_req_defer(req);
    if (!j->done_ev || !j->d || pthread_create(&t, NULL, stage_thread, j) != 0) {
        if (j->done_ev)
            event_free(j->done_ev);
        if (j->d)
            hc_deferred_reply_error(j->d, &(struct hc_error){.status = 500,
                                                             .code = "internal",
                                                             .message = "cannot stage now"});
        else
            reply_err(n, req, HC_E(INTERNAL), "cannot stage now");
        free(j);
        return;
    }
    pthread_detach(t);
    snprintf(n->staging, sizeof(n->staging), "%s", j->version);
}

struct action {
    struct hollow_node *n;
    struct hc_deferred *d;
    char version[65];
    int rollback, start, stop_only;
    struct event *ev;
};

static void action_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct action *a = arg;
    struct hollow_node *n = a->n;
    service_stop(n);
    if (a->rollback) {
        char was[65];
        snprintf(was, sizeof(was), "%s", n->current);
        snprintf(n->current, sizeof(n->current), "%s", n->previous);
        snprintf(n->previous, sizeof(n->previous), "%s", was);
    } else if (!a->stop_only && strcmp(n->current, a->version) != 0) {
        snprintf(n->previous, sizeof(n->previous), "%s", n->current);
        snprintf(n->current, sizeof(n->current), "%s", a->version);
    }
    settings_refresh(n);
    judge_restart(n);
    if (a->start)
        service_start(n);
    n->busy = 0;
    answer_later(n, a->d, n->fault == FAULT_SLOW ? n->slow_ms : 0, 200, software_json(n), NULL);
    event_free(a->ev);
    free(a);
}

/* Activation, rollback, stop and start: the service goes down for activate_ms (a start alone
 * takes no time), then the answer is the software document, as the real agent's. */
static void begin_action(struct hollow_node *n, struct hc_request *req, const char *version,
                         int rollback, int start, int stop_only)
{
    if (n->busy) {
        reply_err(n, req, HC_E(CONFLICT), "the agent is busy: an activation is in progress");
        return;
    }
    struct action *a = calloc(1, sizeof(*a));
    if (!a || !(a->ev = evtimer_new(n->h->base, action_done, a)) || !(a->d = hc_req_defer(req))) {
        if (a && a->ev)
            event_free(a->ev);
        free(a);
        reply_err(n, req, HC_E(INTERNAL), "out of memory");
        return;
    }
    a->n = n;
    snprintf(a->version, sizeof(a->version), "%s", version ? version : "");
    a->rollback = rollback;
    a->start = start;
    a->stop_only = stop_only;
    n->busy = 1;
    int ms = n->running || !stop_only ? n->h->activate_ms : 0;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(a->ev, &tv);
}

static void activate_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    const char *v = hc_json_str(body, "version", "");
    const json_t *start = json_object_get(body, "start");
    if (!is_staged(n, v)) {
        reply_err(n, req, HC_E(NOT_STAGED), "version '%s' is not staged on node %s", v, n->name);
    } else {
        char version[65];
        snprintf(version, sizeof(version), "%s", v);
        begin_action(n, req, version, 0, !start || json_is_true(start), 0);
    }
}

static void rollback_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    if (!n->previous[0])
        reply_err(n, req, HC_E(CONFLICT), "no previous version to roll back to on %s", n->name);
    else
        begin_action(n, req, NULL, 1, 1, 0);
}

static void stop_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    if (!n->running)
        reply(n, req, 200, software_json(n)); /* nothing to stop, as the real agent */
    else
        begin_action(n, req, NULL, 0, 0, 1);
}

static void start_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    if (!n->current[0])
        reply_err(n, req, HC_E(NOT_INSTALLED), "no service is installed on node %s", n->name);
    else if (n->running)
        reply(n, req, 200, software_json(n));
    else
        begin_action(n, req, NULL, 0, 1, 1);
}

/* ---------------------------------------------------------------- routes: the service */

static const char *service_state(const struct hollow_node *n)
{
    return !n->current[0] ? "not_installed" : n->running ? "running" : "stopped";
}

/* Without a running service the real agent answers the hooks itself (software_api.c
 * hook_without_service): not healthy, ok to stop, drained; resync unknown (409). */
static void health_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    char detail[96];
    snprintf(detail, sizeof(detail), "the service is %s", service_state(n));
    reply(n, req, 200,
          json_pack("{s:b, s:s, s:s, s:s}", "healthy", healthy(n), "detail",
                    healthy(n)   ? "ok"
                    : n->running ? "hollow: failing (fault)"
                                 : detail,
                    "version", n->current, "state", service_state(n)));
}

static void ok_to_stop_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    reply(n, req, 200,
          json_pack("{s:b, s:s}", "ok_to_stop", 1, "reason",
                    n->running ? "every block has another replica" : "the service is not running"));
}

static void drain_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    n->drained = n->running;
    reply(n, req, 200, json_pack("{s:b, s:s}", "drained", 1, "detail", "hollow: nothing to move"));
}

static void resync_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    if (!n->running) {
        reply_err(n, req, HC_E(SERVICE_NOT_RUNNING),
                  "the service is %s: its resync state is unknown", service_state(n));
        return;
    }
    reply(n, req, 200, json_pack("{s:i, s:b, s:s}", "pending", 0, "done", 1, "detail", "in sync"));
}

static void history_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    const char *since = hc_req_query(req, "since");
    char *end = NULL;
    long long ms = since ? strtoll(since, &end, 10) : 0;
    if (since && (!*since || *end)) {
        reply_err(n, req, HC_E(INVALID_ARGUMENT), "since must be epoch milliseconds");
        return;
    }
    json_t *events = json_array(), *e;
    size_t i;
    json_array_foreach(n->history, i, e) if (json_integer_value(json_object_get(e, "ts_ms")) >= ms)
        json_array_append(events, e);
    reply(n, req, 200, json_pack("{s:s, s:o}", "node", n->name, "events", events));
}

static void peers_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    json_t *nodes = json_object_get(body, "nodes");
    json_t *epoch = json_object_get(body, "epoch");
    if (!json_is_array(nodes) || !json_is_integer(epoch)) {
        reply_err(n, req, HC_E(INVALID_ARGUMENT), "peers need 'nodes' (array) and 'epoch'");
    } else {
        n->peers_epoch = json_integer_value(epoch);
        reply(n, req, 200,
              json_pack("{s:b, s:I, s:I}", "written", 1, "epoch", (json_int_t)n->peers_epoch,
                        "nodes", (json_int_t)json_array_size(nodes)));
    }
}

/* ---------------------------------------------------------------- routes: settings */

static void settings_get(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    if (!n->values) {
        reply_err(n, req, n->current[0] ? HC_E(CONFLICT) : HC_E(NOT_INSTALLED),
                  n->current[0] ? "version %s declares no settings"
                                : "no software is active on this node%s",
                  n->current);
        return;
    }
    json_t *b = json_pack("{s:s, s:I, s:O, s:O, s:s, s:b}", "version", n->current, "revision",
                          (json_int_t)n->revision, "overrides", n->overrides, "values", n->values,
                          "digest", n->digest, "pending_restart", n->restart_pending);
    json_object_set(b, "started", n->started ? n->started : json_null());
    reply(n, req, 200, b);
}

static void settings_put(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    const json_t *rev = json_object_get(body, "revision");
    const json_t *values = json_object_get(body, "values");
    const char *version = hc_json_str(body, "version", n->current);
    json_t *m = NULL, *overrides = NULL, *eff = NULL, *diff = NULL;
    struct hc_settings_schema *s = NULL;
    char digest[65];
    if (!json_is_integer(rev) || json_integer_value(rev) < 0 || !json_is_object(values)) {
        reply_err(n, req, HC_E(INVALID_ARGUMENT),
                  "settings need 'revision' (integer >= 0) and 'values' (object)");
        goto done;
    }
    if (!(m = manifest_of(n->h, version)) || !(s = hc_settings_schema_of(m, &err)) ||
        !hc_settings_schema_count(s)) {
        reply_err(n, req, HC_E(CONFLICT), "version %s is not staged here or declares no settings",
                  version);
        goto done;
    }
    if (!(overrides = hc_settings_normalize(s, values, 0, &err)) ||
        !(eff = hc_settings_normalize(s, overrides, HC_SETTINGS_DEFAULTS, &err)) ||
        hc_settings_digest(eff, digest, &err) < 0) {
        n->h->requests++;
        hc_reply_error(req, &err);
        goto done;
    }
    diff = n->values ? hc_settings_diff(s, n->values, eff, NULL) : json_array();
    json_t *changed = json_array(), *d;
    size_t i;
    json_array_foreach(diff, i, d) json_array_append(changed, json_object_get(d, "name"));
    n->revision = json_integer_value(rev);
    json_decref(n->overrides);
    n->overrides = json_incref(overrides);
    if (!strcmp(version, n->current)) {
        json_decref(n->values);
        n->values = json_incref(eff);
        snprintf(n->digest, sizeof(n->digest), "%s", digest);
        judge_restart(n);
    }
    reply(n, req, 200,
          json_pack("{s:s, s:I, s:s, s:o, s:b, s:b}", "version", version, "revision",
                    (json_int_t)n->revision, "digest", digest, "changed", changed, "reloaded",
                    json_array_size(changed) > 0 && n->running, "pending_restart",
                    n->restart_pending));
done:
    hc_settings_schema_free(s);
    json_decref(m);
    json_decref(overrides);
    json_decref(eff);
    json_decref(diff);
}

/* ---------------------------------------------------------------- routes: network */

/* Each target answered from the topology: a probe of `size` passes when it fits both ends'
 * MTUs; a bigger one is a blackhole (what a smaller MTU somewhere on an L2 path looks like),
 * with the largest size that passes. */
static void probe_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    json_t *targets = json_object_get(body, "targets"), *t;
    if (!json_is_array(targets) || json_array_size(targets) > 1024) {
        reply_err(n, req, HC_E(INVALID_ARGUMENT), "'targets' must be an array of at most 1024");
        return;
    }
    json_t *results = json_array();
    size_t i;
    json_array_foreach(targets, i, t)
    {
        const char *addr = hc_json_str(t, "address", "");
        int size = (int)hc_json_int(t, "size", 0);
        struct in_addr in;
        int peer_mtu = 0;
        if (inet_pton(AF_INET, addr, &in) == 1) {
            long k = (long)ntohl(in.s_addr) - (long)ntohl(n->h->first.s_addr);
            if (k >= 0 && k < n->h->count)
                peer_mtu = n->h->nodes[k].fault == FAULT_UNREACHABLE ? 0 : n->h->nodes[k].mtu;
        }
        int fit = peer_mtu < n->mtu ? peer_mtu : n->mtu;
        const char *result = !peer_mtu ? "unreachable" : size <= fit ? "ok" : "blackhole";
        char detail[160];
        snprintf(detail, sizeof(detail), "hollow topology: %s (path carries %d bytes)", result,
                 fit);
        json_array_append_new(
            results,
            json_pack("{s:s, s:i, s:s, s:n, s:o, s:o, s:s}", "address", addr, "size", size,
                      "result", result, "path_mtu", "largest_ok",
                      !peer_mtu ? json_null() : json_integer(size <= fit ? size : fit), "rtt_ms",
                      size <= fit ? json_real(0.05) : json_null(), "detail", detail));
    }
    reply(n, req, 200, json_pack("{s:o, s:n}", "results", results, "neighbors"));
}

static void unsupported_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    reply_err(n, req, HC_E(UNAVAILABLE), "hchollow does not model %s %s", hc_req_method(req),
              hc_req_path(req));
}

static void mtu_get_route(struct hc_request *req, void *arg)
{
    struct hollow_node *n = arg;
    reply(n, req, 200,
          json_pack("{s:n, s:[{s:s, s:i}]}", "pending", "interfaces", "name", "hollow0", "mtu",
                    n->mtu));
}

/* ---------------------------------------------------------------- serving */

/* Every request passes the node's fence before its route, as in hcagent. */
static int fence_before(struct hc_request *req, const struct hc_route *route, void *arg)
{
    struct hollow_node *n = arg;
    return hc_agent_fence_request(n->fence, req);
}

int hollow_serve(struct hollow_node *n, struct hc_error *err)
{
    static const struct {
        const char *method, *pattern;
        hc_route_fn fn;
    } routes[] = {
        {"GET", "/v1/status", status_route},
        {"GET", "/v1/interfaces", interfaces_route},
        {"POST", "/v1/leave", leave_route},
        {"GET", "/v1/software", software_get},
        {"POST", "/v1/software/stage", stage_route},
        {"POST", "/v1/software/activate", activate_route},
        {"POST", "/v1/software/rollback", rollback_route},
        {"POST", "/v1/service/stop", stop_route},
        {"POST", "/v1/service/start", start_route},
        {"GET", "/v1/service/health", health_route},
        {"GET", "/v1/service/ok-to-stop", ok_to_stop_route},
        {"POST", "/v1/service/drain", drain_route},
        {"GET", "/v1/service/resync", resync_route},
        {"GET", "/v1/service/history", history_route},
        {"PUT", "/v1/service/peers", peers_route},
        {"GET", "/v1/service/settings", settings_get},
        {"PUT", "/v1/service/settings", settings_put},
        {"POST", "/v1/net/probe", probe_route},
        {"GET", "/v1/net/mtu", mtu_get_route},
        {"POST", "/v1/net/mtu", unsupported_route},
        {"POST", "/v1/net/mtu/confirm", unsupported_route},
        {"POST", "/v1/net/mtu/revert", unsupported_route},
        {"POST", "/v1/net/bench/server", unsupported_route},
        {"POST", "/v1/net/bench/client", unsupported_route},
    };
    /* hcagent's TLS configuration from the identity's own files, and its certificate routes
     * (agents/hcagent/cert.h): renewal and CA rotation are the real agent's code */
    struct hc_agent_tls t;
    if (hc_agent_tls_config(&t, n->dir, n->client_pin, err) < 0 ||
        !(n->srv = hc_http_server_new(n->h->base, &t.tls, err)))
        return hc_error_prefix(err, "node %s", n->name);
    hc_http_server_set_guard(n->srv, 64, 0);
    hc_http_server_set_hooks(n->srv, fence_before, NULL, n);
    for (size_t i = 0; i < HC_ARRAY_LEN(routes); i++)
        if (hc_http_server_route(n->srv, routes[i].method, routes[i].pattern, 0, routes[i].fn, n) <
            0) {
            hollow_unserve(n);
            return hc_error_set(err, HC_E(INTERNAL), "cannot add route %s", routes[i].pattern);
        }
    if (!(n->cert = hc_agent_cert_new(n->srv, n->dir, n->name, n->client_pin, err))) {
        hollow_unserve(n);
        return hc_error_prefix(err, "node %s", n->name);
    }
    if (hc_http_server_listen(n->srv, n->addr, n->h->port, err) < 0) {
        hollow_unserve(n);
        return hc_error_prefix(err, "node %s", n->name);
    }
    return 0;
}

void hollow_unserve(struct hollow_node *n)
{
    if (n->stall_lev) {
        evconnlistener_free(n->stall_lev);
        n->stall_lev = NULL;
    }
    while (n->nstalled > 0)
        close(n->stalled_fds[--n->nstalled]);
    if (n->srv) {
        hc_http_server_free(n->srv);
        n->srv = NULL;
    }
    hc_agent_cert_free(n->cert);
    n->cert = NULL;
}

/* A stalled node's connections are accepted and never read: kept open, like a peer behind an
 * MTU blackhole whose TLS handshake never completes. Closed when the fault ends. */
static void stall_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *a, int len,
                         void *arg)
{
    (void)l;
    (void)a;
    (void)len;
    struct hollow_node *n = arg;
    if (n->nstalled < HOLLOW_MAX_STALLED)
        n->stalled_fds[n->nstalled++] = fd;
    else
        close(fd);
}

static int stall_listen(struct hollow_node *n, struct hc_error *err)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)n->h->port), .sin_addr = n->in};
    n->stall_lev = evconnlistener_new_bind(n->h->base, stall_accept, n,
                                           LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 64,
                                           (struct sockaddr *)&sin, sizeof(sin));
    return n->stall_lev
               ? 0
               : hc_error_set(err, HC_E(INTERNAL), "node %s: cannot listen to stall", n->name);
}

int hollow_set_fault(struct hollow_node *n, enum hollow_fault f, int arg, struct hc_error *err)
{
    int was_serving = n->fault != FAULT_UNREACHABLE && n->fault != FAULT_STALLED;
    int serve = f != FAULT_UNREACHABLE && f != FAULT_STALLED;
    if (!serve && pending_replies[n->index] > 0)
        return hc_error_set(err, HC_E(CONFLICT), "node %s has %d replies in flight: try again",
                            n->name, pending_replies[n->index]);
    n->fault = f;
    n->slow_ms = f == FAULT_SLOW ? arg : 0;
    if (was_serving && !serve)
        hollow_unserve(n);
    if (!was_serving && serve) {
        hollow_unserve(n);
        return hollow_serve(n, err);
    }
    if (f == FAULT_STALLED && !n->stall_lev)
        return stall_listen(n, err);
    return 0;
}
