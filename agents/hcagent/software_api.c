/*
 * The agent's software and service endpoints (docs/api.md "Agent API: software and service").
 *
 * Nothing here blocks the agent's event loop: staging and the hooks run as jobs (threads), and
 * stop, activation and rollback wait for the service's exit through the supervisor; all of them
 * answer with a deferred reply, so /v1/status keeps answering the controller's poller meanwhile.
 * One stop/start/activation/rollback at a time (409 otherwise), and one stage at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agents/hcagent/privilege.h"
#include "agents/hcagent/service_settings.h"
#include "agents/hcagent/software.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"

/* A stop, start, activation or rollback waiting for the service to stop. */
struct hc_sw_action {
    struct hc_agent_software *sw;
    struct hc_deferred *d;
    char what[16]; /* "activate", "rollback", "stop" */
    char version[65];
    int start;
    json_t *manifest;
};

static void reply_error(struct hc_request *req, const struct hc_code *code, const char *msg)
{
    struct hc_error err;
    hc_error_set(&err, code, "%s", msg);
    hc_reply_error(req, &err);
}

static int busy(struct hc_request *req, const struct hc_agent_software *sw)
{
    char msg[160];
    if (!sw->action)
        return 0;
    snprintf(msg, sizeof(msg), "the agent is busy: %s %s is in progress", sw->action->what,
             sw->action->version);
    reply_error(req, HC_E(CONFLICT), msg);
    return 1;
}

static void action_free(struct hc_sw_action *a)
{
    if (a->sw->action == a)
        a->sw->action = NULL;
    json_decref(a->manifest);
    free(a);
}

void hc_agent_sw_actions_cancel(struct hc_agent_software *sw)
{
    if (!sw || !sw->action)
        return;
    struct hc_error err;
    hc_error_set(&err, HC_E(SHUTTING_DOWN), "the agent stopped before %s %s finished",
                 sw->action->what, sw->action->version);
    hc_deferred_reply_error(sw->action->d, &err);
    action_free(sw->action);
}

/* A body that may be empty (curl sends "Content-Length: 0" for a POST without data): {} then.
 * New reference, or NULL after having replied 400. */
static json_t *optional_body(struct hc_request *req)
{
    const char *length = hc_req_header(req, "Content-Length");
    if (!hc_req_header(req, "Transfer-Encoding") && (!length || strcmp(length, "0") == 0))
        return json_object();
    return json_incref(hc_req_json(req));
}

/* ---------------------------------------------------------------- GET /v1/software */

static void software_get(struct hc_request *req, void *arg)
{
    hc_reply_json(req, 200, hc_agent_sw_json(arg));
}

/* ---------------------------------------------------------------- stage */

struct stage_ctx {
    struct hc_agent_software *sw;
    struct hc_deferred *d;
    struct hc_agent_sw_stage st;
};

static void stage_work(void *arg)
{
    struct stage_ctx *c = arg;
    hc_agent_sw_stage_work(&c->st);
}

static void stage_done(void *arg)
{
    struct stage_ctx *c = arg;
    c->sw->staging[0] = '\0';
    if (c->st.failed) {
        HC_WARN("stage of %s failed: %s", c->st.version, c->st.err.message);
        hc_deferred_reply_error(c->d, &c->st.err);
    } else {
        HC_INFO("software %s staged%s (sha256 %.12s)", c->st.version,
                c->st.already ? " already" : "", c->st.sha256_out);
        hc_deferred_reply_json(c->d, 200,
                               json_pack("{s:s, s:s, s:b, s:b}", "version", c->st.version, "sha256",
                                         c->st.sha256_out, "staged", 1, "already_staged",
                                         c->st.already));
    }
    free(c);
}

