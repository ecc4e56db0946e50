/*
 * HTTPS server: libevent evhttp over bufferevent_openssl, a small pure router, and the request
 * and reply helpers every handler uses.
 *
 * One generic evhttp callback does all the routing, so that 404, 405, 413 and bad JSON are all
 * answered with the one JSON error shape of common/error.h (evhttp's own errors are HTML).
 *
 * Handlers reply synchronously: a route (or the before-hook) must call hc_reply_json or
 * hc_reply_error before it returns. The struct hc_request lives on the generic callback's stack;
 * if a handler forgets to reply, the server answers 500 so the client never hangs.
 */
#include "common/https_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <sys/queue.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <netinet/tcp.h>
#include <malloc.h>
#include <string.h>
#include <sys/socket.h>

#include "common/json_util.h"

#define HC_ROUTER_MAX_ROUTES 64
#define HC_HTTP_MAX_HEADERS_SIZE (64 * 1024)

/*
 * Oversized bodies. libevent 2.1 answers a body over its max_body_size with its own HTML 413
 * page, and 2.1 has no hook to run before the body is read (evhttp_set_newreqcb only exists from
 * 2.2), so the JSON answer comes from a two-level limit:
 *   - libevent's limit is HC_HTTP_BODY_BACKSTOP_FACTOR times ours; bodies between our limit and
 *     that are read completely and the generic callback answers 413 body_too_large as JSON;
 *   - past the backstop libevent answers its HTML 413 (with lingering close, so the client
 *     still reads the status instead of a connection reset). This bounds the memory one request
 *     can take to backstop bytes.
 */
#define HC_HTTP_BODY_BACKSTOP_FACTOR 8
#define HC_HTTP_TRIM_AFTER (1024 * 1024)

struct hc_router {
    size_t count;
    struct hc_route routes[HC_ROUTER_MAX_ROUTES];
};

struct hc_http_server {
    struct event_base *base;
    struct evhttp *http;
    SSL_CTX *ctx;
    struct hc_router *router;
    char *required_cn;
    int port;
    size_t max_body;
    hc_before_fn before;
    hc_after_fn after;
    void *hook_arg;
};

struct hc_request {
    struct hc_http_server *srv;
    struct evhttp_request *ev;
    const struct hc_route *route;
    char method[8];
    const char *path; /* raw (still percent-encoded), owned by ev's URI */
    struct hc_route_params params;
    struct evkeyvalq query;
    json_t *json;
    void *user;
    char peer_addr[64];
    char peer_cn[256];
    int has_peer_cn;
    int replied;
};

/* ---------------------------------------------------------------- router */

struct hc_router *hc_router_new(void)
{
    return calloc(1, sizeof(struct hc_router));
}

void hc_router_free(struct hc_router *r)
{
    free(r);
}

static int hc_method_valid(const char *method)
{
    size_t len = strlen(method);
    if (len == 0 || len >= sizeof(((struct hc_route *)0)->method))
        return 0;
    return strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == len;
}

