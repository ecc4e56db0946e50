/*
 * HTTPS server: libevent evhttp over bufferevent_openssl, a small pure router, the request
 * and reply helpers every handler uses, and the connection guard against denial of service.
 *
 * One generic evhttp callback does all the routing, so that 404, 405, 413 and bad JSON are all
 * answered with the one JSON error shape of common/error.h (evhttp's own errors are HTML).
 *
 * Handlers reply synchronously: a route (or the before-hook) must call hc_reply_json or
 * hc_reply_error before it returns. The struct hc_request lives on the generic callback's stack;
 * if a handler forgets to reply, the server answers 500 so the client never hangs.
 *
 * The guard (libevent 2.1 has no evhttp_set_newreqcb, so it works beside evhttp):
 *   - our own evconnlistener per address, bound with evhttp_bind_listener: it pauses at
 *     max_connections and, after an accept error (EMFILE...), for a growing delay, instead of
 *     spinning on a listening socket that stays readable and logging every failure;
 *   - a struct hc_conn per connection, hung on its SSL object (freed with it, which is when
 *     the descriptor closes), with a deadline timer: from accept, and again from each reply,
 *     the TLS handshake and the request head must be complete within deadline_ms, and the body
 *     too unless the request was granted a larger limit; at the deadline the connection gets
 *     evhttp's own timeout handling (an inactivity timeout alone lets a byte every 20 s hold a
 *     connection forever);
 *   - an evbuffer callback on the connection's decrypted input that follows the request head
 *     as it arrives (lines split as evhttp splits them) and, once the head is complete and
 *     before evhttp reads any of the body, sets the connection's body limit: the server's
 *     (JSON) limit, or a route's larger one if the head hook grants it (controller: an admin
 *     token on the bundle upload). Only the request line and the Authorization header are
 *     kept; evhttp still parses and checks everything itself.
 */
#include "common/https_server.h"

#include "common/pki.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "common/json_util.h"
#include "common/log.h"
#include "common/util.h"

#define HC_ROUTER_MAX_ROUTES 64
#define HC_HTTP_MAX_HEADERS_SIZE (64 * 1024)
#define HC_HTTP_MAX_LISTENERS 4
#define HC_HTTP_LISTEN_BACKLOG 511
#define HC_HTTP_ACCEPT_BACKOFF_MIN_MS 50
#define HC_HTTP_ACCEPT_BACKOFF_MAX_MS 2000
#define HC_HTTP_FD_RESERVE_MIN 32  /* descriptors kept for the rest of the process */
#define HC_HTTP_HEAD_LINE_MAX 1024 /* longer request lines or Authorization values: no grant */
#define HC_HTTP_LOG_BURST 5        /* lines per second and kind; the rest is counted */

/*
 * Oversized bodies. libevent answers a body over the connection's max_body_size with its own
 * HTML 413 page (after reading and discarding a declared Content-Length: lingering close, so the
 * client still reads the status), so libevent's limit is our limit plus an eighth: a body just
 * over the limit is read and gets the JSON 413 body_too_large from the generic callback; a
 * larger one never takes more than limit + limit/8 bytes of memory.
 */
#define HC_HTTP_TRIM_AFTER (1024 * 1024)

struct hc_router {
    size_t count;
    struct hc_route routes[HC_ROUTER_MAX_ROUTES];
};

/* At most HC_HTTP_LOG_BURST lines a second of one kind; the number left out is logged with
 * the first line of the next second. */
struct hc_ratelog {
    int64_t window_ms;
    int lines;
    unsigned long suppressed;
};

struct hc_listener {
    struct hc_http_server *srv;
    struct evconnlistener *lev; /* owned by evhttp once bound */
    struct event *retry;        /* ends a pause after an accept error */
    int backoff_ms;             /* the pause after the next error; reset by an accept */
    int waiting;                /* paused after an accept error */
    char addr[96];
};

enum hc_conn_phase {
    HC_CONN_HEAD, /* TLS handshake, or waiting for (the rest of) a request head */
    HC_CONN_BODY, /* head complete: evhttp reads the body */
    HC_CONN_BUSY  /* the request is with its handler, or its reply being sent */
};

struct hc_conn {
    struct hc_http_server *srv; /* NULL once the server is freed */
    struct bufferevent *bev;
    struct evbuffer_cb_entry *input_cb;
    struct event *deadline;
    struct hc_conn *prev, *next;
    enum hc_conn_phase phase;
    int granted;       /* this request may use its route's larger limit */
    unsigned requests; /* answered on this connection */
    /* the request head as it arrives */
    unsigned lines;
    size_t len;
    int overflow;  /* the current line is longer than line[] */
    int prev_auth; /* the last header line was Authorization (a continuation voids it) */
    int auth_seen;
    int auth_bad;
    char line[HC_HTTP_HEAD_LINE_MAX];
    char method[16];
    char target[HC_HTTP_HEAD_LINE_MAX];
    char auth[HC_HTTP_HEAD_LINE_MAX];
};