static int stage_parse(struct stage_ctx *c, json_t *body, const char *dir, const char *kind,
                       struct hc_error *err)
{
    const char *version = hc_json_req_str(body, "version", err);
    if (!version)
        return -1;
    if (!hc_bundle_version_valid(version))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid version '%s'", version);
    const char *url = hc_json_str(body, "url", ""), *sig = hc_json_str(body, "signature", "");
    if (*url && strncmp(url, "https://", 8) != 0)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "url must be https://, not '%s'", url);
    if (strlen(url) >= sizeof(c->st.url) || strlen(sig) >= sizeof(c->st.sig) ||
        strlen(hc_json_str(body, "token", "")) >= sizeof(c->st.token))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "url, token or signature too long");
    struct hc_agent_sw_stage *st = &c->st;
    snprintf(st->version, sizeof(st->version), "%s", version);
    snprintf(st->url, sizeof(st->url), "%s", url);
    snprintf(st->sig, sizeof(st->sig), "%s", sig);
    snprintf(st->token, sizeof(st->token), "%s", hc_json_str(body, "token", ""));
    snprintf(st->sha256, sizeof(st->sha256), "%s", hc_json_str(body, "sha256", ""));
    snprintf(st->dir, sizeof(st->dir), "%s", dir);
    snprintf(st->kind, sizeof(st->kind), "%s", kind);
    snprintf(st->keys_dir, sizeof(st->keys_dir), "%s", c->sw->keys_dir);
    snprintf(st->ca_file, sizeof(st->ca_file), "%s", c->sw->ca_file);
    snprintf(st->controller, sizeof(st->controller), "%s", c->sw->cfg.controller);
    snprintf(st->controller_pin, sizeof(st->controller_pin), "%s", c->sw->cfg.controller_pin);
    return 0;
}

void hc_agent_sw_stage_start(struct hc_request *req, struct hc_agent_software *sw, const char *dir,
                             const char *kind)
{
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    struct stage_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        reply_error(req, HC_E(INTERNAL), "out of memory");
        return;
    }
    c->sw = sw;
    if (stage_parse(c, body, dir, kind, &err) < 0)
        goto fail;
    if (sw->staging[0]) {
        hc_error_set(&err, HC_E(CONFLICT), "a stage of %s is already in progress", sw->staging);
        goto fail;
    }
    if (!(c->d = hc_req_defer(req))) {
        hc_error_set(&err, HC_E(INTERNAL), "cannot defer the reply");
        goto fail;
    }
    if (hc_jobs_start(sw->jobs, stage_work, stage_done, c, &err) < 0) {
        hc_deferred_reply_error(c->d, &err);
        free(c);
        return;
    }
    snprintf(sw->staging, sizeof(sw->staging), "%s", c->st.version);
    HC_INFO("staging %s", c->st.version);
    return;
fail:
    hc_reply_error(req, &err);
    free(c);
}

static void stage_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    hc_agent_sw_stage_start(req, sw, sw->dir, HC_BUNDLE_KIND_SERVICE);
}

/* ---------------------------------------------------------------- activate, rollback */

static json_t *state_body(struct hc_agent_software *sw)
{
    return hc_agent_sw_json(sw);
}

/* The service has stopped: switch the links, then start the new current. */
static void switch_and_start(void *arg)
{
    struct hc_sw_action *a = arg;
    struct hc_agent_software *sw = a->sw;
    struct hc_error err = {0};
    struct hc_service_env env;
    int rollback = strcmp(a->what, "rollback") == 0;
    hc_agent_sw_env(sw, a->version, &env);
    if (hc_agent_sw_switch(sw, a->version, rollback, &err) < 0 ||
        hc_agent_sw_set_desired(sw, a->start, &err) < 0) {
        hc_deferred_reply_error(a->d, &err);
    } else if (a->start && hc_service_start(sw->svc, a->manifest, &env, &err) < 0) {
        hc_error_prefix(&err, "%s is current but its service did not start", a->version);
        hc_deferred_reply_error(a->d, &err);
    } else {
        if (!a->start)
            hc_service_set_idle(sw->svc, 1);
        hc_deferred_reply_json(a->d, 200, state_body(sw));
    }
    action_free(a);
}

