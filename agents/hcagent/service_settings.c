/*
 * The storage service's settings on a node (see service_settings.h): the files, the values a
 * start uses, and the agent's routes GET/PUT /v1/service/settings (docs/api.md).
 *
 * PUT writes the new effective values and the revision, then, when a live setting changed and the
 * service runs, calls the manifest's reload hook (a job: the loop keeps answering meanwhile) and
 * answers once it answered. A reload that fails puts the old files back, so that what the agent
 * reports (the digest of the file) is what the service runs. Restart settings are written and
 * reported as pending_restart until the next start of the process.
 */
#include "agents/hcagent/service_settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/hcagent/software.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"

#define STATE_MAX (1 << 20) /* bytes of either file that the agent reads */

/* ---------------------------------------------------------------- the files */

struct state {
    int64_t revision;
    json_t *overrides; /* object */
    json_t *started;   /* values the running process started with, or NULL */
};

static void state_clear(struct state *st)
{
    json_decref(st->overrides);
    json_decref(st->started);
    *st = (struct state){0};
}

/* A JSON object from path; NULL with *missing = 1 when there is no file, NULL with err when it is
 * not an object. */
static json_t *read_object(const char *path, int *missing, struct hc_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *missing = 0;
    if (access(path, F_OK) < 0 && errno == ENOENT) {
        *missing = 1;
        return NULL;
    }
    if (hc_file_read(path, &text, &len, err) < 0)
        return NULL;
    json_t *o = NULL;
    if (len > STATE_MAX)
        hc_error_set(err, HC_E(IO), "'%s' is larger than %d bytes", path, STATE_MAX);
    else
        o = hc_json_parse_object(text, len, err);
    free(text);
    if (!o)
        hc_error_prefix(err, "%s", path);
    return o;
}

/* The state file; a missing one is revision 0 with no overrides. 0 or -1 with err. */
static int state_load(const char *path, struct state *st, struct hc_error *err)
{
    int missing;
    json_t *o = read_object(path, &missing, err);
    *st = (struct state){0};
    if (!o && !missing)
        return -1;
    json_t *rev = json_object_get(o, "revision"), *ov = json_object_get(o, "overrides");
    json_t *started = json_object_get(o, "started");
    if (o && (!json_is_integer(rev) || json_integer_value(rev) < 0 || !json_is_object(ov))) {
        json_decref(o);
        return hc_error_set(err, HC_E(IO), "%s: expected {\"revision\": N, \"overrides\": {...}}",
                            path);
    }
    st->revision = o ? json_integer_value(rev) : 0;
    st->overrides = o ? json_incref(ov) : json_object();
    st->started = json_is_object(started) ? json_incref(started) : NULL;
    json_decref(o);
    return 0;
}

static int write_json(const char *path, const json_t *o, int mode, struct hc_error *err)
{
    char *text = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
    int rc = text ? hc_file_write_atomic(path, text, strlen(text), mode, err)
                  : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    free(text);
    return rc;
}

static int state_save(const char *path, const struct state *st, struct hc_error *err)
{
    json_t *o = json_pack("{s:I, s:O, s:O?}", "revision", (json_int_t)st->revision, "overrides",
                          st->overrides, "started", st->started);
    int rc =
        o ? write_json(path, o, 0600, err) : hc_error_set(err, HC_E(INTERNAL), "out of memory");
    json_decref(o);
    return rc;
}

/* 1 when some setting that differs between a and b is restart (or unknown to schema). */
static int restart_differs(const struct hc_settings_schema *schema, const json_t *a,
                           const json_t *b)
{
    int restart = 0;
    json_decref(hc_settings_diff(schema, a, b, &restart));
    return restart;
}