struct hc_http_server {
    struct event_base *base;
    struct evhttp *http;
    SSL_CTX *ctx;
    struct hc_router *router;
    char *required_cn;
    char *required_pin;
    int port;
    size_t max_body;
    hc_before_fn before;
    hc_after_fn after;
    void *hook_arg;
    hc_head_fn head;
    void *head_arg;
    hc_route_fn fallback; /* a request no route matches, instead of 404/405 */
    void *fallback_arg;
    /* guard */
    struct hc_listener listeners[HC_HTTP_MAX_LISTENERS];
    int nlisteners;
    int max_conns;
    int deadline_ms;
    int nconns;
    int capped;  /* listeners paused at max_conns */
    int closing; /* hc_http_server_free under way */
    struct hc_conn *conns;
    struct hc_ratelog log_accept, log_cap, log_deadline;
    struct hc_http_server *next_registered;
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
    int granted; /* the head hook granted the route's own body limit */
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
        hc_error_set(err, HC_E(NOT_FOUND), "endpoint '%s' not found", path);
        return NULL;
    }
    hc_error_set(err, HC_E(METHOD_NOT_ALLOWED), "method '%s' not allowed on '%s'", method, path);
    hc_error_hint(err, "allowed: %s", allowed);
    return NULL;
}

/* ---------------------------------------------------------------- TLS */

/* Fills err from the OpenSSL error queue (and empties it, it is per thread). */
static int hc_tls_error(struct hc_error *err, const char *what, const char *file)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    hc_error_set(err, HC_E(TLS), "cannot %s '%s': %s", what, file,
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

/* With required_client_cn (and required_client_pin): the chain is already verified by OpenSSL
 * (ok), and at depth 0 the leaf's CN must also be the required one (and its key the pinned
 * one), or the handshake fails. */
static int hc_tls_verify_cn(int ok, X509_STORE_CTX *store)
{
    if (!ok || X509_STORE_CTX_get_error_depth(store) != 0)
        return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct hc_http_server *srv = ssl ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;
    X509 *leaf = X509_STORE_CTX_get_current_cert(store);
    char cn[256], pin[HC_PKI_PIN_LEN];
    if (!srv || !srv->required_cn)
        return ok;
    if (hc_cert_cn(leaf, cn, sizeof(cn)) != 0 || strcmp(cn, srv->required_cn) != 0 ||
        (srv->required_pin &&
         (hc_pki_cert_pin(leaf, pin) < 0 || strcmp(pin, srv->required_pin) != 0))) {
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

/* ---------------------------------------------------------------- connection guard */

static int hc_guard_default_conns = HC_HTTP_DEFAULT_MAX_CONNECTIONS;
static int hc_guard_default_deadline_ms = HC_HTTP_DEFAULT_DEADLINE_MS;

/* Every live server, for the listener error callback: libevent hands it evhttp's argument, not
 * ours, so the listener is looked up here. */
static pthread_mutex_t hc_servers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hc_http_server *hc_servers;

static pthread_once_t hc_conn_once = PTHREAD_ONCE_INIT;
static int hc_conn_index = -1;

static int hc_ratelog_admit(struct hc_ratelog *r, const char *what)
{
    int64_t now = hc_mono_ms();
    if (now - r->window_ms >= 1000) {
        if (r->suppressed)
            HC_WARN("%lu more %s in the last %lld ms were not logged", r->suppressed, what,
                    (long long)(now - r->window_ms));
        r->window_ms = now;
        r->lines = 0;
        r->suppressed = 0;
    }
    if (r->lines >= HC_HTTP_LOG_BURST) {
        r->suppressed++;
        return 0;
    }
    r->lines++;
    return 1;
}

void hc_http_server_guard_defaults(int max_connections, int deadline_ms)
{
    hc_guard_default_conns =
        max_connections > 0 ? max_connections : HC_HTTP_DEFAULT_MAX_CONNECTIONS;
    hc_guard_default_deadline_ms = deadline_ms > 0 ? deadline_ms : HC_HTTP_DEFAULT_DEADLINE_MS;
}

/* Pauses or resumes every listener: accepting only below the cap and outside an error pause. */
static void hc_listeners_update(struct hc_http_server *srv)
{
    for (int i = 0; i < srv->nlisteners; i++) {
        struct hc_listener *l = &srv->listeners[i];
        if (!srv->closing && !srv->capped && !l->waiting)
            evconnlistener_enable(l->lev);
        else
            evconnlistener_disable(l->lev);
    }
}

/* The cap must leave descriptors for the database, the agent clients, SSH sessions and logs: a
 * quarter of RLIMIT_NOFILE, at least HC_HTTP_FD_RESERVE_MIN. */
static void hc_guard_fit(struct hc_http_server *srv)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    long nofile = rl.rlim_cur > 1L << 30 ? 1L << 30 : (long)rl.rlim_cur;
    long reserve = nofile / 4 > HC_HTTP_FD_RESERVE_MIN ? nofile / 4 : HC_HTTP_FD_RESERVE_MIN;
    long room = nofile - reserve > 1 ? nofile - reserve : 1;
    if (srv->max_conns > room) {
        HC_WARN("a limit of %d connections does not fit the descriptor limit of %ld "
                "(RLIMIT_NOFILE, LimitNOFILE= in the unit): %ld connections at most",
                srv->max_conns, nofile, room);
        srv->max_conns = (int)room;
    }
}

void hc_http_server_set_guard(struct hc_http_server *srv, int max_connections, int deadline_ms)
{
    srv->max_conns = max_connections > 0 ? max_connections : hc_guard_default_conns;
    srv->deadline_ms = deadline_ms > 0 ? deadline_ms : hc_guard_default_deadline_ms;
    hc_guard_fit(srv);
    srv->capped = srv->nconns >= srv->max_conns;
    hc_listeners_update(srv);
}

int hc_http_server_connections(const struct hc_http_server *srv)
{
    return srv->nconns;
}

int hc_http_server_max_connections(const struct hc_http_server *srv)
{
    return srv->max_conns;
}

static void hc_conn_peer(const struct hc_conn *conn, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    evutil_socket_t fd = bufferevent_getfd(conn->bev);
    snprintf(buf, len, "?");
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)len);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, buf, (socklen_t)len);
}

