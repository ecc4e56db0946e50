/*
 * HTTPS server on libevent evhttp + bufferevent_openssl, with a small router.
 *
 * One server runs on one event_base (one thread). Routes are "METHOD /v1/nodes/{name}" patterns;
 * {param} segments are captured. Every error, including 404/405/413 and bad JSON, is answered
 * with the one JSON error shape (common/error.h). With client_ca_file set the server requires a
 * client certificate signed by that CA (mutual TLS), and with required_client_cn the peer's
 * subject CN must also match: the agent API accepts only the controller's client certificate.
 *
 * Limits against denial of service (docs/hcctld.md "Connection limits"): at most max_connections
 * connections at once (the listeners pause at the cap, and back off after an accept error such
 * as EMFILE instead of spinning); a deadline from accept, or from the previous reply on a
 * kept-alive connection, for the TLS handshake and the whole request head (and the body, unless
 * the head hook granted the route's larger limit); bodies limited to max_body unless granted.
 */
#ifndef HC_COMMON_HTTPS_SERVER_H
#define HC_COMMON_HTTPS_SERVER_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

#define HC_HTTP_MAX_PARAMS 8
#define HC_HTTP_DEFAULT_MAX_BODY (1024 * 1024)
#define HC_HTTP_DEFAULT_TIMEOUT_S 30
#define HC_HTTP_DEFAULT_MAX_CONNECTIONS 256
#define HC_HTTP_DEFAULT_DEADLINE_MS 10000

struct hc_tls_server_config {
    const char *cert_file;           /* PEM chain for the server */
    const char *key_file;            /* PEM private key */
    const char *client_ca_file;      /* NULL: no client certs; else mutual TLS against this CA */
    const char *required_client_cn;  /* NULL: any cert from client_ca_file; else CN must equal */
    const char *required_client_pin; /* NULL: no pin; else the client certificate's public key
                                        must have this hc_pki_cert_pin ("sha256//BASE64") */
};

struct hc_request;
typedef void (*hc_route_fn)(struct hc_request *req, void *arg);

/* Route flags, free for the application's before-hook (e.g. auth levels). */
struct hc_route {
    char method[8];
    char pattern[128];
    int flags;
    hc_route_fn fn;
    void *arg;
    size_t max_body; /* 0: the server's limit; else this route's (hc_http_server_route_limit) */
};

/* Pure router, usable without a network (unit-tested on its own). */
struct hc_router;
struct hc_route_params {
    int count;
    char name[HC_HTTP_MAX_PARAMS][32];
    char value[HC_HTTP_MAX_PARAMS][256]; /* percent-decoded */
};
struct hc_router *hc_router_new(void);
void hc_router_free(struct hc_router *r);
/* Returns 0, or -1 if the pattern is malformed or the table full. */
int hc_router_add(struct hc_router *r, const char *method, const char *pattern, int flags,
                  hc_route_fn fn, void *arg);
/* Matches path (without query string). Returns the route, or NULL with err set to 404
 * not_found (no pattern matches the path) or 405 method_not_allowed (path matches, method
 * does not). */
const struct hc_route *hc_router_match(const struct hc_router *r, const char *method,
                                       const char *path, struct hc_route_params *params,
                                       struct hc_error *err);

/* Called before each matched route. Return 0 to run the route; non-zero after having replied
 * (e.g. 401). */
typedef int (*hc_before_fn)(struct hc_request *req, const struct hc_route *route, void *arg);
/* Called after each reply with the status sent (for audit logging and metrics). */
typedef void (*hc_after_fn)(struct hc_request *req, int status, void *arg);

struct hc_http_server;
/* Creates a server on base. Returns NULL with err (e.g. unreadable cert). Caller frees. */
struct hc_http_server *hc_http_server_new(struct event_base *base,
                                          const struct hc_tls_server_config *tls,
                                          struct hc_error *err);
void hc_http_server_free(struct hc_http_server *srv);
/* Replaces the server's certificate, key and client CA (a renewed certificate, a CA bundle
 * during a CA rotation) from tls's files, read in full before anything changes: connections
 * accepted from now on use them, connections already open keep theirs. The client CN and pin
 * stay as given at creation. Call on the server's thread. 0, or -1 with err (the server keeps
 * what it had). */
int hc_http_server_reload_tls(struct hc_http_server *srv, const struct hc_tls_server_config *tls,
                              struct hc_error *err);