json_t *hc_service_settings_prepare(const json_t *manifest, const struct hc_service_env *env,
                                    struct hc_error *err)
{
    struct state st;
    json_t *kept = NULL, *vanished = NULL, *values = NULL;
    struct hc_settings_schema *schema = hc_settings_schema_of(manifest, err);
    if (!schema || state_load(env->settings_state, &st, err) < 0) {
        hc_settings_schema_free(schema);
        return NULL;
    }
    /* Overrides recorded under an earlier version: those this one still has must be valid. */
    if (hc_settings_upgrade_check(schema, st.overrides, &kept, &vanished, err) < 0) {
        hc_error_prefix(err, "version %s", env->version);
        goto cleanup;
    }
    for (size_t i = 0; i < json_array_size(vanished); i++)
        HC_WARN("version %s has no setting %s: its value is dropped", env->version,
                json_string_value(json_array_get(vanished, i)));
    if (!(values = hc_settings_normalize(schema, kept, HC_SETTINGS_DEFAULTS, err)))
        goto cleanup;
    json_decref(st.overrides);
    st.overrides = json_incref(kept);
    json_decref(st.started);
    st.started = json_incref(values);
    if (write_json(env->settings_file, values, 0644, err) < 0 ||
        state_save(env->settings_state, &st, err) < 0) {
        json_decref(values);
        values = NULL;
    }
cleanup:
    json_decref(kept);
    json_decref(vanished);
    state_clear(&st);
    hc_settings_schema_free(schema);
    return values;
}

/* ---------------------------------------------------------------- what applies now */

/* The version whose settings apply: the one the service runs, else the current one. */
static void settings_version(const struct hc_agent_software *sw, char out[65])
{
    const char *running = hc_service_version(sw->svc);
    if (running[0])
        snprintf(out, 65, "%s", running);
    else
        hc_agent_sw_link(sw, "current", out);
}

static int service_runs(const struct hc_agent_software *sw)
{
    enum hc_service_state s = hc_service_state(sw->svc);
    return s == HC_SVC_RUNNING || s == HC_SVC_STARTING;
}

/* What a node has: the file's values and digest, the state, pending_restart. */
struct applied {
    char version[65];
    struct hc_service_env env;
    json_t *manifest;
    struct hc_settings_schema *schema; /* NULL: the version declares no settings */
    struct state st;
    json_t *values; /* the file's, or NULL when there is none yet */
    char digest[65];
    int pending_restart;
};

static void applied_clear(struct applied *a)
{
    json_decref(a->manifest);
    hc_settings_schema_free(a->schema);
    state_clear(&a->st);
    json_decref(a->values);
    memset(a, 0, sizeof(*a));
}

/* 0 (a->schema NULL when the version declares no settings, or no version is active) or -1 with
 * err. version NULL: the one that runs, else the current one. */
static int applied_read(const struct hc_agent_software *sw, const char *version, struct applied *a,
                        struct hc_error *err)
{
    int missing;
    memset(a, 0, sizeof(*a));
    if (version)
        snprintf(a->version, sizeof(a->version), "%s", version);
    else
        settings_version(sw, a->version);
    if (!a->version[0])
        return 0;
    hc_agent_sw_env(sw, a->version, &a->env);
    if (!(a->manifest = hc_agent_sw_manifest(sw, a->version, err)))
        return -1;
    if (!json_object_get(a->manifest, "settings"))
        return 0;
    if (!(a->schema = hc_settings_schema_of(a->manifest, err)) ||
        state_load(a->env.settings_state, &a->st, err) < 0)
        return -1;
    a->values = read_object(a->env.settings_file, &missing, err);
    if (!a->values && !missing)
        return -1;
    if (a->values && hc_settings_digest(a->values, a->digest, err) < 0)
        return hc_error_prefix(err, "%s", a->env.settings_file);
    a->pending_restart = service_runs(sw) && !strcmp(hc_service_version(sw->svc), a->version) &&
                         a->st.started && a->values &&
                         restart_differs(a->schema, a->st.started, a->values);
    return 0;
}

json_t *hc_agent_sw_settings_status(const struct hc_agent_software *sw)
{
    struct applied a;
    struct hc_error err = {0};
    json_t *o;
    if (applied_read(sw, NULL, &a, &err) < 0)
        o = json_pack("{s:s, s:s}", "version", a.version, "error", err.message);
    else if (!a.schema)
        o = json_null();
    else
        o = json_pack("{s:s, s:I, s:s?, s:b}", "version", a.version, "revision",
                      (json_int_t)a.st.revision, "digest", a.values ? a.digest : NULL,
                      "pending_restart", a.pending_restart);
    char why[1100];
    if (o && a.schema && service_runs(sw) && !hc_service_bounds_ok(sw->svc, why, sizeof(why)))
        json_object_set_new(o, "bounds", json_pack("{s:b, s:s}", "applied", 0, "detail", why));
    applied_clear(&a);
    return o ? o : json_null();
}

