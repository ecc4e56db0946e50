/*
 * The controller API server: route table, bearer-token authentication before each route, and an
 * api.call event after every POST, PUT and DELETE (docs/api.md "Controller API"); the after-hook
 * also counts every request by method and status for /metrics (controller/api/metrics.c).
 */
#include "controller/api/api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/bundle.h"
#include "common/json_util.h"
#include "common/log.h"
#include "common/pki.h"
#include "common/util.h"
#include "controller/api/auth.h"
#include "controller/api/crl.h"
#include "controller/api/metrics.h"
#include "controller/api/watch.h"
#include "controller/state/ca_rotation.h"
#include "controller/state/certs.h"
#include "controller/state/events.h"
#include "controller/state/node_identity.h"

static const struct {
    const char *method;
    const char *pattern;
    int flags;
    hc_route_fn fn;
} routes[] = {
    {"GET", "/v1/version", HC_API_PUBLIC, hc_res_version},
    /* HA (docs/ha.md): res_ha.c */
    {"GET", "/v1/ha", HC_API_PUBLIC, hc_res_ha},
    {"GET", "/v1/ha/join", HC_API_ADMIN, hc_res_ha_join},
    {"GET", "/v1/ca", HC_API_PUBLIC, hc_res_ca_get},
    {"POST", "/v1/enroll", HC_API_PUBLIC, hc_res_enroll},
    {"GET", "/v1/cluster", HC_API_READ, hc_res_cluster_get},
    {"GET", "/v1/checks", HC_API_READ, hc_res_checks_get},
    {"POST", "/v1/cluster", HC_API_ADMIN, hc_res_cluster_create},
    {"POST", "/v1/join-tokens", HC_API_ADMIN, hc_res_join_token_create},
    {"GET", "/v1/nodes", HC_API_READ, hc_res_nodes_list},
    {"POST", "/v1/nodes", HC_API_ADMIN, hc_res_nodes_add},
    {"GET", "/v1/nodes/{name}", HC_API_READ, hc_res_node_get},
    {"DELETE", "/v1/nodes/{name}", HC_API_ADMIN, hc_res_node_delete},
    {"POST", "/v1/nodes/{name}/renew-cert", HC_API_ADMIN, hc_res_node_renew_cert},
    {"PUT", "/v1/nodes/{name}/failure-domain", HC_API_ADMIN, hc_res_node_set_domain},
    {"GET", "/v1/operations", HC_API_READ, hc_res_ops_list},
    {"GET", "/v1/operations/{id}", HC_API_READ, hc_res_op_get},
    {"POST", "/v1/operations/{id}/pause", HC_API_ADMIN, hc_res_op_pause},
    {"POST", "/v1/operations/{id}/resume", HC_API_ADMIN, hc_res_op_resume},
    {"POST", "/v1/operations/{id}/abort", HC_API_ADMIN, hc_res_op_abort},
    {"GET", "/v1/operations/{id}/result", HC_API_READ, hc_res_op_result},
    {"GET", "/v1/events", HC_API_READ, hc_res_events_list},
    {"GET", "/v1/watch", HC_API_READ, hc_res_watch}, /* controller/api/watch.c */
    /* Prometheus scrapes it with a bearer token (authorization: in its scrape config) */
    {"GET", "/metrics", HC_API_READ, hc_res_metrics},
    /* maintenance: res_maintenance.c; the rolling upgrade: res_upgrade.c */
    {"GET", "/v1/maintenance", HC_API_READ, hc_res_maintenance_list},
    {"POST", "/v1/nodes/{name}/maintenance", HC_API_ADMIN, hc_res_maintenance_enter},
    {"DELETE", "/v1/nodes/{name}/maintenance", HC_API_ADMIN, hc_res_maintenance_exit},
    {"GET", "/v1/upgrade", HC_API_READ, hc_res_upgrade_status},
    {"POST", "/v1/upgrade", HC_API_ADMIN, hc_res_upgrade_start},
    /* the agent self-upgrade: res_agent.c */
    {"POST", "/v1/agent/upgrade", HC_API_ADMIN, hc_res_agent_upgrade},
    /* network (issue 4): res_net.c */
    {"GET", "/v1/net", HC_API_READ, hc_res_net_show},
    {"POST", "/v1/net/check", HC_API_ADMIN, hc_res_net_check},
    {"POST", "/v1/net/mtu", HC_API_ADMIN, hc_res_net_mtu},
    {"POST", "/v1/net/bench", HC_API_ADMIN, hc_res_net_bench},
    /* software bundles (issue 5): res_software.c */
    {"POST", "/v1/software", HC_API_ADMIN, hc_res_software_upload},
    {"GET", "/v1/software", HC_API_READ, hc_res_software_list},
    {"GET", "/v1/software/{version}", HC_API_READ, hc_res_software_get},
    {"DELETE", "/v1/software/{version}", HC_API_ADMIN, hc_res_software_remove},
    {"GET", "/v1/software/{version}/bundle", HC_API_READ, hc_res_software_bundle},
    /* the service's configuration (issue 15): res_config.c */
    {"GET", "/v1/config", HC_API_READ, hc_res_config_show},
    {"POST", "/v1/config", HC_API_ADMIN, hc_res_config_set},
    {"POST", "/v1/config/apply", HC_API_ADMIN, hc_res_config_apply},
    {"GET", "/v1/config/history", HC_API_READ, hc_res_config_history},
    {"GET", "/v1/config/diff", HC_API_READ, hc_res_config_diff},
    {"GET", "/v1/config/status", HC_API_READ, hc_res_config_status},
    /* API tokens (issue 12): res_tokens.c */
    {"GET", "/v1/tokens", HC_API_ADMIN, hc_res_tokens_list},
    {"POST", "/v1/tokens", HC_API_ADMIN, hc_res_token_create},
    {"DELETE", "/v1/tokens/{id}", HC_API_ADMIN, hc_res_token_revoke},
    {"POST", "/v1/tokens/{id}/rotate", HC_API_ADMIN, hc_res_token_rotate},
};