/* A capture segment is exactly "{name}" with name [a-z_][a-z0-9_]* and shorter than 32. */
static int hc_param_segment_valid(const char *seg, size_t len, char name[32])
{
    if (len < 3 || seg[0] != '{' || seg[len - 1] != '}' || len - 2 >= 32)
        return 0;
    size_t n = len - 2;
    memcpy(name, seg + 1, n);
    name[n] = '\0';
    if (name[0] >= '0' && name[0] <= '9')
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* Literal segments use URL-unreserved characters only, so they match their raw encoding. */
static int hc_literal_segment_valid(const char *seg, size_t len)
{
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~";
    return len > 0 && strspn(seg, ok) >= len;
}

/* Checks a whole pattern: "/" or "/seg/seg..." without empty segments, unique capture names. */
static int hc_pattern_valid(const char *pattern)
{
    char names[HC_HTTP_MAX_PARAMS][32];
    int nparams = 0;
    if (pattern[0] != '/' || strlen(pattern) >= sizeof(((struct hc_route *)0)->pattern))
        return 0;
    if (strcmp(pattern, "/") == 0)
        return 1;
    for (const char *p = pattern; *p == '/';) {
        p++;
        size_t len = strcspn(p, "/");
        if (p[0] == '{') {
            if (nparams == HC_HTTP_MAX_PARAMS || !hc_param_segment_valid(p, len, names[nparams]))
                return 0;
            for (int i = 0; i < nparams; i++)
                if (strcmp(names[i], names[nparams]) == 0)
                    return 0;
            nparams++;
        } else if (!hc_literal_segment_valid(p, len)) {
            return 0;
        }
        p += len;
    }
    return 1;
}

int hc_router_add(struct hc_router *r, const char *method, const char *pattern, int flags,
                  hc_route_fn fn, void *arg)
{
    if (!r || !method || !pattern || !fn || r->count == HC_ROUTER_MAX_ROUTES)
        return -1;
    if (!hc_method_valid(method) || !hc_pattern_valid(pattern))
        return -1;
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->routes[i].method, method) == 0 && strcmp(r->routes[i].pattern, pattern) == 0)
            return -1;
    struct hc_route *route = &r->routes[r->count++];
    snprintf(route->method, sizeof(route->method), "%s", method);
    snprintf(route->pattern, sizeof(route->pattern), "%s", pattern);
    route->flags = flags;
    route->fn = fn;
    route->arg = arg;
    route->max_body = 0;
    return 0;
}

/* Stores one capture, percent-decoded. A value that decodes to a NUL or does not fit is no
 * match (the path then gets 404). */
static int hc_params_capture(struct hc_route_params *p, const char *name, size_t name_len,
                             const char *raw, size_t raw_len)
{
    char encoded[3 * sizeof(p->value[0])];
    if (raw_len >= sizeof(encoded) || p->count == HC_HTTP_MAX_PARAMS)
        return -1;
    memcpy(encoded, raw, raw_len);
    encoded[raw_len] = '\0';
    size_t len = 0;
    char *decoded = evhttp_uridecode(encoded, 0, &len);
    int rc = -1;
    if (!decoded || len != strlen(decoded) || len >= sizeof(p->value[0]))
        goto cleanup;
    snprintf(p->name[p->count], sizeof(p->name[0]), "%.*s", (int)name_len, name);
    memcpy(p->value[p->count], decoded, len + 1);
    p->count++;
    rc = 0;
cleanup:
    free(decoded);
    return rc;
}

/* Matches one pattern against a raw path, segment by segment. Returns 1 on a match. */
static int hc_pattern_match(const char *pattern, const char *path, struct hc_route_params *p)
{
    const char *pp = pattern, *sp = path;
    p->count = 0;
    while (*pp == '/' && *sp == '/') {
        pp++;
        sp++;
        size_t plen = strcspn(pp, "/"), slen = strcspn(sp, "/");
        if (plen > 0 && pp[0] == '{') {
            if (slen == 0 || hc_params_capture(p, pp + 1, plen - 2, sp, slen) != 0)
                return 0;
        } else if (plen != slen || memcmp(pp, sp, plen) != 0) {
            return 0;
        }
        pp += plen;
        sp += slen;
    }
    return *pp == '\0' && *sp == '\0';
}

/* Among the routes whose pattern matches, the one with the method wins; with several, the one
 * with the fewest captures (literal segments beat captures), then the first added. */
