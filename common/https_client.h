/*
 * HTTPS client on libcurl. One client owns one CURLM multi handle: single requests and
 * fan-outs go through it, so connections to the same peer are reused and a fan-out to many
 * agents runs concurrently in one thread (no thread per node). Not thread-safe: one client per
 * thread.
 *
 * Every request has a timeout (connect and total); a peer that accepts a connection but never
 * answers (e.g. behind an MTU blackhole) ends as HC_ERR_TIMEOUT, never as a hang.
 */
#ifndef HC_COMMON_HTTPS_CLIENT_H
#define HC_COMMON_HTTPS_CLIENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct hc_tls_client_config {
    const char *ca_file;        /* trust anchors; or ca_pem */
    const char *ca_pem;         /* PEM text of the CA (used when ca_file is NULL) */
    const char *cert_file;      /* client certificate for mutual TLS, or NULL */
    const char *key_file;       /* its key */
    const char *crl_file;       /* PEM CRL of the CA, or NULL: the peer's certificate must not be
                                   listed in it. The file must exist; it is read for every new
                                   connection, and a client that sees it replaced (or removed)
                                   drops its kept-alive connections and TLS sessions first, so a
                                   revocation also ends connections verified before it */
    int insecure;               /* skip peer verification: only to fetch a CA that is then pinned
                                   by fingerprint (join), never for anything else */
    int ignore_expiry;          /* accept a peer certificate past its notAfter (the chain, the
                                   CRL and the pin are still checked): only to renew a node's
                                   expired certificate by its pinned key */
    long connect_timeout_ms;    /* default 3000 */
    const char *pinned_pubkey;  /* "sha256//BASE64[;sha256//...]": the peer's public key must be
                                   one of these (on top of the CA check), or NULL */
    const char *source_address; /* local address every connection is made from, or NULL */
    size_t max_response;        /* bytes of one answer's body; 0: HC_HTTP_DEFAULT_MAX_RESPONSE */
    size_t max_json_values;     /* JSON values in one answer, an array counting 2 and an object
                                   8 (what they cost jansson); 0: max_response / 16 */
};

/*
 * What one answer may hold. A peer may be hostile (a rogue agent): the body is counted while it
 * arrives and the transfer is aborted the moment it passes max_response (a Content-Length above
 * it is refused before the first body byte), so no more than max_response is ever buffered.
 * jansson then needs up to ~75 bytes of memory per byte of input ("{},{},..."), and has no
 * limit of its own on the number of values (its depth is capped at JSON_PARSER_MAX_DEPTH, 2048):
 * an answer weighing more than max_json_values values (objects and arrays weigh more, see
 * max_json_values) is refused before it is parsed. Both
 * refusals fail the call with HC_ERR_RESPONSE_TOO_LARGE and a message naming the URL and the
 * limit. The default suits a peer's JSON API; a client that downloads files sets its own.
 */
#define HC_HTTP_DEFAULT_MAX_RESPONSE (2u * 1024 * 1024)

struct hc_http_response {
    long status; /* HTTP status */
    char *raw;   /* body bytes, NUL-terminated */
    size_t raw_len;
    json_t *body;       /* parsed body when it is JSON, else NULL */
    long retry_after_s; /* a Retry-After header in seconds (its delta-seconds form, at most a
                           day); -1 without one, or for a date or anything else */
};
void hc_http_response_clear(struct hc_http_response *resp);

struct hc_http_client;
/* Returns NULL with err. Caller frees with hc_http_client_free. */
struct hc_http_client *hc_http_client_new(const struct hc_tls_client_config *tls,
                                          struct hc_error *err);
void hc_http_client_free(struct hc_http_client *c);

/* Chooses the public-key pin of the peer behind url, for clients whose peers each hold their
 * own key (the controller's agents). Writes the pin ("sha256//BASE64") and returns 0, or
 * returns -1 with err: the call then fails with that error and nothing is sent. */
typedef int (*hc_http_pin_fn)(void *arg, const char *url, char *pin, size_t len,
                              struct hc_error *err);
/* Every later request of c asks fn for its pin (a client-wide pinned_pubkey is then unused).
 * arg is borrowed for the client's life. */