/* Binds addr:port (port 0 picks one; hc_http_server_port tells which). 0 or -1 with err. */
int hc_http_server_listen(struct hc_http_server *srv, const char *addr, int port,
                          struct hc_error *err);
int hc_http_server_port(const struct hc_http_server *srv);
void hc_http_server_set_limits(struct hc_http_server *srv, size_t max_body, int timeout_s);
int hc_http_server_route(struct hc_http_server *srv, const char *method, const char *pattern,
                         int flags, hc_route_fn fn, void *arg);
void hc_http_server_set_hooks(struct hc_http_server *srv, hc_before_fn before, hc_after_fn after,
                              void *arg);
/* Gives one route (already added) its own body limit, e.g. an upload larger than the JSON
 * limit. A request gets it only when the head hook grants it, from the request head, before any
 * of the body is read; every other request is held to the server's limit. 0 or -1 when the route
 * does not exist. */
int hc_http_server_route_limit(struct hc_http_server *srv, const char *method, const char *pattern,
                               size_t max_body);
/* Head hook: called once a request's head is in, before its body is read, for a route with a
 * limit of its own. authorization is the first Authorization header (NULL without one). Return
 * non-zero to let the body reach the route's limit; the before-hook still runs as usual. */
typedef int (*hc_head_fn)(const struct hc_route *route, const char *authorization, void *arg);
void hc_http_server_set_head_hook(struct hc_http_server *srv, hc_head_fn head, void *arg);
/* Connection limits; values <= 0 select the process defaults (below). A max_connections larger
 * than the descriptor limit allows (RLIMIT_NOFILE less a reserve for everything else) is
 * lowered to fit, with a warning. */
void hc_http_server_set_guard(struct hc_http_server *srv, int max_connections, int deadline_ms);
/* Process-wide defaults for servers created afterwards (the daemons' --max-connections and
 * --request-deadline); <= 0 keeps HC_HTTP_DEFAULT_*. Call before starting threads. */
void hc_http_server_guard_defaults(int max_connections, int deadline_ms);
int hc_http_server_connections(const struct hc_http_server *srv); /* open right now */
int hc_http_server_max_connections(const struct hc_http_server *srv);

/* Runs one request that did not come from a connection (evhttp_request_new, with the command,
 * URI, headers and body filled in by the caller) through the same checks, router, hooks and
 * route as a request from the network: the fuzz targets' entry point (tests/fuzz/). The reply
 * goes nowhere; the caller keeps ev (mark it EVHTTP_REQ_DEFER_FREE: evhttp frees a
 * connection-less request when it is answered) and reads the status from it. */
struct evhttp_request;
void hc_http_server_handle(struct hc_http_server *srv, struct evhttp_request *ev);

/* Request accessors; strings are owned by the request and live until the reply. */
const char *hc_req_method(const struct hc_request *req);
const char *hc_req_path(const struct hc_request *req);
const char *hc_req_param(const struct hc_request *req, const char *name); /* path {param} */
const char *hc_req_query(struct hc_request *req, const char *name);       /* ?name=..., decoded */
const char *hc_req_header(const struct hc_request *req, const char *name);
/* Every header named name (any case), in the order sent: the first max go into values; returns
 * how many there are (more than max when some did not fit). hc_req_header sees only the first:
 * a check that must notice the same header repeated with another value uses this. */
size_t hc_req_header_values(const struct hc_request *req, const char *name, const char **values,
                            size_t max);
const char *hc_req_peer_addr(const struct hc_request *req);
/* Subject CN of the verified client certificate, or NULL without one. */
const char *hc_req_peer_cn(const struct hc_request *req);
/* Body parsed as a JSON object. On failure replies 400 invalid_json itself and returns NULL,
 * so a handler writes `if (!(body = hc_req_json(req))) return;`. The request owns the result. */
json_t *hc_req_json(struct hc_request *req);
/* Application data for the duration of the request (e.g. the authenticated token). */
/* The raw body (not NUL-terminated; the request owns it); *len receives its size. */
const unsigned char *hc_req_body(struct hc_request *req, size_t *len);
void hc_req_set_user(struct hc_request *req, void *user);
void *hc_req_user(const struct hc_request *req);