static int forbidden(struct hc_request *req, const char *name)
{
    struct hc_error err;
    hc_error_set(&err, HC_E(FORBIDDEN), "api token '%s' is read-only", name);
    hc_error_hint(&err, "use an admin token for %s %s", hc_req_method(req), hc_req_path(req));
    hc_reply_error(req, &err);
    return 1;
}

/* Before-hook: public routes pass; others need a valid token, and ADMIN routes an admin one. */
static int api_before(struct hc_request *req, const struct hc_route *route, void *arg)
{
    struct hc_api *api = arg;
    memset(&api->caller, 0, sizeof(api->caller));
    if (route->flags & HC_API_PUBLIC)
        return 0;
    struct hc_error err = {0};
    struct hc_auth_identity who;
    const char *token = hc_auth_bearer(hc_req_header(req, "Authorization"));
    /* The change counters first: they decide whether the cached token and replies still hold. */
    if (hc_api_cache_refresh(api->cache, api->db, &err) < 0) {
        hc_reply_error(req, &err);
        return 1;
    }
    if (!hc_api_token_cached(api->cache, token, &who)) {
        if (hc_auth_verify(api->db, token, &who, &err) < 0) {
            hc_reply_error(req, &err);
            return 1;
        }
        hc_api_token_remember(api->cache, token, &who);
    }
    snprintf(api->caller.actor, sizeof(api->caller.actor), "%s", who.name);
    hc_req_set_user(req, &api->caller);
    if ((route->flags & HC_API_ADMIN) && strcmp(who.role, HC_AUTH_ROLE_ADMIN) != 0)
        return forbidden(req, who.name);
    if (!hc_auth_scope_allows(who.scope, hc_req_method(req), hc_req_path(req))) {
        hc_error_set(&err, HC_E(FORBIDDEN), "api token '%s' may only read %s", who.name, who.scope);
        hc_error_hint(&err, "it was handed to a node for one download; use another token");
        hc_reply_error(req, &err);
        return 1;
    }
    return 0;
}

/* Head hook: before the body of a request to a route with a larger limit (the bundle upload) is
 * read, only an admin token may have it read beyond the JSON limit. The before-hook checks the
 * token again, with its 401 or 403 as usual. */