static void stopped_then_reply(void *arg)
{
    struct hc_sw_action *a = arg;
    hc_deferred_reply_json(a->d, 200, state_body(a->sw));
    action_free(a);
}

/* Defers req and stops the service, then runs next. */
static void begin_action(struct hc_request *req, struct hc_agent_software *sw,
                         struct hc_sw_action *a, hc_service_stopped_fn next)
{
    a->sw = sw;
    if (!(a->d = hc_req_defer(req))) {
        reply_error(req, HC_E(INTERNAL), "cannot defer the reply");
        json_decref(a->manifest);
        free(a);
        return;
    }
    sw->action = a;
    if (hc_service_version(sw->svc)[0])
        HC_INFO("%s %s: stopping service %s first", a->what, a->version,
                hc_service_version(sw->svc));
    hc_service_stop(sw->svc, next, a);
}

static void activate_common(struct hc_request *req, struct hc_agent_software *sw, const char *what,
                            const char *version, int start)
{
    struct hc_error err = {0};
    char current[65];
    if (busy(req, sw))
        return;
    json_t *m = hc_agent_sw_manifest(sw, version, &err);
    if (!m) {
        hc_reply_error(req, &err);
        return;
    }
    hc_agent_sw_link(sw, "current", current);
    enum hc_service_state s = hc_service_state(sw->svc);
    int runs = s == HC_SVC_STARTING || s == HC_SVC_RUNNING;
    if (!strcmp(current, version) && start && runs && !strcmp(what, "activate")) {
        json_decref(m);
        json_t *body = state_body(sw);
        json_object_set_new(body, "already_active", json_true());
        hc_reply_json(req, 200, body);
        return;
    }
    struct hc_sw_action *a = calloc(1, sizeof(*a));
    if (!a) {
        json_decref(m);
        reply_error(req, HC_E(INTERNAL), "out of memory");
        return;
    }
    snprintf(a->what, sizeof(a->what), "%s", what);
    snprintf(a->version, sizeof(a->version), "%s", version);
    a->start = start;
    a->manifest = m;
    begin_action(req, sw, a, switch_and_start);
}

static void activate_route(struct hc_request *req, void *arg)
{
    struct hc_error err = {0};
    json_t *body = hc_req_json(req);
    if (!body)
        return;
    const char *version = hc_json_req_str(body, "version", &err);
    if (!version) {
        hc_reply_error(req, &err);
        return;
    }
    activate_common(req, arg, "activate", version, hc_json_bool(body, "start", 1));
}

static void rollback_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    char previous[65];
    hc_agent_sw_link(sw, "previous", previous);
    if (!previous[0]) {
        struct hc_error err;
        hc_error_set(&err, HC_E(NO_ROLLBACK_TARGET),
                     "node %s has no previous version to roll "
                     "back to",
                     sw->cfg.name);
        hc_reply_error(req, &err);
        return;
    }
    json_t *body = optional_body(req);
    if (!body)
        return;
    activate_common(req, sw, "rollback", previous, hc_json_bool(body, "start", 1));
    json_decref(body);
}

/* ---------------------------------------------------------------- stop, start */