const struct hc_route *hc_router_match(const struct hc_router *r, const char *method,
                                       const char *path, struct hc_route_params *params,
                                       struct hc_error *err)
{
    const struct hc_route *best = NULL;
    struct hc_route_params cur, best_params = {0};
    char allowed[128] = "";
    if (!path || !path[0])
        path = "/";
    if (!method)
        method = "";
    for (size_t i = 0; r && i < r->count; i++) {
        const struct hc_route *route = &r->routes[i];
        if (!hc_pattern_match(route->pattern, path, &cur))
            continue;
        if (strcmp(route->method, method) != 0) {
            if (!strstr(allowed, route->method))
                snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s",
                         allowed[0] ? ", " : "", route->method);
            continue;
        }
        if (!best || cur.count < best_params.count) {
            best = route;
            best_params = cur;
        }
    }
    if (best) {
        if (params)
            *params = best_params;
        return best;
    }
    if (!allowed[0]) {
        hc_error_set(err, 404, HC_ERR_NOT_FOUND, "endpoint '%s' not found", path);
        return NULL;
    }
    hc_error_set(err, 405, HC_ERR_METHOD_NOT_ALLOWED, "method '%s' not allowed on '%s'", method,
                 path);
    hc_error_hint(err, "allowed: %s", allowed);
    return NULL;
}

/* ---------------------------------------------------------------- TLS */

/* Fills err from the OpenSSL error queue (and empties it, it is per thread). */
static int hc_tls_error(struct hc_error *err, const char *what, const char *file)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    hc_error_set(err, 500, HC_ERR_TLS, "cannot %s '%s': %s", what, file,
                 reason ? reason : "unknown tls error");
    ERR_clear_error();
    return -1;
}

/* Subject CN of cert into buf. Refuses certificates with no CN, several CNs (which one would
 * count?) or a CN with an embedded NUL. Returns 0 or -1. */
static int hc_cert_cn(X509 *cert, char *buf, size_t len)
{
    X509_NAME *name = cert ? X509_get_subject_name(cert) : NULL;
    int idx = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1;
    if (idx < 0 || X509_NAME_get_index_by_NID(name, NID_commonName, idx) >= 0)
        return -1;
    unsigned char *utf8 = NULL;
    int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx)));
    int rc = -1;
    if (n < 0 || (size_t)n >= len || strlen((char *)utf8) != (size_t)n)
        goto cleanup;
    memcpy(buf, utf8, (size_t)n + 1);
    rc = 0;
cleanup:
    OPENSSL_free(utf8);
    return rc;
}

/* With required_client_cn: the chain is already verified by OpenSSL (ok), and at depth 0 the
 * leaf's CN must also be the required one, or the handshake fails. */
static int hc_tls_verify_cn(int ok, X509_STORE_CTX *store)
{
    if (!ok || X509_STORE_CTX_get_error_depth(store) != 0)
        return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct hc_http_server *srv = ssl ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;
    char cn[256];
    if (!srv || !srv->required_cn)
        return ok;
    if (hc_cert_cn(X509_STORE_CTX_get_current_cert(store), cn, sizeof(cn)) != 0 ||
        strcmp(cn, srv->required_cn) != 0) {
        X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
        return 0;
    }
    return 1;
}

/* Mutual TLS: the client CA is the only trust anchor (no default paths are loaded). */
static int hc_tls_require_client(SSL_CTX *ctx, const struct hc_tls_server_config *tls,
                                 struct hc_error *err)
{
    if (SSL_CTX_load_verify_locations(ctx, tls->client_ca_file, NULL) != 1)
        return hc_tls_error(err, "load client ca", tls->client_ca_file);
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(tls->client_ca_file);
    if (!names)
        return hc_tls_error(err, "load client ca", tls->client_ca_file);
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       tls->required_client_cn ? hc_tls_verify_cn : NULL);
    return 0;
}

static SSL_CTX *hc_tls_server_ctx(const struct hc_tls_server_config *tls, struct hc_error *err)
{
    static const unsigned char sid_ctx[] = "hcctl-https";
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        hc_tls_error(err, "create tls context for", tls->cert_file);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* Without a session id context, resuming a session that carried a client cert fails. */
    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file) != 1) {
        hc_tls_error(err, "load tls certificate", tls->cert_file);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls->key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        hc_tls_error(err, "load tls key", tls->key_file);
        goto fail;
    }
    if (tls->client_ca_file && hc_tls_require_client(ctx, tls, err) != 0)
        goto fail;
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