static int api_head(const struct hc_route *route, const char *authorization, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    struct hc_auth_identity who;
    if (!(route->flags & HC_API_ADMIN) ||
        hc_auth_verify(api->db, hc_auth_bearer(authorization), &who, &err) < 0)
        return 0;
    return strcmp(who.role, HC_AUTH_ROLE_ADMIN) == 0;
}

/* Anonymous calls recorded one by one: at most ANON_RECORDS per window of ANON_WINDOW_MS, the
 * rest as one count when the next window opens. That bounds what anyone who reaches the port
 * adds to the append-only events table to ~3,000 rows a day (~1 MB), however fast they call. */
#define ANON_RECORDS 20
#define ANON_WINDOW_MS (10 * 60 * 1000)
#define AUDIT_PATH_MAX 200 /* a longer path is cut in the record */

static int is_mutation(const char *method)
{
    return strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
           strcmp(method, "DELETE") == 0;
}

/* 1 when an anonymous call may be recorded (see ANON_RECORDS); the number left out is recorded
 * once the next window opens. */
static int anon_admit(struct hc_api *api)
{
    int64_t now = hc_mono_ms();
    if (now - api->anon_window_ms >= ANON_WINDOW_MS) {
        if (api->anon_suppressed > 0) {
            struct hc_error err = {0};
            json_t *details = json_pack("{s:i}", "suppressed", api->anon_suppressed);
            if (hc_event_add(api->db, "api.calls_suppressed", NULL, NULL, "anonymous", details,
                             &err,
                             "%d anonymous calls in %d minutes were not recorded one by "
                             "one (more than %d)",
                             api->anon_suppressed, ANON_WINDOW_MS / 60000, ANON_RECORDS) < 0)
                HC_WARN("cannot record suppressed calls: %s", err.message);
        }
        api->anon_window_ms = now;
        api->anon_recorded = api->anon_suppressed = 0;
    }
    if (api->anon_recorded >= ANON_RECORDS) {
        api->anon_suppressed++;
        return 0;
    }
    api->anon_recorded++;
    return 1;
}

/* After-hook: the audit record of every mutating call, refused ones included (anonymous ones
 * within a rate). */
static void api_after(struct hc_request *req, int status, void *arg)
{
    struct hc_api *api = arg;
    const char *method = hc_req_method(req);
    hc_metrics_api_request(method, status);
    if (!is_mutation(method))
        return;
    const struct hc_api_caller *caller = hc_req_user(req);
    const char *actor = caller && caller->actor[0] ? caller->actor : "anonymous";
    const char *node = caller && caller->node[0] ? caller->node : NULL;
    char path[AUDIT_PATH_MAX + 4];
    snprintf(path, sizeof(path), "%.*s%s", AUDIT_PATH_MAX, hc_req_path(req),
             strlen(hc_req_path(req)) > AUDIT_PATH_MAX ? "..." : "");
    if (!strcmp(actor, "anonymous") && !anon_admit(api))
        return;
    struct hc_error err = {0};
    json_t *details =
        json_pack("{s:s, s:s, s:i}", "method", method, "path", path, "status", status);
    if (hc_event_add(api->db, "api.call", node, NULL, actor, details, &err, "%s %s -> %d", method,
                     path, status) < 0)
        HC_WARN("cannot record api call %s %s: %s", method, path, err.message);
}

const char *hc_api_actor(const struct hc_request *req)
{
    const struct hc_api_caller *caller = hc_req_user(req);
    return caller && caller->actor[0] ? caller->actor : "anonymous";
}

void hc_api_set_actor(struct hc_api *api, struct hc_request *req, const char *actor,
                      const char *node)
{
    snprintf(api->caller.actor, sizeof(api->caller.actor), "%s", actor ? actor : "");
    snprintf(api->caller.node, sizeof(api->caller.node), "%s", node ? node : "");
    hc_req_set_user(req, &api->caller);
}

void hc_api_reply(struct hc_request *req, int status, json_t *body, const struct hc_error *err)
{
    if (body)
        hc_reply_json(req, status, body);
    else
        hc_reply_error(req, err);
}