static void stop_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    struct hc_error err = {0};
    if (busy(req, sw))
        return;
    /* Recorded first: an agent restarted in the middle must not start it again. */
    if (hc_agent_sw_set_desired(sw, 0, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    struct hc_sw_action *a = calloc(1, sizeof(*a));
    if (!a) {
        reply_error(req, HC_E(INTERNAL), "out of memory");
        return;
    }
    snprintf(a->what, sizeof(a->what), "stop");
    snprintf(a->version, sizeof(a->version), "%s", hc_service_version(sw->svc));
    begin_action(req, sw, a, stopped_then_reply);
}

static void start_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    struct hc_error err = {0};
    struct hc_service_env env;
    char current[65];
    if (busy(req, sw))
        return;
    hc_agent_sw_link(sw, "current", current);
    if (!current[0]) {
        reply_error(req, HC_E(NOT_INSTALLED), "no software is active on this node");
        return;
    }
    enum hc_service_state s = hc_service_state(sw->svc);
    json_t *m = NULL;
    if (hc_agent_sw_set_desired(sw, 1, &err) < 0)
        goto fail;
    if (s == HC_SVC_STARTING || s == HC_SVC_RUNNING || s == HC_SVC_BACKOFF) {
        hc_reply_json(req, 200, state_body(sw)); /* it runs, or will in a moment */
        return;
    }
    hc_agent_sw_env(sw, current, &env);
    if (!(m = hc_agent_sw_manifest(sw, current, &err)) ||
        hc_service_start(sw->svc, m, &env, &err) < 0)
        goto fail;
    json_decref(m);
    hc_reply_json(req, 200, state_body(sw));
    return;
fail:
    json_decref(m);
    hc_reply_error(req, &err);
}

/* ---------------------------------------------------------------- hooks */

struct hook_ctx {
    struct hc_agent_software *sw;
    struct hc_deferred *d;
    enum hc_hook_kind kind;
    json_t *hook;
    struct hc_service_env env;
    struct hc_hook_result res;
    char state[32];
};

static void hook_work(void *arg)
{
    struct hook_ctx *c = arg;
    hc_hook_run(c->kind, c->hook, &c->env, &c->res);
}

/* The answer of each kind, from a hook's result or from what the agent knows without one. */
static void hook_reply(struct hc_deferred *d, struct hc_request *req, enum hc_hook_kind kind,
                       const struct hc_hook_result *r, const char *version, const char *state)
{
    json_t *body = NULL;
    struct hc_error err = {0};
    if (kind == HC_HOOK_HEALTH) {
        body = json_pack("{s:b, s:s, s:s, s:s}", "healthy", r->ok, "detail", r->detail, "version",
                         version, "state", state);
    } else if (kind == HC_HOOK_OK_TO_STOP) {
        body = json_pack("{s:b, s:s}", "ok_to_stop", r->ok, "reason", r->detail);
        /* whether the service answered for the set asked about (an older one answers for this
         * node alone), and its blocks whose every replica is in the set */
        json_object_set_new(body, "set", json_boolean(r->set_answered));
        if (r->set_answered && r->set_blocks >= 0)
            json_object_set_new(body, "set_blocks", json_integer(r->set_blocks));
    } else if (kind == HC_HOOK_DRAIN && r->ok) {
        body = json_pack("{s:b, s:s}", "drained", 1, "detail", r->detail);
    } else if (kind == HC_HOOK_DRAIN) {
        hc_error_set(&err, HC_E(DRAIN_FAILED), "the service did not drain: %s", r->detail);
    } else if (r->ok) {
        body = json_pack("{s:I, s:b, s:s}", "pending", (json_int_t)r->pending, "done",
                         r->pending == 0, "detail", r->detail);
    } else {
        hc_error_set(&err, HC_E(RESYNC_UNKNOWN),
                     "the service did not say what is left to "
                     "resync: %s",
                     r->detail);
    }
    if (d && body)
        hc_deferred_reply_json(d, 200, body);
    else if (d)
        hc_deferred_reply_error(d, &err);
    else if (body)
        hc_reply_json(req, 200, body);
    else
        hc_reply_error(req, &err);
}