/* ---------------------------------------------------------------- GET /v1/service/settings */

static void settings_get(struct hc_request *req, void *arg)
{
    struct applied a;
    struct hc_error err = {0};
    if (applied_read(arg, NULL, &a, &err) < 0) {
        hc_reply_error(req, &err);
    } else if (!a.schema) {
        if (a.version[0])
            hc_error_set(&err, HC_E(CONFLICT), "version %s declares no settings", a.version);
        else
            hc_error_set(&err, HC_E(NOT_INSTALLED), "no software is active on this node");
        hc_reply_error(req, &err);
    } else {
        hc_reply_json(req, 200,
                      json_pack("{s:s, s:I, s:O, s:O?, s:s?, s:b, s:O?}", "version", a.version,
                                "revision", (json_int_t)a.st.revision, "overrides", a.st.overrides,
                                "values", a.values, "digest", a.values ? a.digest : NULL,
                                "pending_restart", a.pending_restart, "started", a.st.started));
    }
    applied_clear(&a);
}

/* ---------------------------------------------------------------- PUT /v1/service/settings */

struct put_ctx {
    struct hc_agent_software *sw;
    struct hc_deferred *d;
    struct applied a;  /* before the change */
    json_t *values;    /* the new effective values */
    json_t *changed;   /* names */
    int64_t revision;  /* the new revision */
    json_t *overrides; /* the new overrides */
    json_t *reload;    /* the hook (copy), NULL when no reload is due */
    struct hc_hook_result res;
};

static void put_free(struct put_ctx *c)
{
    applied_clear(&c->a);
    json_decref(c->values);
    json_decref(c->changed);
    json_decref(c->overrides);
    json_decref(c->reload);
    free(c);
}

/* Writes the files for c's new revision (restore: c->a's old ones back). 0 or -1 with err. */
static int put_write(struct put_ctx *c, int restore, struct hc_error *err)
{
    struct state st = c->a.st;
    if (!restore) {
        st.revision = c->revision;
        st.overrides = c->overrides;
    }
    const json_t *values = restore ? c->a.values : c->values;
    if (values && write_json(c->a.env.settings_file, values, 0644, err) < 0)
        return -1;
    if (restore && !values)
        remove(c->a.env.settings_file);
    return state_save(c->a.env.settings_state, &st, err);
}

/* 1 when a limits.* setting is among the changed names. */
static int bounds_changed(const json_t *changed)
{
    size_t i;
    json_t *name;
    json_array_foreach(changed, i,
                       name) if (!strncmp(json_string_value(name), "limits.", 7)) return 1;
    return 0;
}

static void put_reply(struct put_ctx *c, struct hc_request *req)
{
    struct hc_error err = {0};
    char digest[65] = "";
    json_t *body = NULL;
    if (c->reload && !c->res.ok) {
        hc_error_set(&err, HC_E(RELOAD_FAILED), "the service did not reload its settings: %s",
                     c->res.detail[0] ? c->res.detail : "no answer");
        struct hc_error werr = {0};
        if (put_write(c, 1, &werr) < 0)
            hc_error_prefix(&err, "and the old settings could not be put back (%s)", werr.message);
        HC_WARN("settings revision %lld not applied: %s", (long long)c->revision, err.message);
    } else if (hc_settings_digest(c->values, digest, &err) == 0) {
        if (service_runs(c->sw) && bounds_changed(c->changed))
            hc_service_apply_bounds(c->sw->svc, c->values);
        int pending = service_runs(c->sw) && c->a.st.started &&
                      restart_differs(c->a.schema, c->a.st.started, c->values);
        HC_INFO("settings revision %lld applied (%zu changed%s%s)", (long long)c->revision,
                json_array_size(c->changed), c->reload ? ", reloaded" : "",
                pending ? ", a restart is pending" : "");
        body = json_pack("{s:s, s:I, s:s, s:O, s:b, s:b}", "version", c->a.version, "revision",
                         (json_int_t)c->revision, "digest", digest, "changed", c->changed,
                         "reloaded", c->reload != NULL, "pending_restart", pending);
    }
    if (body && c->d)
        hc_deferred_reply_json(c->d, 200, body);
    else if (body)
        hc_reply_json(req, 200, body);
    else if (c->d)
        hc_deferred_reply_error(c->d, &err);
    else
        hc_reply_error(req, &err);
}