/* evhttp's connection for our bufferevent: evhttp installs its callbacks on the bufferevent
 * it got from hc_server_bevcb with the connection as their argument (libevent 2.0 to 2.2), and
 * the connection's bufferevent must be ours again. */
static struct evhttp_connection *hc_conn_evcon(const struct hc_conn *conn)
{
    void *arg = NULL;
    bufferevent_getcb(conn->bev, NULL, NULL, NULL, &arg);
    struct evhttp_connection *evcon = arg;
    return evcon && evhttp_connection_get_bufferevent(evcon) == conn->bev ? evcon : NULL;
}

static void hc_conn_arm(struct hc_conn *conn)
{
    int ms = conn->srv->deadline_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(conn->deadline, &tv);
}

/* A new request may begin: the deadline runs again and the head scan starts afresh. */
static void hc_conn_wait(struct hc_conn *conn)
{
    conn->phase = HC_CONN_HEAD;
    conn->granted = 0;
    conn->lines = 0;
    conn->len = 0;
    conn->overflow = conn->prev_auth = conn->auth_seen = conn->auth_bad = 0;
    conn->method[0] = conn->target[0] = conn->auth[0] = '\0';
    hc_conn_arm(conn);
}

/* libevent's limit for a request limited to limit bytes ("Oversized bodies" at the top). */
static ev_ssize_t hc_backstop(size_t limit)
{
    if (limit > (size_t)INT64_MAX / 2)
        return -1; /* no limit */
    return (ev_ssize_t)(limit + limit / 8);
}

/* The head is complete and evhttp has not yet seen it: choose the body limit. */
static void hc_conn_head_done(struct hc_conn *conn)
{
    struct hc_http_server *srv = conn->srv;
    struct hc_error err = {0};
    char path[sizeof(conn->target)];
    conn->phase = HC_CONN_BODY;
    snprintf(path, sizeof(path), "%s", conn->target);
    path[strcspn(path, "?#")] = '\0';
    const struct hc_route *route =
        path[0] == '/' ? hc_router_match(srv->router, conn->method, path, NULL, &err) : NULL;
    if (route && route->max_body > srv->max_body && srv->head && !conn->auth_bad)
        conn->granted = srv->head(route, conn->auth[0] ? conn->auth : NULL, srv->head_arg) != 0;
    struct evhttp_connection *evcon = hc_conn_evcon(conn);
    if (evcon)
        evhttp_connection_set_max_body_size(
            evcon, hc_backstop(conn->granted ? route->max_body : srv->max_body));
    /* A granted upload may take longer than the deadline: the inactivity timeout governs it. */
    if (conn->granted)
        evtimer_del(conn->deadline);
}

/* One complete line of the head (CR LF or LF stripped, as evhttp_readln's EVBUFFER_EOL_CRLF). */
static void hc_conn_line(struct hc_conn *conn)
{
    char *line = conn->line;
    if (conn->lines++ == 0) {
        size_t m = strcspn(line, " ");
        if (conn->overflow || m == 0 || m >= sizeof(conn->method) || line[m] != ' ')
            return;
        memcpy(conn->method, line, m);
        conn->method[m] = '\0';
        char *target = line + m + 1;
        target[strcspn(target, " ")] = '\0';
        snprintf(conn->target, sizeof(conn->target), "%s", target);
        return;
    }
    if (conn->len == 0 && !conn->overflow) {
        hc_conn_head_done(conn);
        return;
    }
    if (line[0] == ' ' || line[0] == '\t') {
        /* A continuation line: evhttp appends it to the previous header's value. */
        if (conn->prev_auth) {
            conn->auth_bad = 1;
            conn->auth[0] = '\0';
        }
        return;
    }
    conn->prev_auth = 0;
    char *colon = strchr(line, ':');
    if (!colon || colon - line != 13 || evutil_ascii_strncasecmp(line, "Authorization", 13) != 0)
        return;
    conn->prev_auth = 1;
    if (conn->auth_seen++) /* evhttp_find_header gives the first */
        return;
    if (conn->overflow) {
        conn->auth_bad = 1;
        return;
    }
    char *value = colon + 1 + strspn(colon + 1, " ");
    size_t n = strlen(value);
    while (n > 0 && strchr(" \t\r\n", value[n - 1]))
        n--;
    value[n] = '\0';
    snprintf(conn->auth, sizeof(conn->auth), "%s", value);
}