static void hook_done(void *arg)
{
    struct hook_ctx *c = arg;
    if (!c->res.defined) {
        c->res.ok = 1;
        snprintf(c->res.detail, sizeof(c->res.detail), "the bundle defines no such hook");
    }
    if (c->kind == HC_HOOK_HEALTH) {
        hc_service_note_health(c->sw->svc, c->env.version, c->res.ok, c->res.detail);
        snprintf(c->state, sizeof(c->state), "%s",
                 hc_service_state_name(hc_service_state(c->sw->svc)));
    }
    hook_reply(c->d, NULL, c->kind, &c->res, c->env.version, c->state);
    json_decref(c->hook);
    free(c);
}

/* Without a running service the answers are known: not healthy, ok to stop, nothing to drain;
 * the resync state is unknown (409). Returns 1 after having replied. */
static int hook_without_service(struct hc_request *req, struct hc_agent_software *sw,
                                enum hc_hook_kind kind, const char *stop_set)
{
    enum hc_service_state s = hc_service_state(sw->svc);
    if (s == HC_SVC_STARTING || s == HC_SVC_RUNNING)
        return 0;
    /* a stopped service serves nothing: stopping it with a set changes nothing either */
    struct hc_hook_result r = {.ok = kind != HC_HOOK_HEALTH, .set_answered = stop_set != NULL};
    snprintf(r.detail, sizeof(r.detail), "the service is %s", hc_service_state_name(s));
    if (kind == HC_HOOK_RESYNC) {
        char msg[128];
        snprintf(msg, sizeof(msg), "the service is %s: its resync state is unknown",
                 hc_service_state_name(s));
        reply_error(req, HC_E(SERVICE_NOT_RUNNING), msg);
        return 1;
    }
    hook_reply(NULL, req, kind, &r, "", hc_service_state_name(s));
    return 1;
}

static void hook_route(struct hc_request *req, struct hc_agent_software *sw, enum hc_hook_kind kind,
                       const char *field, const char *stop_set)
{
    struct hc_error err = {0};
    if (hook_without_service(req, sw, kind, stop_set))
        return;
    const char *version = hc_service_version(sw->svc);
    json_t *m = hc_agent_sw_manifest(sw, version, &err);
    struct hook_ctx *c = m ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        json_decref(m);
        if (!err.code[0])
            hc_error_set(&err, HC_E(INTERNAL), "out of memory");
        hc_reply_error(req, &err);
        return;
    }
    c->sw = sw;
    c->kind = kind;
    c->hook = json_deep_copy(json_object_get(m, field));
    json_decref(m);
    hc_agent_sw_env(sw, version, &c->env);
    snprintf(c->env.stop_set, sizeof(c->env.stop_set), "%s", stop_set ? stop_set : "");
    snprintf(c->state, sizeof(c->state), "%s", hc_service_state_name(hc_service_state(sw->svc)));
    if (!(c->d = hc_req_defer(req)) || hc_jobs_start(sw->jobs, hook_work, hook_done, c, &err) < 0) {
        if (!err.code[0])
            hc_error_set(&err, HC_E(INTERNAL), "cannot defer the reply");
        if (c->d)
            hc_deferred_reply_error(c->d, &err);
        else
            hc_reply_error(req, &err);
        json_decref(c->hook);
        free(c);
    }
}

static void health_route(struct hc_request *req, void *arg)
{
    hook_route(req, arg, HC_HOOK_HEALTH, "health", NULL);
}

/* ?nodes=A,B,...: ok-to-stop for this node stopped together with those (node names, at most
 * 1,000 bytes); anything else is 400. */
static void ok_to_stop_route(struct hc_request *req, void *arg)
{
    const char *set = hc_req_query(req, "nodes");
    if (set) {
        char name[64];
        int ok = strlen(set) > 0 && strlen(set) <= 1000;
        for (const char *p = set; ok && *p;) {
            size_t l = strcspn(p, ",");
            ok = l > 0 && l < sizeof(name);
            if (ok) {
                snprintf(name, sizeof(name), "%.*s", (int)l, p);
                ok = hc_node_name_valid(name);
            }
            p += l + (p[l] == ',');
        }
        if (!ok) {
            reply_error(req, HC_E(INVALID_ARGUMENT),
                        "expected ?nodes=NAME,NAME... (node names, at most 1000 bytes)");
            return;
        }
    }
    hook_route(req, arg, HC_HOOK_OK_TO_STOP, "ok_to_stop", set);
}