static void reload_work(void *arg)
{
    struct put_ctx *c = arg;
    hc_hook_run(HC_HOOK_RELOAD, c->reload, &c->a.env, &c->res);
}

static void reload_done(void *arg)
{
    struct put_ctx *c = arg;
    put_reply(c, NULL);
    put_free(c);
}

/* The request's revision and values into c (checked against the schema). 0 or -1 with err. */
static int put_parse(struct put_ctx *c, const json_t *body, struct hc_error *err)
{
    const json_t *rev = json_object_get(body, "revision"),
                 *values = json_object_get(body, "values");
    if (!json_is_integer(rev) || json_integer_value(rev) < 0 || !json_is_object(values))
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "expected {\"revision\": N >= 0, \"values\": {NAME: value...}}");
    c->revision = json_integer_value(rev);
    if (!c->a.schema) {
        if (!c->a.version[0])
            return hc_error_set(err, HC_E(NOT_INSTALLED), "no software is active on this node");
        return hc_error_set(err, HC_E(CONFLICT), "version %s declares no settings", c->a.version);
    }
    if (!(c->overrides = hc_settings_normalize(c->a.schema, values, 0, err)) ||
        !(c->values = hc_settings_normalize(c->a.schema, c->overrides, HC_SETTINGS_DEFAULTS, err)))
        return hc_error_prefix(err, "version %s", c->a.version);
    json_t *diff = hc_settings_diff(c->a.schema, c->a.values, c->values, NULL), *d;
    size_t i;
    int live = 0;
    if (!diff || !(c->changed = json_array()))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    json_array_foreach(diff, i, d)
    {
        json_array_append(c->changed, json_object_get(d, "name"));
        live = live || !strcmp(hc_json_str(d, "apply", ""), "live");
    }
    json_decref(diff);
    const json_t *hook = json_object_get(c->a.manifest, "reload");
    if (live && service_runs(c->sw) && !strcmp(hc_service_version(c->sw->svc), c->a.version) &&
        json_is_object(hook))
        c->reload = json_deep_copy(hook);
    return 0;
}

static void settings_put(struct hc_request *req, void *arg)
{
    struct hc_agent_software *sw = arg;
    struct hc_error err = {0};
    json_t *body = hc_req_json(req); /* owned by req */
    if (!body)
        return;
    struct put_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        hc_error_set(&err, HC_E(INTERNAL), "out of memory");
        hc_reply_error(req, &err);
        return;
    }
    c->sw = sw;
    /* "version": a staged version that is not running yet (a node being added), whose first
     * start then reads these values; otherwise the running (or current) one. */
    const json_t *version = json_object_get(body, "version");
    if (json_is_null(version))
        version = NULL;
    const char *running = hc_service_version(sw->svc);
    if (version &&
        (!json_is_string(version) || !hc_bundle_version_valid(json_string_value(version)))) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "version must be a version string");
        goto fail;
    }
    if (version && running[0] && strcmp(running, json_string_value(version)) != 0) {
        hc_error_set(&err, HC_E(CONFLICT),
                     "version %s runs, not %s: settings go to the running one", running,
                     json_string_value(version));
        goto fail;
    }
    if (applied_read(sw, version ? json_string_value(version) : NULL, &c->a, &err) < 0 ||
        put_parse(c, body, &err) < 0 || put_write(c, 0, &err) < 0)
        goto fail;
    if (!c->reload) {
        put_reply(c, req);
        put_free(c);
        return;
    }
    if (!(c->d = hc_req_defer(req))) {
        hc_error_set(&err, HC_E(INTERNAL), "cannot defer the reply");
        goto fail;
    }
    if (hc_jobs_start(sw->jobs, reload_work, reload_done, c, &err) == 0)
        return;
    put_write(c, 1, &(struct hc_error){0});
    hc_deferred_reply_error(c->d, &err);
    put_free(c);
    return;
fail:
    hc_reply_error(req, &err);
    put_free(c);
}

int hc_agent_sw_settings_routes(struct hc_http_server *srv, struct hc_agent_software *sw,
                                struct hc_error *err)
{
    if (hc_http_server_route(srv, "GET", "/v1/service/settings", 0, settings_get, sw) < 0 ||
        hc_http_server_route(srv, "PUT", "/v1/service/settings", 0, settings_put, sw) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot register the settings routes");
    return 0;
}