static void hc_conn_scan(struct hc_conn *conn, const char *data, size_t len)
{
    for (size_t i = 0; i < len && conn->phase == HC_CONN_HEAD; i++) {
        if (data[i] != '\n') {
            if (conn->len < sizeof(conn->line) - 1)
                conn->line[conn->len++] = data[i];
            else
                conn->overflow = 1;
            continue;
        }
        if (!conn->overflow && conn->len > 0 && conn->line[conn->len - 1] == '\r')
            conn->len--;
        conn->line[conn->len] = '\0';
        hc_conn_line(conn);
        conn->len = 0;
        conn->overflow = 0;
    }
}

/* Scans buf from offset start, without copying or removing anything. */
static void hc_conn_scan_buffer(struct hc_conn *conn, struct evbuffer *buf, size_t start)
{
    struct evbuffer_ptr pos;
    struct evbuffer_iovec vec[8];
    if (evbuffer_ptr_set(buf, &pos, start, EVBUFFER_PTR_SET) < 0)
        return;
    while (conn->phase == HC_CONN_HEAD) {
        int n = evbuffer_peek(buf, -1, &pos, vec, 8);
        size_t seen = 0;
        for (int i = 0; i < n && i < 8 && conn->phase == HC_CONN_HEAD; i++) {
            hc_conn_scan(conn, vec[i].iov_base, vec[i].iov_len);
            seen += vec[i].iov_len;
        }
        if (n <= 8 || evbuffer_ptr_set(buf, &pos, seen, EVBUFFER_PTR_ADD) < 0)
            return;
    }
}

/* Decrypted data arrived; it runs before evhttp's read callback looks at it. */
static void hc_conn_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct hc_conn *conn = arg;
    if (!conn->srv || conn->phase != HC_CONN_HEAD || info->n_added == 0)
        return;
    size_t len = evbuffer_get_length(buf);
    hc_conn_scan_buffer(conn, buf, len >= info->n_added ? len - info->n_added : 0);
}

/* The reply went out and the connection stays: the next request's head may already be in. */
static void hc_conn_request_done(struct evhttp_request *ev, void *arg)
{
    struct hc_conn *conn = arg;
    (void)ev;
    if (!conn->srv)
        return;
    conn->requests++;
    hc_conn_wait(conn);
    hc_conn_scan_buffer(conn, bufferevent_get_input(conn->bev), 0);
}

/* Deadline: the connection ends as an evhttp read timeout ends it (evhttp frees it). */
static void hc_conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct hc_conn *conn = arg;
    struct hc_http_server *srv = conn->srv;
    (void)fd;
    (void)what;
    if (!srv)
        return;
    if (conn->requests && conn->phase == HC_CONN_HEAD && !conn->lines && !conn->len) {
        /* A kept-alive connection with nothing sent since its last reply: routine. */
        HC_DEBUG("closing an idle kept-alive connection after %d ms", srv->deadline_ms);
    } else if (hc_ratelog_admit(&srv->log_deadline, "connections closed at the request deadline")) {
        char peer[64];
        SSL *ssl = bufferevent_openssl_get_ssl(conn->bev);
        hc_conn_peer(conn, peer, sizeof(peer));
        HC_WARN("closing the connection from %s: no complete %s within %d ms", peer,
                ssl && !SSL_is_init_finished(ssl) ? "tls handshake"
                : conn->phase == HC_CONN_HEAD     ? "request head"
                                                  : "request body",
                srv->deadline_ms);
    }
    bufferevent_event_cb cb = NULL;
    void *cbarg = NULL;
    bufferevent_getcb(conn->bev, NULL, NULL, &cb, &cbarg);
    if (cb)
        cb(conn->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, cbarg);
}

/* The SSL object goes with its bufferevent, which closes the descriptor: the connection is
 * gone. */
static void hc_conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                         void *argp)
{
    struct hc_conn *conn = ptr;
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    if (!conn)
        return;
    if (conn->input_cb)
        evbuffer_remove_cb_entry(bufferevent_get_input(conn->bev), conn->input_cb);
    if (conn->deadline)
        event_free(conn->deadline);
    struct hc_http_server *srv = conn->srv;
    if (srv) {
        if (conn->prev)
            conn->prev->next = conn->next;
        else
            srv->conns = conn->next;
        if (conn->next)
            conn->next->prev = conn->prev;
        srv->nconns--;
        if (srv->capped && srv->nconns < srv->max_conns) {
            srv->capped = 0;
            hc_listeners_update(srv);
        }
    }
    free(conn);
}