/* evhttp asks for a bufferevent per accepted connection. Returning NULL would make evhttp fall
 * back to a plain socket bufferevent, i.e. serve cleartext HTTP without any client check, so a
 * failure here (only possible when out of memory) aborts instead. */
static struct bufferevent *hc_server_bevcb(struct event_base *base, void *arg)
{
    struct hc_http_server *srv = arg;
    SSL *ssl = SSL_new(srv->ctx);
    if (!ssl)
        abort();
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        abort();
    /* Clients may close without close_notify once they have their answer. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* ---------------------------------------------------------------- requests */

static const char *hc_method_name(enum evhttp_cmd_type cmd)
{
    switch (cmd) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "UNKNOWN";
}

static SSL *hc_request_ssl(struct evhttp_request *ev)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(ev);
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    return bev ? bufferevent_openssl_get_ssl(bev) : NULL;
}

/* The peer's CN is only reported for a certificate that passed verification. */
static void hc_request_peer(struct hc_request *req)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(req->ev);
    char *addr = NULL;
    ev_uint16_t port = 0;
    if (conn)
        evhttp_connection_get_peer(conn, &addr, &port);
    snprintf(req->peer_addr, sizeof(req->peer_addr), "%s", addr ? addr : "");
    SSL *ssl = hc_request_ssl(req->ev);
    X509 *cert = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    req->has_peer_cn = cert && SSL_get_verify_result(ssl) == X509_V_OK &&
                       hc_cert_cn(cert, req->peer_cn, sizeof(req->peer_cn)) == 0;
}

static void hc_request_init(struct hc_request *req, struct hc_http_server *srv,
                            struct evhttp_request *ev)
{
    memset(req, 0, sizeof(*req));
    req->srv = srv;
    req->ev = ev;
    TAILQ_INIT(&req->query);
    snprintf(req->method, sizeof(req->method), "%s",
             hc_method_name(evhttp_request_get_command(ev)));
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(ev);
    req->path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!req->path || !req->path[0])
        req->path = "/";
    hc_request_peer(req);
}

static void hc_request_release(struct hc_request *req)
{
    evhttp_clear_headers(&req->query);
    json_decref(req->json);
}

/* Runs checks, router, before-hook and route. Every branch replies. */
static void hc_request_dispatch(struct hc_request *req)
{
    struct hc_http_server *srv = req->srv;
    struct hc_error err = {0}, route_err = {0};
    size_t body_len = evbuffer_get_length(evhttp_request_get_input_buffer(req->ev));
    /* The route decides the body limit, so match first; its 404/405 waits behind the 413. */
    req->route = hc_router_match(srv->router, req->method, req->path, &req->params, &route_err);
    size_t limit = req->route && req->route->max_body ? req->route->max_body : srv->max_body;
    if (body_len > limit) {
        hc_error_set(&err, 413, HC_ERR_BODY_TOO_LARGE,
                     "request body of %zu bytes exceeds the limit of %zu bytes", body_len, limit);
        hc_reply_error(req, &err);
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req->ev);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    if (query && evhttp_parse_query_str(query, &req->query) != 0) {
        hc_error_set(&err, 400, HC_ERR_INVALID_ARGUMENT, "malformed query string '%s'", query);
        hc_reply_error(req, &err);
        return;
    }
    if (!req->route) {
        err = route_err;
        hc_reply_error(req, &err);
        return;
    }
    if (srv->before && srv->before(req, req->route, srv->hook_arg) != 0)
        return;
    req->route->fn(req, req->route->arg);
}