/* Replies; exactly one per request. body is stolen (may be NULL for an empty object). */
void hc_reply_json(struct hc_request *req, int status, json_t *body);
/* Adds a header line to the reply about to be sent (Location, Retry-After). */
void hc_reply_header(struct hc_request *req, const char *name, const char *value);
/* Requests that no route matches go to fn (which replies) instead of the 404/405. */
void hc_http_server_set_fallback(struct hc_http_server *srv, hc_route_fn fn, void *arg);
void hc_reply_error(struct hc_request *req, const struct hc_error *err);
/* Replies len bytes of data (copied) with the given Content-Type, e.g. a file download. */
void hc_reply_data(struct hc_request *req, int status, const char *content_type, const void *data,
                   size_t len);

/* Reference-counted immutable reply bytes: a cached reply is handed to the connection by
 * reference (evbuffer_add_reference), without a copy, and lives until the last connection
 * sending it and its cache have let go. Single-threaded (the server's loop thread). */
struct hc_blob {
    unsigned refs;
    size_t len;
    char data[];
};
/* A blob of len bytes copied from data, refs 1; NULL when out of memory. */
struct hc_blob *hc_blob_new(const void *data, size_t len);
void hc_blob_unref(struct hc_blob *b); /* accepts NULL */

/* 1 when an If-None-Match header value (NULL: absent) matches etag (a quoted entity tag):
 * "*", or one of a comma-separated list of tags, weak (W/) or not (RFC 9110 13.1.2 weak
 * comparison). Anything malformed simply does not match. */
int hc_etag_match(const char *if_none_match, const char *etag);
/* The raw request target (path and query, still percent-encoded), owned by the request. */
const char *hc_req_uri(const struct hc_request *req);
/* Replies a JSON blob (a reference is taken; the caller keeps its own) with an ETag header. */
void hc_reply_blob(struct hc_request *req, int status, const char *etag, struct hc_blob *b);
/* Replies 304 Not Modified with the ETag and no body. */
void hc_reply_not_modified(struct hc_request *req, const char *etag);

/* Streamed replies (the controller's watch): a 200 whose chunked body the handler goes on
 * writing after it returns, on the loop thread, until it closes the stream or the client goes.
 * The request's inactivity timeout no longer applies (a watcher sends nothing); instead a
 * client that reads nothing for write_timeout_s while output waits is disconnected, and the
 * owner sees how much output is pending (hc_stream_pending) to drop a slow reader sooner.
 * on_gone(stream, arg) is called once when the connection closes or fails; the stream is freed
 * right after it returns (do not touch it again). NULL when out of memory or already replied
 * (then the handler replies itself). */
struct hc_stream;
typedef void (*hc_stream_gone_fn)(struct hc_stream *s, void *arg);
struct hc_stream *hc_req_stream(struct hc_request *req, const char *content_type,
                                int write_timeout_s, hc_stream_gone_fn on_gone, void *arg);
/* Queues len bytes as one chunk. 0, or -1 when the stream can no longer be written. */
int hc_stream_write(struct hc_stream *s, const void *data, size_t len);
/* Bytes written by the owner and not yet taken by the client's socket. */
size_t hc_stream_pending(const struct hc_stream *s);
/* Closes the connection now (a slow or refused watcher); on_gone is not called; s is freed. */
void hc_stream_drop(struct hc_stream *s);

/* Deferred replies, for a handler whose answer needs work off the loop thread (a network probe
 * of several seconds) while the server keeps answering other requests. The handler calls
 * hc_req_defer and returns without replying; the server then leaves the request open. The
 * handle must be answered exactly once, on the loop thread, with hc_deferred_reply_json (which
 * frees it). In the deferred request the body (hc_req_json) and the path, method, peer and
 * route stay available; the query string does not. If the client has gone away meanwhile, the
 * reply is discarded (libevent keeps the request until then). Every pending handle must be
 * answered before hc_http_server_free: the server frees its connections' requests. Returns NULL
 * (out of memory, or already replied); the handler then replies itself. */
struct hc_deferred;
struct hc_deferred *hc_req_defer(struct hc_request *req);
/* The deferred request, for hc_req_* accessors; valid until the reply. */
struct hc_request *hc_deferred_request(struct hc_deferred *d);
/* Replies (body stolen, as hc_reply_json) and frees d. */
void hc_deferred_reply_json(struct hc_deferred *d, int status, json_t *body);
void hc_deferred_reply_error(struct hc_deferred *d, const struct hc_error *err);

#endif