int hc_api_query_int(struct hc_request *req, const char *name, int64_t def, int64_t min,
                     int64_t max, int64_t *out, struct hc_error *err)
{
    const char *text = hc_req_query(req, name);
    if (!text) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno || v < min || v > max) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "query parameter '%s' must be an integer "
                     "between %" PRId64 " and %" PRId64,
                     name, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int cursor_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > HC_API_CURSOR_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

int hc_api_page_parse(struct hc_request *req, struct hc_api_page *page, struct hc_error *err)
{
    if (hc_api_query_int(req, "limit", HC_API_LIST_DEFAULT, 1, HC_API_LIST_MAX, &page->limit, err) <
        0)
        return -1;
    page->after = hc_req_query(req, "after");
    if (page->after && !cursor_valid(page->after)) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT),
                     "query parameter 'after' must be 1 to %d printable characters",
                     HC_API_CURSOR_MAX);
        return hc_error_hint(err, "pass the 'next_after' of the previous page");
    }
    return 0;
}

static const char *item_key_of(const json_t *list, size_t i, const char *key)
{
    const char *v = json_string_value(json_object_get(json_array_get(list, i), key));
    return v ? v : "";
}

json_t *hc_api_page_apply(json_t *body, const char *list_key, const char *item_key,
                          enum hc_api_order order, const struct hc_api_page *page,
                          struct hc_error *err)
{
    json_t *list = body ? json_object_get(body, list_key) : NULL;
    if (!list)
        return body;
    size_t n = json_array_size(list), start = 0;
    if (page->after) {
        if (order == HC_API_ORDER_BYTES) {
            while (start < n && strcmp(item_key_of(list, start, item_key), page->after) <= 0)
                start++;
        } else {
            while (start < n && strcmp(item_key_of(list, start, item_key), page->after) != 0)
                start++;
            if (start == n) {
                json_decref(body);
                hc_error_set(err, HC_E(INVALID_ARGUMENT), "no %s item '%s' to list after", list_key,
                             page->after);
                hc_error_hint(err, "it is gone; list again from the start");
                return NULL;
            }
            start++;
        }
    }
    size_t end = n - start > (size_t)page->limit ? start + (size_t)page->limit : n;
    json_t *cut = json_array();
    for (size_t i = start; i < end; i++)
        json_array_append(cut, json_array_get(list, i));
    json_object_set_new(body, "next_after",
                        end < n ? json_string(item_key_of(list, end - 1, item_key)) : json_null());
    json_object_set_new(body, list_key, cut);
    return body;
}

int hc_api_cached(struct hc_api *api, struct hc_request *req, unsigned mask)
{
    char etag[HC_API_ETAG_LEN];
    struct hc_blob *b =
        hc_api_cache_get(api->cache, hc_req_uri(req), hc_api_cache_version(api->cache, mask), etag);
    if (!b)
        return 0;
    if (hc_etag_match(hc_req_header(req, "If-None-Match"), etag))
        hc_reply_not_modified(req, etag);
    else
        hc_reply_blob(req, 200, etag, b);
    return 1;
}

void hc_api_reply_etag(struct hc_api *api, struct hc_request *req, unsigned mask, json_t *body,
                       const struct hc_error *err)
{
    if (!body) {
        hc_reply_error(req, err);
        return;
    }
    /* The version is that of the counters read before the body was built: a write in between
     * leaves the entry older than the counters, and the next request builds it again. */
    int64_t version = hc_api_cache_version(api->cache, mask);
    char *text = hc_json_dump(body);
    json_decref(body);
    struct hc_blob *b = NULL;
    if (text) {
        size_t len = strlen(text);
        text[len] = '\n'; /* the reply ends with a newline, as every hc_reply_json */
        b = hc_blob_new(text, len + 1);
    }
    free(text);
    if (!b) {
        struct hc_error oom;
        hc_error_set(&oom, HC_E(INTERNAL), "out of memory");
        hc_reply_error(req, &oom);
        return;
    }
    char etag[HC_API_ETAG_LEN];
    hc_api_etag(b->data, b->len, etag);
    if (mask)
        hc_api_cache_put(api->cache, hc_req_uri(req), version, etag, b);
    if (hc_etag_match(hc_req_header(req, "If-None-Match"), etag))
        hc_reply_not_modified(req, etag);
    else
        hc_reply_blob(req, 200, etag, b);
    hc_blob_unref(b);
}