static void hc_server_gencb(struct evhttp_request *ev, void *arg)
{
    struct hc_request req;
    hc_request_init(&req, arg, ev);
    hc_request_dispatch(&req);
    if (!req.replied) {
        struct hc_error err;
        hc_error_set(&err, 500, HC_ERR_INTERNAL, "handler for '%s %s' did not reply", req.method,
                     req.path);
        hc_reply_error(&req, &err);
    }
    hc_request_release(&req);
    /* A large body (an upload, or anyone's oversized request) is no longer needed: a deferred
     * reply keeps only the parsed JSON. Give its memory back now rather than keeping the peak
     * of the largest requests for the life of the process. */
    struct evbuffer *in = evhttp_request_get_input_buffer(ev);
    if (evbuffer_get_length(in) > HC_HTTP_TRIM_AFTER) {
        evbuffer_drain(in, evbuffer_get_length(in));
        malloc_trim(0);
    }
}

void hc_http_server_handle(struct hc_http_server *srv, struct evhttp_request *ev)
{
    hc_server_gencb(ev, srv);
}

const char *hc_req_method(const struct hc_request *req)
{
    return req->method;
}

const char *hc_req_path(const struct hc_request *req)
{
    return req->path;
}

const char *hc_req_param(const struct hc_request *req, const char *name)
{
    for (int i = 0; i < req->params.count; i++)
        if (strcmp(req->params.name[i], name) == 0)
            return req->params.value[i];
    return NULL;
}

const char *hc_req_query(struct hc_request *req, const char *name)
{
    return evhttp_find_header(&req->query, name);
}

const char *hc_req_header(const struct hc_request *req, const char *name)
{
    return evhttp_find_header(evhttp_request_get_input_headers(req->ev), name);
}

const char *hc_req_peer_addr(const struct hc_request *req)
{
    return req->peer_addr;
}

const char *hc_req_peer_cn(const struct hc_request *req)
{
    return req->has_peer_cn ? req->peer_cn : NULL;
}

json_t *hc_req_json(struct hc_request *req)
{
    if (req->json)
        return req->json;
    struct evbuffer *buf = evhttp_request_get_input_buffer(req->ev);
    size_t len = evbuffer_get_length(buf);
    const char *data = len ? (const char *)evbuffer_pullup(buf, -1) : "";
    struct hc_error err = {0};
    req->json = hc_json_parse_object(data, len, &err);
    if (!req->json)
        hc_reply_error(req, &err);
    return req->json;
}

const unsigned char *hc_req_body(struct hc_request *req, size_t *len)
{
    struct evbuffer *buf = evhttp_request_get_input_buffer(req->ev);
    *len = evbuffer_get_length(buf);
    return *len ? evbuffer_pullup(buf, -1) : (const unsigned char *)"";
}

void hc_req_set_user(struct hc_request *req, void *user)
{
    req->user = user;
}

void *hc_req_user(const struct hc_request *req)
{
    return req->user;
}

/* The after-hook runs just before the reply is handed to evhttp: once sent, evhttp may free
 * its request at any time, and the hook may still want the request's headers. */
void hc_reply_json(struct hc_request *req, int status, json_t *body)
{
    static const char fallback[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
    if (req->replied) {
        json_decref(body);
        return;
    }
    req->replied = 1;
    char *text = body ? hc_json_dump(body) : strdup("{}");
    json_decref(body);
    if (!text)
        status = 500;
    struct evbuffer *out = evbuffer_new();
    if (out) {
        evbuffer_add_printf(out, "%s\n", text ? text : fallback);
        struct evkeyvalq *headers = evhttp_request_get_output_headers(req->ev);
        evhttp_add_header(headers, "Content-Type", "application/json");
        evhttp_add_header(headers, "Cache-Control", "no-store");
    }
    if (req->srv->after)
        req->srv->after(req, status, req->srv->hook_arg);
    evhttp_send_reply(req->ev, status, NULL, out);
    if (out)
        evbuffer_free(out);
    free(text);
}

void hc_reply_error(struct hc_request *req, const struct hc_error *err)
{
    hc_reply_json(req, err->status ? err->status : 500, hc_error_to_json(err));
}

void hc_reply_data(struct hc_request *req, int status, const char *content_type, const void *data,
                   size_t len)
{
    if (req->replied)
        return;
    struct evbuffer *out = evbuffer_new();
    if (!out || evbuffer_add(out, data, len) != 0) {
        struct hc_error err;
        if (out)
            evbuffer_free(out);
        hc_error_set(&err, 500, HC_ERR_INTERNAL, "cannot send %zu bytes: out of memory", len);
        hc_reply_error(req, &err);
        return;
    }
    req->replied = 1;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req->ev);
    evhttp_add_header(headers, "Content-Type", content_type);
    evhttp_add_header(headers, "Cache-Control", "no-store");
    if (req->srv->after)
        req->srv->after(req, status, req->srv->hook_arg);
    evhttp_send_reply(req->ev, status, NULL, out);
    evbuffer_free(out);
}