static void drain_route(struct hc_request *req, void *arg)
{
    hook_route(req, arg, HC_HOOK_DRAIN, "drain", NULL);
}

static void resync_route(struct hc_request *req, void *arg)
{
    hook_route(req, arg, HC_HOOK_RESYNC, "resync_status", NULL);
}

/* ---------------------------------------------------------------- the storage peers */

/* PUT /v1/service/peers {"epoch", "replication"?, "nodes": [{"name", "host"}]}: the cluster's
 * storage members, from the controller. Written atomically to DATA/service-data/peers.json,
 * where the storage service reads it (hcstor re-reads it when it changes); no restart. */
static void peers_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    struct hc_error err = {0};
    json_t *body = hc_req_json(req), *node; /* owned by req */
    size_t i;
    char dir[1200];
    if (!body)
        return;
    json_t *nodes = json_object_get(body, "nodes");
    int ok = json_is_array(nodes) && json_is_integer(json_object_get(body, "epoch"));
    json_array_foreach(nodes, i, node) ok = ok && json_is_string(json_object_get(node, "name")) &&
                                            json_is_string(json_object_get(node, "host"));
    if (!ok) {
        reply_error(req, HC_E(INVALID_ARGUMENT),
                    "expected {\"epoch\": N, \"nodes\": [{\"name\", \"host\"}...]}");
        return;
    }
    char *text = json_dumps(body, JSON_INDENT(2) | JSON_SORT_KEYS);
    snprintf(dir, sizeof(dir), "%s/%s", sw->data_dir, HC_AGENT_DIR_SERVICE_DATA);
    /* As the service user: the directory is the service's (agents/hcagent/privilege.h). */
    if (!text ||
        hc_privilege_service_write(dir, "peers.json", text, strlen(text), 0644, &err) < 0) {
        if (!err.code[0])
            hc_error_set(&err, HC_E(INTERNAL), "out of memory");
        hc_reply_error(req, &err);
    } else {
        hc_log(HC_LOG_INFO, "storage peers: epoch %lld, %zu nodes",
               (long long)json_integer_value(json_object_get(body, "epoch")),
               json_array_size(nodes));
        hc_reply_json(req, 200,
                      json_pack("{s:b, s:I, s:I}", "written", 1, "epoch",
                                json_integer_value(json_object_get(body, "epoch")), "nodes",
                                (json_int_t)json_array_size(nodes)));
    }
    free(text);
}

/* ---------------------------------------------------------------- history */

/* GET /v1/service/history[?since=MS]: the supervisor's record of the service's life. */
static void history_route(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    const char *since = hc_req_query(req, "since");
    char *end = NULL;
    long long ms = since ? strtoll(since, &end, 10) : 0;
    if (since && (!*since || *end)) {
        reply_error(req, HC_E(INVALID_ARGUMENT), "since must be epoch milliseconds");
        return;
    }
    hc_reply_json(req, 200,
                  json_pack("{s:s, s:o}", "node", sw->cfg.name, "events",
                            hc_service_history_json(sw->svc, (int64_t)ms)));
}

int hc_agent_sw_routes(struct hc_http_server *srv, struct hc_agent_software *sw,
                       struct hc_error *err)
{
    static const struct {
        const char *method, *path;
        hc_route_fn fn;
    } routes[] = {
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
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (hc_http_server_route(srv, routes[i].method, routes[i].path, 0, routes[i].fn, sw) < 0)
            return hc_error_set(err, HC_E(INTERNAL), "cannot register %s %s", routes[i].method,
                                routes[i].path);
    return hc_agent_sw_settings_routes(srv, sw, err);
}