int hc_api_body_int(const json_t *body, const char *key, int64_t min, int64_t max, int64_t def,
                    int64_t *out, struct hc_error *err)
{
    const json_t *v = json_object_get(body, key);
    int64_t ignored;
    out = out ? out : &ignored;
    *out = def;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "'%s' must be an integer from "
                            "%lld to %lld",
                            key, (long long)min, (long long)max);
    *out = json_integer_value(v);
    return 0;
}

json_t *hc_api_body(struct hc_request *req)
{
    /* Routes whose body is optional (join-tokens, pause/resume/abort) accept an empty one:
     * curl sends "Content-Length: 0" for a POST without data. */
    const char *length = hc_req_header(req, "Content-Length");
    if (!hc_req_header(req, "Transfer-Encoding") && (!length || strcmp(length, "0") == 0))
        return json_object();
    return json_incref(hc_req_json(req));
}

/* The CA that signs (the first certificate of ca.pem) and its key; ca_pem is the whole file:
 * during a CA rotation it holds the other CA too, and joining agents trust both. */
static int load_ca(struct hc_api *api, struct hc_error *err)
{
    struct stat a, b;
    X509 *ca = hc_pki_cert_load(api->ctl->ca_file, err);
    EVP_PKEY *key = ca ? hc_pki_key_load(api->ctl->ca_key_file, err) : NULL;
    char *pem = NULL;
    if (!key || hc_file_read(api->ctl->ca_file, &pem, NULL, err) < 0) {
        X509_free(ca);
        EVP_PKEY_free(key);
        return -1;
    }
    X509_free(api->ca);
    EVP_PKEY_free(api->ca_key);
    free(api->ca_pem);
    api->ca = ca;
    api->ca_key = key;
    api->ca_pem = pem;
    hc_pki_fingerprint(api->ca, api->ca_fingerprint);
    if (stat(api->ctl->ca_file, &a) == 0 && stat(api->ctl->ca_key_file, &b) == 0) {
        api->ca_seen[0] = a;
        api->ca_seen[1] = b;
    }
    return 0;
}

static int same_file(const struct stat *x, const struct stat *y)
{
    return x->st_ino == y->st_ino && x->st_size == y->st_size &&
           x->st_mtim.tv_sec == y->st_mtim.tv_sec && x->st_mtim.tv_nsec == y->st_mtim.tv_nsec;
}

void hc_api_ca_refresh(struct hc_api *api)
{
    struct stat a, b;
    struct hc_error err = {0};
    if (stat(api->ctl->ca_file, &a) != 0 || stat(api->ctl->ca_key_file, &b) != 0 ||
        (same_file(&a, &api->ca_seen[0]) && same_file(&b, &api->ca_seen[1])))
        return;
    if (load_ca(api, &err) < 0)
        HC_WARN("the CA files changed but cannot be loaded (the previous CA stays): %s",
                err.message);
    else
        HC_INFO("CA reloaded: it signs as %s", api->ca_fingerprint);
}

static int load_identity(struct hc_api *api, struct hc_error *err)
{
    if (load_ca(api, err) < 0)
        return -1;
    /* The controller's own names (never a node's) and the key pins the enrollment answer
     * hands agents, so that they can tell the controller from any other holder of a
     * certificate from this CA. */
    if (!(api->server_cert = hc_pki_cert_load(api->ctl->server_cert, err)))
        return -1;
    if (hc_pki_cert_pin(api->server_cert, api->server_pin) < 0)
        return hc_error_set(err, HC_E(TLS), "cannot encode the key of '%s'", api->ctl->server_cert);
    return hc_pki_file_pin(api->ctl->client_cert, api->client_pin, err);
    return 0;
}