static void hc_conn_index_init(void)
{
    hc_conn_index = SSL_get_ex_new_index(0, "hc_conn", NULL, NULL, hc_conn_free);
}

static struct hc_conn *hc_conn_of_request(struct evhttp_request *ev)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(ev);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    struct hc_conn *conn = ssl ? SSL_get_ex_data(ssl, hc_conn_index) : NULL;
    return conn && conn->srv ? conn : NULL;
}

/* evhttp asks for a bufferevent per accepted connection. Returning NULL would make evhttp fall
 * back to a plain socket bufferevent, i.e. serve cleartext HTTP without any client check, so a
 * failure here (only possible when out of memory) aborts instead. */
static struct bufferevent *hc_server_bevcb(struct event_base *base, void *arg)
{
    struct hc_http_server *srv = arg;
    pthread_once(&hc_conn_once, hc_conn_index_init);
    struct hc_conn *conn = calloc(1, sizeof(*conn));
    SSL *ssl = SSL_new(srv->ctx);
    if (!conn || !ssl || hc_conn_index < 0 || SSL_set_ex_data(ssl, hc_conn_index, conn) != 1)
        abort();
    conn->srv = srv;
    conn->deadline = evtimer_new(base, hc_conn_deadline_cb, conn);
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev || !conn->deadline)
        abort();
    conn->bev = bev;
    conn->input_cb = evbuffer_add_cb(bufferevent_get_input(bev), hc_conn_input_cb, conn);
    if (!conn->input_cb)
        abort();
    conn->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = conn;
    srv->conns = conn;
    srv->nconns++;
    hc_conn_wait(conn);
    for (int i = 0; i < srv->nlisteners; i++)
        srv->listeners[i].backoff_ms = 0;
    if (srv->nconns >= srv->max_conns && !srv->capped) {
        srv->capped = 1;
        hc_listeners_update(srv);
        if (hc_ratelog_admit(&srv->log_cap, "messages about the connection limit"))
            HC_WARN("%d connections open, the limit: accepting no more until one closes",
                    srv->nconns);
    }
    /* Clients may close without close_notify once they have their answer. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

static void hc_listener_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct hc_listener *l = arg;
    (void)fd;
    (void)what;
    l->waiting = 0;
    hc_listeners_update(l->srv);
}

/* accept() failed for another reason than a retriable one (EMFILE, ENFILE, ENOBUFS...). The
 * socket stays readable, so the listener pauses, for longer each time until an accept works. */
static void hc_listener_error_cb(struct evconnlistener *lev, void *ptr)
{
    int e = EVUTIL_SOCKET_ERROR();
    struct hc_listener *l = NULL;
    (void)ptr;
    pthread_mutex_lock(&hc_servers_mu);
    for (struct hc_http_server *srv = hc_servers; srv && !l; srv = srv->next_registered)
        for (int i = 0; i < srv->nlisteners; i++)
            if (srv->listeners[i].lev == lev)
                l = &srv->listeners[i];
    pthread_mutex_unlock(&hc_servers_mu);
    if (!l) {
        evconnlistener_disable(lev);
        return;
    }
    struct hc_http_server *srv = l->srv;
    l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : HC_HTTP_ACCEPT_BACKOFF_MIN_MS;
    if (l->backoff_ms > HC_HTTP_ACCEPT_BACKOFF_MAX_MS)
        l->backoff_ms = HC_HTTP_ACCEPT_BACKOFF_MAX_MS;
    l->waiting = 1;
    hc_listeners_update(srv);
    struct timeval tv = {l->backoff_ms / 1000, (l->backoff_ms % 1000) * 1000};
    evtimer_add(l->retry, &tv);
    if (hc_ratelog_admit(&srv->log_accept, "accept errors"))
        HC_WARN("cannot accept connections on %s: %s (%d open); not accepting for %d ms", l->addr,
                evutil_socket_error_to_string(e), srv->nconns, l->backoff_ms);
}

static void hc_servers_register(struct hc_http_server *srv, int add)
{
    pthread_mutex_lock(&hc_servers_mu);
    if (add) {
        srv->next_registered = hc_servers;
        hc_servers = srv;
    } else {
        for (struct hc_http_server **p = &hc_servers; *p; p = &(*p)->next_registered)
            if (*p == srv) {
                *p = srv->next_registered;
                break;
            }
    }
    pthread_mutex_unlock(&hc_servers_mu);
}

/* ---------------------------------------------------------------- requests */