void hc_http_client_set_pinner(struct hc_http_client *c, hc_http_pin_fn fn, void *arg);

/* Called for every request of c before anything is sent (single requests and each call of a
 * fan-out alike), with the method ("GET" when the call gave none) and the URL: may write one
 * extra "Name: value" header line into header (len bytes, "" on entry: none) and returns 0, or
 * refuses the request with -1 and err: the call then fails with that error and nothing is sent.
 * The controller's agent client uses it for fencing (controller/remote/agent_client.c). */
typedef int (*hc_http_before_fn)(void *arg, const char *method, const char *url, char *header,
                                 size_t len, struct hc_error *err);
/* arg is borrowed for the client's life. */
void hc_http_client_set_before(struct hc_http_client *c, hc_http_before_fn fn, void *arg);

/* One request. bearer may be NULL; body may be NULL (no body). Returns 0 when any HTTP
 * response arrived (check resp->status), -1 on transport failure with err code unreachable
 * (connect refused/no route), timeout, or tls_error. resp is owned by the caller (clear it). */
int hc_http_request(struct hc_http_client *c, const char *method, const char *url,
                    const char *bearer, const json_t *body, long timeout_ms,
                    struct hc_http_response *resp, struct hc_error *err);

/* Like hc_http_request, but sends len bytes of data as the body (see raw_body below) with
 * optional extra header lines. */
int hc_http_request_raw(struct hc_http_client *c, const char *method, const char *url,
                        const char *bearer, const void *data, size_t len, const char *content_type,
                        const char *const *headers, long timeout_ms, struct hc_http_response *resp,
                        struct hc_error *err);

/* A call in a fan-out: the caller fills the inputs, hc_http_fanout fills the outputs. */
struct hc_http_call {
    const char *method;
    const char *url;
    const char *bearer;
    const json_t *body;
    long timeout_ms;
    void *user;
    /* Optional: bytes sent as the body instead of JSON (body is then ignored), with their
     * Content-Type (default application/octet-stream), and extra "Name: value" header lines
     * (NULL-terminated array). Borrowed until the call ends. */
    const void *raw_body;
    size_t raw_len;
    const char *content_type;
    const char *const *headers;
    /* Optional: called on the fan-out's thread as soon as this call has finished, its outputs
     * set, while others still run; it may clear resp (a large answer then need not wait for the
     * slowest call). Not called for a call that could not start (its err says why). */
    void (*done)(struct hc_http_call *call);
    /* Optional: a streamed answer (the controller's watch). With a 200 status the body goes to
     * on_data as it arrives instead of into resp (no max_response: the callee bounds what it
     * keeps); returning other than len ends the transfer, as an error. The total timeout does
     * not apply: a stream that sends nothing for stream_idle_ms (a missed heartbeat) ends as
     * HC_ERR_TIMEOUT. stop, polled about every HC_HTTP_POLL_MS, ends it when it returns
     * non-zero (Ctrl-C). An answer of another status is buffered into resp as usual. */
    size_t (*on_data)(struct hc_http_call *call, const char *data, size_t len);
    int (*stop)(struct hc_http_call *call);
    long stream_idle_ms;
    /* outputs */
    int ok;                       /* 1 when an HTTP response arrived */
    struct hc_http_response resp; /* valid when ok; caller clears */
    struct hc_error err;          /* valid when !ok */
    int maybe_sent;               /* when !ok: 1 once a connection (and its TLS session) was up,
                                     so the request may have reached the peer; 0 when it never
                                     left (refused, no route, no name, the handshake failed or
                                     timed out), so sending it elsewhere cannot do it twice */
    int new_connection; /* 1 when the call opened a connection, 0 when it used a kept one */
    long elapsed_ms;
    int64_t finished_wall_ms; /* the wall clock (epoch ms) when the call ended: with elapsed_ms,
                                 when the peer answered (the poller's clock-skew estimate) */
};
/* Runs all calls concurrently, at most max_parallel at once (0 = unlimited), and returns
 * when every call has finished or timed out. Returns the number of calls with ok == 1. */
size_t hc_http_fanout(struct hc_http_client *c, struct hc_http_call *calls, size_t n,
                      size_t max_parallel);

#endif