static int add_routes(struct hc_api *api, struct hc_error *err)
{
    for (size_t i = 0; i < HC_ARRAY_LEN(routes); i++)
        if (hc_http_server_route(api->srv, routes[i].method, routes[i].pattern, routes[i].flags,
                                 routes[i].fn, api) < 0)
            return hc_error_set(err, HC_E(INTERNAL), "cannot add route %s %s", routes[i].method,
                                routes[i].pattern);
    /* A bundle upload is the one body larger than the JSON limit, and only for an admin token
     * (api_head): anyone else's body is cut at the JSON limit before it is read. */
    hc_http_server_route_limit(api->srv, "POST", "/v1/software", HC_BUNDLE_MAX_BYTES);
    hc_http_server_set_head_hook(api->srv, api_head, api);
    hc_http_server_set_hooks(api->srv, api_before, api_after, api);
    return 0;
}

/* Every HC_API_CERT_CHECK_S, and once at start: the controller's own certificates renewed when
 * due, the new server certificate served from the next connection. */
#define HC_API_CERT_CHECK_S 10
static void api_renew_own(struct hc_api *api)
{
    struct hc_error err = {0};
    int server = 0;
    if (hc_certs_renew_own(api->ctl, api->db, hc_now_ms(), &server, &err) < 0) {
        HC_WARN("cannot renew the controller's certificates: %s", err.message);
        return;
    }
    struct hc_tls_server_config tls = {.cert_file = api->ctl->server_cert,
                                       .key_file = api->ctl->server_key};
    if (server && api->srv && hc_http_server_reload_tls(api->srv, &tls, &err) < 0)
        HC_WARN("the renewed server certificate is not served yet: %s", err.message);
}

static void api_cert_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hc_api_ca_refresh(arg); /* a CA rotation (controller/remote/ca_rotate.h) swaps the files */
    api_renew_own(arg);
}

struct hc_api *hc_api_new(struct hc_controller *ctl, struct event_base *base, struct hc_error *err)
{
    struct hc_api *api = calloc(1, sizeof(*api));
    if (!api) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    api->ctl = ctl;
    if (!(api->cache = hc_api_cache_new()) || !(api->watch = hc_watch_new(api, base))) {
        hc_api_cache_free(api->cache);
        free(api);
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    /* No client certificates on the API: clients authenticate with bearer tokens. */
    struct hc_tls_server_config tls = {.cert_file = ctl->server_cert, .key_file = ctl->server_key};
    api->db = hc_db_open(ctl->db_path, err);
    /* a CA rotation's files as its phase wants them (a crash may have left them half way) */
    if (!api->db || hc_ca_rotate_files(ctl, api->db, err) < 0 || load_identity(api, err) < 0 ||
        hc_identity_backfill(api->db, err) < 0 ||
        hc_auth_scoped_tokens_delete(api->db, NULL, err) < 0) /* what crashed runs left */
        goto fail;
    /* Before the workers and the poller make their first agent client: the list they check
     * then says what revoked_certs says, whatever happened to the file while hcctld was down. */
    if (hc_crl_write(ctl, api->db, err) < 0)
        goto fail;
    api_renew_own(api); /* before the server loads its certificate */
    api->srv = hc_http_server_new(base, &tls, err);
    if (!api->srv || add_routes(api, err) < 0)
        goto fail;
    struct timeval every = {HC_API_CERT_CHECK_S, 0};
    if (!(api->cert_timer = event_new(base, -1, EV_PERSIST, api_cert_timer, api)) ||
        event_add(api->cert_timer, &every) < 0) {
        hc_error_set(err, HC_E(INTERNAL), "cannot start the certificate timer");
        goto fail;
    }
    return api;
fail:
    hc_api_free(api);
    return NULL;
}

void hc_api_free(struct hc_api *api)
{
    if (!api)
        return;
    if (api->cert_timer)
        event_free(api->cert_timer);
    hc_http_server_free(api->srv); /* first: its closing streams report to the watch */
    hc_watch_free(api->watch);
    hc_api_cache_free(api->cache);
    hc_db_close(api->db);
    X509_free(api->ca);
    X509_free(api->server_cert);
    EVP_PKEY_free(api->ca_key);
    free(api->ca_pem);
    free(api);
}

int hc_api_listen(struct hc_api *api, const char *host, int port, struct hc_error *err)
{
    return hc_http_server_listen(api->srv, host, port, err);
}

int hc_api_port(const struct hc_api *api)
{
    return hc_http_server_port(api->srv);
}