static const char *hc_method_name(enum evhttp_cmd_type cmd)
{
    switch (cmd) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_OPTIONS:
        return "OPTIONS";
    case EVHTTP_REQ_TRACE:
        return "TRACE";
    case EVHTTP_REQ_CONNECT:
        return "CONNECT";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
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
    /* The route decides the body limit, so match first; its 404/405 waits behind the 413. A
     * route's own limit counts only if the head hook granted it (hc_conn_head_done). */
    req->route = hc_router_match(srv->router, req->method, req->path, &req->params, &route_err);
    size_t limit =
        req->granted && req->route && req->route->max_body ? req->route->max_body : srv->max_body;
    if (body_len > limit) {
        hc_error_set(&err, HC_E(BODY_TOO_LARGE),
                     "request body of %zu bytes exceeds the limit of %zu bytes", body_len, limit);
        hc_reply_error(req, &err);
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req->ev);
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    if (query && evhttp_parse_query_str(query, &req->query) != 0) {
        hc_error_set(&err, HC_E(INVALID_ARGUMENT), "malformed query string '%s'", query);
        hc_reply_error(req, &err);
        return;
    }
    if (!req->route && srv->fallback) {
        srv->fallback(req, srv->fallback_arg);
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
    /* The whole request is in: the deadline stops until the reply has gone out. */
    struct hc_conn *conn = hc_conn_of_request(ev);
    if (conn) {
        evtimer_del(conn->deadline);
        conn->phase = HC_CONN_BUSY;
        req.granted = conn->granted;
        evhttp_request_set_on_complete_cb(ev, hc_conn_request_done, conn);
    }
    hc_request_dispatch(&req);
    if (!req.replied) {
        struct hc_error err;
        hc_error_set(&err, HC_E(INTERNAL), "handler for '%s %s' did not reply", req.method,
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

size_t hc_req_header_values(const struct hc_request *req, const char *name, const char **values,
                            size_t max)
{
    size_t n = 0;
    const struct evkeyval *h;
    TAILQ_FOREACH(h, evhttp_request_get_input_headers(req->ev), next)
    {
        if (evutil_ascii_strcasecmp(h->key, name) != 0)
            continue;
        if (n < max)
            values[n] = h->value;
        n++;
    }
    return n;
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
    static const char fallback[] =
        "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
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

void hc_http_server_set_fallback(struct hc_http_server *srv, hc_route_fn fn, void *arg)
{
    srv->fallback = fn;
    srv->fallback_arg = arg;
}

void hc_reply_header(struct hc_request *req, const char *name, const char *value)
{
    evhttp_add_header(evhttp_request_get_output_headers(req->ev), name, value);
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
        hc_error_set(&err, HC_E(INTERNAL), "cannot send %zu bytes: out of memory", len);
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

/* ---------------------------------------------------------------- cached replies */

struct hc_blob *hc_blob_new(const void *data, size_t len)
{
    struct hc_blob *b = malloc(sizeof(*b) + len);
    if (!b)
        return NULL;
    b->refs = 1;
    b->len = len;
    memcpy(b->data, data, len);
    return b;
}

void hc_blob_unref(struct hc_blob *b)
{
    if (b && --b->refs == 0)
        free(b);
}

static void hc_blob_cleanup(const void *data, size_t len, void *arg)
{
    (void)data, (void)len;
    hc_blob_unref(arg);
}

/* One entity tag at *p (after optional spaces): advances past it. 1 when it equals etag under
 * weak comparison; 0 otherwise; -1 when the list is malformed from here on. */
static int hc_etag_next(const char **p, const char *etag)
{
    const char *s = *p + strspn(*p, " \t");
    if (strncmp(s, "W/", 2) == 0)
        s += 2;
    if (*s != '"')
        return -1;
    const char *end = strchr(s + 1, '"');
    if (!end)
        return -1;
    size_t n = (size_t)(end + 1 - s);
    const char *e = strncmp(etag, "W/", 2) == 0 ? etag + 2 : etag;
    size_t want = strlen(e);
    *p = end + 1;
    return n == want && memcmp(s, e, n) == 0;
}

int hc_etag_match(const char *if_none_match, const char *etag)
{
    const char *p = if_none_match;
    if (!p || !etag)
        return 0;
    p += strspn(p, " \t");
    if (*p == '*') /* "*" alone matches any current representation */
        return p[1 + strspn(p + 1, " \t")] == '\0';
    for (;;) {
        int m = hc_etag_next(&p, etag);
        if (m != 0)
            return m > 0;
        p += strspn(p, " \t");
        if (*p != ',')
            return 0;
        p++;
    }
}

const char *hc_req_uri(const struct hc_request *req)
{
    const char *uri = evhttp_request_get_uri(req->ev);
    return uri ? uri : req->path;
}

void hc_reply_blob(struct hc_request *req, int status, const char *etag, struct hc_blob *b)
{
    if (req->replied)
        return;
    struct evbuffer *out = evbuffer_new();
    b->refs++;
    if (!out || evbuffer_add_reference(out, b->data, b->len, hc_blob_cleanup, b) != 0) {
        struct hc_error err;
        hc_blob_unref(b);
        if (out)
            evbuffer_free(out);
        hc_error_set(&err, HC_E(INTERNAL), "cannot send %zu bytes: out of memory", b->len);
        hc_reply_error(req, &err);
        return;
    }
    req->replied = 1;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req->ev);
    evhttp_add_header(headers, "Content-Type", "application/json");
    /* no-cache rather than no-store: a client may keep the reply and revalidate it */
    evhttp_add_header(headers, "Cache-Control", "no-cache");
    if (etag)
        evhttp_add_header(headers, "ETag", etag);
    if (req->srv->after)
        req->srv->after(req, status, req->srv->hook_arg);
    evhttp_send_reply(req->ev, status, NULL, out);
    evbuffer_free(out);
}

void hc_reply_not_modified(struct hc_request *req, const char *etag)
{
    if (req->replied)
        return;
    req->replied = 1;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req->ev);
    evhttp_add_header(headers, "Cache-Control", "no-cache");
    evhttp_add_header(headers, "ETag", etag);
    if (req->srv->after)
        req->srv->after(req, 304, req->srv->hook_arg);
    evhttp_send_reply(req->ev, 304, NULL, NULL);
}

/* ---------------------------------------------------------------- streamed replies */

struct hc_stream {
    struct evhttp_request *ev;
    struct evhttp_connection *evcon;
    hc_stream_gone_fn on_gone;
    void *arg;
};

/* evhttp calls it as the connection goes (the client closed it, or a write failed or timed
 * out), before it frees the request: the owner lets go of the stream. */
static void hc_stream_closed(struct evhttp_connection *evcon, void *arg)
{
    struct hc_stream *s = arg;
    (void)evcon;
    if (s->on_gone)
        s->on_gone(s, s->arg);
    free(s);
}

struct hc_stream *hc_req_stream(struct hc_request *req, const char *content_type,
                                int write_timeout_s, hc_stream_gone_fn on_gone, void *arg)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req->ev);
    if (req->replied || !evcon)
        return NULL;
    struct hc_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->ev = req->ev;
    s->evcon = evcon;
    s->on_gone = on_gone;
    s->arg = arg;
    req->replied = 1;
    struct evkeyvalq *headers = evhttp_request_get_output_headers(req->ev);
    evhttp_add_header(headers, "Content-Type", content_type);
    evhttp_add_header(headers, "Cache-Control", "no-store");
    /* No kept-alive connection after a stream: it ends when the connection ends. */
    evhttp_add_header(headers, "Connection", "close");
    if (req->srv->after)
        req->srv->after(req, 200, req->srv->hook_arg);
    evhttp_send_reply_start(req->ev, 200, "OK");
    evhttp_connection_set_closecb(evcon, hc_stream_closed, s);
    /* The read timeout would end a watcher that sends nothing; a write timeout ends one that
     * reads nothing. */
    struct timeval wt = {write_timeout_s, 0};
    bufferevent_set_timeouts(evhttp_connection_get_bufferevent(evcon), NULL, &wt);
    return s;
}

int hc_stream_write(struct hc_stream *s, const void *data, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    if (!buf || evbuffer_add(buf, data, len) != 0) {
        if (buf)
            evbuffer_free(buf);
        return -1;
    }
    evhttp_send_reply_chunk(s->ev, buf);
    evbuffer_free(buf);
    return 0;
}

size_t hc_stream_pending(const struct hc_stream *s)
{
    return evbuffer_get_length(bufferevent_get_output(evhttp_connection_get_bufferevent(s->evcon)));
}

void hc_stream_drop(struct hc_stream *s)
{
    evhttp_connection_set_closecb(s->evcon, NULL, NULL);
    evhttp_connection_free(s->evcon);
    free(s);
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
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "https server needs a certificate and key");
        return NULL;
    }
    struct hc_http_server *srv = calloc(1, sizeof(*srv));
    if (!srv) {
        hc_error_set(err, HC_E(INTERNAL), "cannot allocate https server: out of memory");
        return NULL;
    }
    srv->base = base;
    srv->max_conns = hc_guard_default_conns;
    srv->deadline_ms = hc_guard_default_deadline_ms;
    srv->router = hc_router_new();
    srv->http = evhttp_new(base);
    if (tls->required_client_cn)
        srv->required_cn = strdup(tls->required_client_cn);
    if (tls->required_client_pin)
        srv->required_pin = strdup(tls->required_client_pin);
    if (!srv->router || !srv->http || (tls->required_client_cn && !srv->required_cn) ||
        (tls->required_client_pin && !srv->required_pin)) {
        hc_error_set(err, HC_E(INTERNAL), "cannot allocate https server: out of memory");
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
    hc_servers_register(srv, 1);
    return srv;
fail:
    hc_http_server_free(srv);
    return NULL;
}

int hc_http_server_reload_tls(struct hc_http_server *srv, const struct hc_tls_server_config *tls,
                              struct hc_error *err)
{
    struct hc_tls_server_config same_client = *tls;
    same_client.required_client_cn = srv->required_cn;
    same_client.required_client_pin = srv->required_pin;
    SSL_CTX *ctx = hc_tls_server_ctx(&same_client, err);
    if (!ctx)
        return -1;
    SSL_CTX_set_app_data(ctx, srv);
    /* Every SSL made from the old context holds a reference to it: open connections keep it. */
    SSL_CTX_free(srv->ctx);
    srv->ctx = ctx;
    return 0;
}

/* Free before the event_base: libevent finalises the connections' bufferevents through it. */
void hc_http_server_free(struct hc_http_server *srv)
{
    if (!srv)
        return;
    hc_servers_register(srv, 0);
    srv->closing = 1;
    for (int i = 0; i < srv->nlisteners; i++)
        event_free(srv->listeners[i].retry);
    srv->nlisteners = 0; /* evhttp_free frees the listeners themselves */
    if (srv->http)
        evhttp_free(srv->http);
    /* Connections still in their TLS handshake are freed by deferred callbacks: run them now,
     * or their SSL objects outlive the server (and leak when the base is freed next). */
    if (srv->base)
        event_base_loop(srv->base, EVLOOP_NONBLOCK);
    /* Whatever is left no longer refers to the server or its timers. */
    for (struct hc_conn *c = srv->conns; c; c = c->next) {
        c->srv = NULL;
        if (c->deadline)
            event_free(c->deadline);
        c->deadline = NULL;
    }
    SSL_CTX_free(srv->ctx);
    hc_router_free(srv->router);
    free(srv->required_cn);
    free(srv->required_pin);
    free(srv);
}

/* Our own listener (not evhttp_bind_socket) so that accept errors reach hc_listener_error_cb
 * and the listener can pause; evhttp accepts on it once bound. */
int hc_http_server_listen(struct hc_http_server *srv, const char *addr, int port,
                          struct hc_error *err)
{
    if (!addr)
        addr = "0.0.0.0";
    if (port < 0 || port > 65535)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "invalid port %d", port);
    if (srv->nlisteners == HC_HTTP_MAX_LISTENERS)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "cannot listen on '%s:%d': at most %d addresses", addr, port,
                            HC_HTTP_MAX_LISTENERS);
    struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC,
                                    .ai_socktype = SOCK_STREAM,
                                    .ai_protocol = IPPROTO_TCP,
                                    .ai_flags = EVUTIL_AI_PASSIVE | EVUTIL_AI_ADDRCONFIG};
    struct evutil_addrinfo *ai = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%d", port);
    int gai = evutil_getaddrinfo(addr, service, &hints, &ai);
    if (gai != 0)
        return hc_error_set(err, HC_E(IO), "cannot listen on '%s:%d': %s", addr, port,
                            evutil_gai_strerror(gai));
    struct evconnlistener *lev = evconnlistener_new_bind(
        srv->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
        HC_HTTP_LISTEN_BACKLOG, ai->ai_addr, (int)ai->ai_addrlen);
    int saved = errno;
    evutil_freeaddrinfo(ai);
    if (!lev)
        return hc_error_set(err, HC_E(IO), "cannot listen on '%s:%d': %s", addr, port,
                            strerror(saved));
    struct hc_listener *l = &srv->listeners[srv->nlisteners];
    memset(l, 0, sizeof(*l));
    l->srv = srv;
    l->retry = evtimer_new(srv->base, hc_listener_retry_cb, l);
    if (!l->retry || !evhttp_bind_listener(srv->http, lev)) {
        if (l->retry)
            event_free(l->retry);
        evconnlistener_free(lev);
        return hc_error_set(err, HC_E(INTERNAL), "cannot listen on '%s:%d': out of memory", addr,
                            port);
    }
    l->lev = lev;
    snprintf(l->addr, sizeof(l->addr), "%s:%d", addr, port);
    evconnlistener_set_error_cb(lev, hc_listener_error_cb);
    srv->nlisteners++;
    evutil_socket_t fd = evconnlistener_get_fd(lev);
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    /* Accepted sockets inherit TCP_NODELAY on Linux. Without it, evhttp's header and body
     * writes become two TLS records, Nagle holds the second until the client's delayed ACK,
     * and every reply on a kept-alive connection costs 40 ms. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return hc_error_set(err, HC_E(IO), "cannot listen on '%s:%d': %s", addr, port,
                            strerror(errno));
    if (srv->port == 0)
        srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    hc_guard_fit(srv);
    hc_listeners_update(srv);
    return 0;
}

int hc_http_server_port(const struct hc_http_server *srv)
{
    return srv->port;
}

/* libevent's limit for every connection until a request head says otherwise. */
static void hc_server_backstop(struct hc_http_server *srv)
{
    evhttp_set_max_body_size(srv->http, hc_backstop(srv->max_body));
}

int hc_http_server_route_limit(struct hc_http_server *srv, const char *method, const char *pattern,
                               size_t max_body)
{
    for (size_t i = 0; i < srv->router->count; i++) {
        struct hc_route *r = &srv->router->routes[i];
        if (strcmp(r->method, method) == 0 && strcmp(r->pattern, pattern) == 0) {
            r->max_body = max_body;
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

void hc_http_server_set_head_hook(struct hc_http_server *srv, hc_head_fn head, void *arg)
{
    srv->head = head;
    srv->head_arg = arg;
}