/* ---------------------------------------------------------------- deferred replies */

struct hc_deferred {
    struct hc_request req;
};

/* The copy takes over the parsed body; the query list (a TAILQ whose head cannot be copied)
 * stays with the original and is released with it. replied=1 on the original keeps the generic
 * callback from answering 500 for it. */
struct hc_deferred *hc_req_defer(struct hc_request *req)
{
    if (req->replied)
        return NULL;
    struct hc_deferred *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->req = *req;
    TAILQ_INIT(&d->req.query);
    req->json = NULL;
    req->replied = 1;
    return d;
}

struct hc_request *hc_deferred_request(struct hc_deferred *d)
{
    return &d->req;
}

void hc_deferred_reply_json(struct hc_deferred *d, int status, json_t *body)
{
    if (!d) {
        json_decref(body);
        return;
    }
    hc_reply_json(&d->req, status, body);
    hc_request_release(&d->req);
    free(d);
}

void hc_deferred_reply_error(struct hc_deferred *d, const struct hc_error *err)
{
    hc_deferred_reply_json(d, err->status ? err->status : 500, hc_error_to_json(err));
}

/* ---------------------------------------------------------------- server */

struct hc_http_server *hc_http_server_new(struct event_base *base,
                                          const struct hc_tls_server_config *tls,
                                          struct hc_error *err)
{
    if (!tls || !tls->cert_file || !tls->key_file) {
        hc_error_set(err, 500, HC_ERR_INVALID_ARGUMENT, "https server needs a certificate and key");
        return NULL;
    }
    struct hc_http_server *srv = calloc(1, sizeof(*srv));
    if (!srv) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot allocate https server: out of memory");
        return NULL;
    }
    srv->base = base;
    srv->router = hc_router_new();
    srv->http = evhttp_new(base);
    if (tls->required_client_cn)
        srv->required_cn = strdup(tls->required_client_cn);
    if (!srv->router || !srv->http || (tls->required_client_cn && !srv->required_cn)) {
        hc_error_set(err, 500, HC_ERR_INTERNAL, "cannot allocate https server: out of memory");
        goto fail;
    }
    if (!(srv->ctx = hc_tls_server_ctx(tls, err)))
        goto fail;
    SSL_CTX_set_app_data(srv->ctx, srv);
    evhttp_set_bevcb(srv->http, hc_server_bevcb, srv);
    evhttp_set_gencb(srv->http, hc_server_gencb, srv);
    /* Every method reaches the router, so unknown ones get a JSON 405, not evhttp's HTML 501. */
    evhttp_set_allowed_methods(srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                              EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                              EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                              EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_flags(srv->http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_max_headers_size(srv->http, HC_HTTP_MAX_HEADERS_SIZE);
    hc_http_server_set_limits(srv, HC_HTTP_DEFAULT_MAX_BODY, HC_HTTP_DEFAULT_TIMEOUT_S);
    return srv;
fail:
    hc_http_server_free(srv);
    return NULL;
}

/* Free before the event_base: libevent finalises the connections' bufferevents through it. */
void hc_http_server_free(struct hc_http_server *srv)
{
    if (!srv)
        return;
    if (srv->http)
        evhttp_free(srv->http);
    /* Connections still in their TLS handshake are freed by deferred callbacks: run them now,
     * or their SSL objects outlive the server (and leak when the base is freed next). */
    if (srv->base)
        event_base_loop(srv->base, EVLOOP_NONBLOCK);
    SSL_CTX_free(srv->ctx);
    hc_router_free(srv->router);
    free(srv->required_cn);
    free(srv);
}

int hc_http_server_listen(struct hc_http_server *srv, const char *addr, int port,
                          struct hc_error *err)
{
    if (!addr)
        addr = "0.0.0.0";
    if (port < 0 || port > 65535)
        return hc_error_set(err, 500, HC_ERR_INVALID_ARGUMENT, "invalid port %d", port);
    struct evhttp_bound_socket *sock =
        evhttp_bind_socket_with_handle(srv->http, addr, (ev_uint16_t)port);
    if (!sock)
        return hc_error_set(err, 500, HC_ERR_IO, "cannot listen on '%s:%d': %s", addr, port,
                            strerror(errno));
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    /* Accepted sockets inherit TCP_NODELAY on Linux. Without it, evhttp's header and body
     * writes become two TLS records, Nagle holds the second until the client's delayed ACK,
     * and every reply on a kept-alive connection costs 40 ms. */
    int one = 1;
    setsockopt(evhttp_bound_socket_get_fd(sock), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&ss, &len) != 0)
        return hc_error_set(err, 500, HC_ERR_IO, "cannot listen on '%s:%d': %s", addr, port,
                            strerror(errno));
    if (srv->port == 0)
        srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

int hc_http_server_port(const struct hc_http_server *srv)
{
    return srv->port;
}

/* libevent's own limit: the backstop above the server's limit, or, when a route allows more,
 * that route's limit plus an eighth (so an upload slightly too large still gets the JSON 413). */
static void hc_server_backstop(struct hc_http_server *srv)
{
    uint64_t backstop = (uint64_t)srv->max_body * HC_HTTP_BODY_BACKSTOP_FACTOR;
    if (srv->max_body > INT64_MAX / HC_HTTP_BODY_BACKSTOP_FACTOR)
        backstop = INT64_MAX;
    for (size_t i = 0; i < srv->router->count; i++) {
        uint64_t route = srv->router->routes[i].max_body;
        if (route && route < INT64_MAX / 2 && route + route / 8 > backstop)
            backstop = route + route / 8;
    }
    evhttp_set_max_body_size(srv->http, (ev_ssize_t)backstop);
}

int hc_http_server_route_limit(struct hc_http_server *srv, const char *method, const char *pattern,
                               size_t max_body)
{
    for (size_t i = 0; i < srv->router->count; i++) {
        struct hc_route *r = &srv->router->routes[i];
        if (strcmp(r->method, method) == 0 && strcmp(r->pattern, pattern) == 0) {
            r->max_body = max_body;
            hc_server_backstop(srv);
            return 0;
        }
    }
    return -1;
}

/* max_body 0 and timeout_s <= 0 select the defaults. */
void hc_http_server_set_limits(struct hc_http_server *srv, size_t max_body, int timeout_s)
{
    srv->max_body = max_body ? max_body : HC_HTTP_DEFAULT_MAX_BODY;
    hc_server_backstop(srv);
    evhttp_set_timeout(srv->http, timeout_s > 0 ? timeout_s : HC_HTTP_DEFAULT_TIMEOUT_S);
}

int hc_http_server_route(struct hc_http_server *srv, const char *method, const char *pattern,
                         int flags, hc_route_fn fn, void *arg)
{
    return hc_router_add(srv->router, method, pattern, flags, fn, arg);
}

void hc_http_server_set_hooks(struct hc_http_server *srv, hc_before_fn before, hc_after_fn after,
                              void *arg)
{
    srv->before = before;
    srv->after = after;
    srv->hook_arg = arg;
}
