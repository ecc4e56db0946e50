/*
 * HTTPS client on libcurl's multi interface.
 *
 * Every request, single or part of a fan-out, is an easy handle added to the client's one CURLM,
 * so the multi handle's connection cache is reused across requests, and a share handle keeps TLS
 * sessions and DNS answers across easy handles. Each request carries a connect and a total
 * timeout: a peer that accepts but never answers ends as HC_ERR_TIMEOUT.
 *
 * Revocation (a client with a CRL file: the controller's agent client) is checked by the client
 * itself, not by OpenSSL in the handshake: it keeps the file's lists in memory, read again when
 * the file changes, and checks the peer's certificate of every request's connection, new or
 * kept, against them before the request goes out (hc_call_prereq); a revoked one aborts the
 * request and libcurl closes that connection. Connections to the other peers stay: the
 * controller's CRL changes with every certificate renewal, and dropping the whole cache then
 * made every node reconnect (1,000 TLS handshakes a poll cycle). TLS sessions are dropped on a
 * change (the share handle is replaced): one with a revoked peer would be refused on every use
 * instead of making a new handshake. Given CURLOPT_CRLFILE instead, libcurl would load the list
 * into a certificate store of every connection's own (a 1,000-entry list cost ~2 MB a
 * connection, 2.5 GB at 1,000 nodes); without it, the store built from the CA file is made once
 * and shared by the multi handle's connections (CURLOPT_CA_CACHE_TIMEOUT), so a changed CA file
 * (a CA rotation) replaces both handles: every connection is made again against it.
 */
#include "common/https_client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "common/json_util.h"
#include "common/pki.h"
#include "common/util.h"

#define HC_HTTP_DEFAULT_CONNECT_MS 3000L
#define HC_HTTP_DEFAULT_TOTAL_MS 10000L
#define HC_HTTP_POLL_MS 1000

struct hc_http_client {
    CURLM *multi;
    CURLSH *share;
    char *ca_file;
    char *ca_pem;
    char *cert_file;
    char *key_file;
    char *crl_file;
    struct stat ca_seen;       /* the CA file the connections were verified against */
    struct stat crl_seen;      /* the CRL file crls was read from; all zero when missing */
    STACK_OF(X509_CRL) * crls; /* its lists; NULL when it could not be read (fail closed) */
    char *pinned_pubkey;
    char *source_address; /* "host!ADDR" for CURLOPT_INTERFACE */
    hc_http_pin_fn pinner;
    void *pinner_arg;
    hc_http_before_fn before;
    void *before_arg;
    int insecure;
    int ignore_expiry;
    long connect_timeout_ms;
    size_t max_response, max_json_values;
};

/* State of one call while its easy handle is in the multi handle. */
struct hc_call_ctx {
    struct hc_http_call *call;
    const struct hc_http_client *client;
    enum { HC_CALL_SENT, HC_CALL_REVOKED, HC_CALL_NO_CRL } refused; /* by hc_call_prereq */
    char revoked[41]; /* HC_CALL_REVOKED: the peer certificate's serial */
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char *buf;
    size_t len, cap;
    int too_large; /* 1: the body passed max_response; 2: more than max_json_values values */
    size_t max_response, max_json_values;
    long timeout_ms;
    int64_t started_ms;
    long retry_after_s;
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t hc_curl_once = PTHREAD_ONCE_INIT;
static CURLcode hc_curl_init_rc = CURLE_FAILED_INIT;

static void hc_curl_global_init(void)
{
    hc_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void hc_http_response_clear(struct hc_http_response *resp)
{
    if (!resp)
        return;
    free(resp->raw);
    json_decref(resp->body);
    memset(resp, 0, sizeof(*resp));
}

static int hc_strdup_opt(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return src && !*dst ? -1 : 0;
}

/* Files are checked here so that a typo in a path is reported as such, not as a tls_error on
 * every request. */
static int hc_client_check_file(const char *what, const char *path, struct hc_error *err)
{
    if (path && access(path, R_OK) != 0)
        return hc_error_set_transport(err, HC_E(IO), "cannot read %s '%s': %s", what, path,
                                      strerror(errno));
    return 0;
}

static int hc_client_copy_config(struct hc_http_client *c, const struct hc_tls_client_config *tls,
                                 struct hc_error *err)
{
    if (hc_client_check_file("ca file", tls->ca_file, err) != 0 ||
        hc_client_check_file("client certificate", tls->cert_file, err) != 0 ||
        hc_client_check_file("client key", tls->key_file, err) != 0 ||
        hc_client_check_file("crl file", tls->crl_file, err) != 0)
        return -1;
    if (hc_strdup_opt(&c->ca_file, tls->ca_file) != 0 ||
        hc_strdup_opt(&c->ca_pem, tls->ca_file ? NULL : tls->ca_pem) != 0 ||
        hc_strdup_opt(&c->cert_file, tls->cert_file) != 0 ||
        hc_strdup_opt(&c->key_file, tls->key_file) != 0 ||
        hc_strdup_opt(&c->crl_file, tls->crl_file) != 0 ||
        hc_strdup_opt(&c->pinned_pubkey, tls->pinned_pubkey) != 0 ||
        (tls->source_address && asprintf(&c->source_address, "host!%s", tls->source_address) < 0))
        return hc_error_set_transport(err, HC_E(INTERNAL),
                                      "cannot create https client: out of memory");
    c->insecure = tls->insecure;
    c->ignore_expiry = tls->ignore_expiry;
    c->connect_timeout_ms =
        tls->connect_timeout_ms > 0 ? tls->connect_timeout_ms : HC_HTTP_DEFAULT_CONNECT_MS;
    c->max_response = tls->max_response ? tls->max_response : HC_HTTP_DEFAULT_MAX_RESPONSE;
    c->max_json_values = tls->max_json_values ? tls->max_json_values : c->max_response / 16;
    return 0;
}

/* The share handle (TLS sessions, DNS). One thread per client: no lock callbacks. */
static int hc_client_share_new(struct hc_http_client *c)
{
    c->share = curl_share_init();
    if (!c->share)
        return -1;
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    return 0;
}

/* The multi handle (connection cache) and the share handle. */
static int hc_client_handles_new(struct hc_http_client *c)
{
    c->multi = curl_multi_init();
    if (!c->multi || hc_client_share_new(c) != 0)
        return -1;
    /* Keep every agent's connection from one fan-out to the next: left to itself the cache
     * holds 4 x the transfers in flight, which falls to a handful as a fan-out drains, so that
     * a 1,000-node poll closed nearly all its connections each cycle and opened them again with
     * 2,000 TLS handshakes. A quarter of the open-files limit, like the fan-outs' parallelism. */
    size_t keep = hc_nofile_share(4, 64);
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)(keep < 65536 ? keep : 65536));
    return 0;
}

static void hc_client_handles_free(struct hc_http_client *c)
{
    if (c->multi)
        curl_multi_cleanup(c->multi);
    if (c->share)
        curl_share_cleanup(c->share);
    c->multi = NULL;
    c->share = NULL;
}

/* What identifies one version of the CRL file: a rewrite renames a new file into place (a new
 * inode), an edit in place changes the size or the change time. */
static void hc_client_file_stat(const char *path, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    if (path && stat(path, st) != 0)
        memset(st, 0, sizeof(*st));
}

static int hc_client_file_same(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Between requests (no easy handle is attached): a changed CA file drops every connection and
 * session (the shared certificate store was built from the old one); a changed CRL is read
 * again and the TLS sessions are dropped, while cached connections stay: each request checks
 * its own (header comment). A missing or unreadable CRL fails closed: hc_call_prereq refuses
 * every request. Handles that could not be made last time are made again here. */
static int hc_client_files_refresh(struct hc_http_client *c)
{
    struct stat now;
    if (c->ca_file) {
        hc_client_file_stat(c->ca_file, &now);
        if (!hc_client_file_same(&now, &c->ca_seen)) {
            c->ca_seen = now;
            hc_client_handles_free(c);
        }
    }
    if (c->crl_file) {
        hc_client_file_stat(c->crl_file, &now);
        if (!hc_client_file_same(&now, &c->crl_seen)) {
            c->crl_seen = now;
            sk_X509_CRL_pop_free(c->crls, X509_CRL_free);
            c->crls = hc_pki_crl_list_load(c->crl_file);
            if (c->share)
                curl_share_cleanup(c->share);
            c->share = NULL;
        }
    }
    if (c->multi && c->share)
        return 0;
    if (c->multi && !c->share && hc_client_share_new(c) == 0)
        return 0;
    hc_client_handles_free(c);
    return hc_client_handles_new(c);
}

struct hc_http_client *hc_http_client_new(const struct hc_tls_client_config *tls,
                                          struct hc_error *err)
{
    static const struct hc_tls_client_config none = {0};
    pthread_once(&hc_curl_once, hc_curl_global_init);
    if (hc_curl_init_rc != CURLE_OK) {
        hc_error_set_transport(err, HC_E(INTERNAL), "cannot initialise libcurl: %s",
                               curl_easy_strerror(hc_curl_init_rc));
        return NULL;
    }
    struct hc_http_client *c = calloc(1, sizeof(*c));
    if (!c) {
        hc_error_set_transport(err, HC_E(INTERNAL), "cannot create https client: out of memory");
        return NULL;
    }
    if (hc_client_copy_config(c, tls ? tls : &none, err) != 0)
        goto fail;
    hc_client_file_stat(c->ca_file, &c->ca_seen);
    hc_client_file_stat(c->crl_file, &c->crl_seen);
    if (c->crl_file)
        c->crls = hc_pki_crl_list_load(c->crl_file);
    if (hc_client_handles_new(c) != 0) {
        hc_error_set_transport(err, HC_E(INTERNAL), "cannot create https client: out of memory");
        goto fail;
    }
    return c;
fail:
    hc_http_client_free(c);
    return NULL;
}

void hc_http_client_free(struct hc_http_client *c)
{
    if (!c)
        return;
    hc_client_handles_free(c);
    sk_X509_CRL_pop_free(c->crls, X509_CRL_free);
    free(c->ca_file);
    free(c->ca_pem);
    free(c->cert_file);
    free(c->key_file);
    free(c->crl_file);
    free(c->pinned_pubkey);
    free(c->source_address);
    free(c);
}

/* ---------------------------------------------------------------- one call */

static size_t hc_call_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct hc_call_ctx *ctx = arg;
    size_t n = size * nmemb;
    long status = 0;
    if (ctx->call->on_data &&
        curl_easy_getinfo(ctx->easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200)
        return ctx->call->on_data(ctx->call, data, n);
    /* Counted as it arrives: returning short aborts the transfer at once (CURLE_WRITE_ERROR). */
    if (n > ctx->max_response || ctx->len + n > ctx->max_response) {
        ctx->too_large = 1;
        return 0;
    }
    if (ctx->len + n + 1 > ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap : 4096;
        while (cap < ctx->len + n + 1)
            cap *= 2;
        if (cap > ctx->max_response + 1)
            cap = ctx->max_response + 1; /* never more than the limit allows */
        char *p = realloc(ctx->buf, cap);
        if (!p)
            return 0;
        ctx->buf = p;
        ctx->cap = cap;
    }
    memcpy(ctx->buf + ctx->len, data, n);
    ctx->len += n;
    ctx->buf[ctx->len] = '\0';
    return n;
}

/* Header lines as they arrive: only Retry-After is kept (a controller electing a leader asks
 * hcctl to come back). Its delta-seconds form; an HTTP date is left out (-1). */
static size_t hc_call_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct hc_call_ctx *ctx = arg;
    size_t n = size * nmemb, name = sizeof("Retry-After:") - 1;
    if (n > name && strncasecmp(data, "Retry-After:", name) == 0) {
        size_t i = name;
        long seconds = 0;
        while (i < n && (data[i] == ' ' || data[i] == '\t'))
            i++;
        size_t digits = i;
        for (; i < n && isdigit((unsigned char)data[i]) && seconds <= 86400; i++)
            seconds = seconds * 10 + (data[i] - '0');
        while (i < n && isspace((unsigned char)data[i]))
            i++;
        ctx->retry_after_s = i == n && i > digits ? (seconds < 86400 ? seconds : 86400) : -1;
    }
    return n;
}

/* CURLOPT_SSL_CTX_FUNCTION of an ignore_expiry client: the validity dates are not checked. */
static CURLcode hc_call_no_time_check(CURL *e, void *ssl_ctx, void *arg)
{
    (void)e;
    (void)arg;
    X509_STORE_set_flags(SSL_CTX_get_cert_store((SSL_CTX *)ssl_ctx), X509_V_FLAG_NO_CHECK_TIME);
    return CURLE_OK;
}

/* Called once the request's connection is up, new or kept, before the request goes out: the
 * peer's certificate must not be in the CRL as read last (a connection kept from before it was
 * revoked is refused too). An abort fails the request and libcurl closes the connection. */
static int hc_call_prereq(void *arg, char *peer_ip, char *local_ip, int peer_port, int local_port)
{
    struct hc_call_ctx *ctx = arg;
    const STACK_OF(X509_CRL) *crls = ctx->client->crls;
    struct curl_tlssessioninfo *tls = NULL;
    (void)peer_ip;
    (void)local_ip;
    (void)peer_port;
    (void)local_port;
    if (!crls) { /* no list to check against */
        ctx->refused = HC_CALL_NO_CRL;
        return CURL_PREREQFUNC_ABORT;
    }
    if (curl_easy_getinfo(ctx->easy, CURLINFO_TLS_SSL_PTR, &tls) != CURLE_OK || !tls ||
        tls->backend != CURLSSLBACKEND_OPENSSL || !tls->internals)
        return CURL_PREREQFUNC_OK; /* not TLS: verify_peer is off, nothing was verified */
    X509 *peer = SSL_get0_peer_certificate(tls->internals);
    if (!peer || !hc_pki_crl_list_revoked(crls, peer, ctx->revoked))
        return CURL_PREREQFUNC_OK;
    ctx->refused = HC_CALL_REVOKED;
    return CURL_PREREQFUNC_ABORT;
}

static int hc_call_set_tls(struct hc_http_client *c, CURL *e, struct hc_call_ctx *ctx)
{
    int rc = 0;
    if (c->ca_file) {
        rc |= curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
        rc |= curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    } else if (c->ca_pem) {
        struct curl_blob blob = {c->ca_pem, strlen(c->ca_pem), CURL_BLOB_COPY};
        rc |= curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
        /* The blob replaces the CA file; the CA path would add the system store. */
        rc |= curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (c->cert_file)
        rc |= curl_easy_setopt(e, CURLOPT_SSLCERT, c->cert_file);
    if (c->key_file)
        rc |= curl_easy_setopt(e, CURLOPT_SSLKEY, c->key_file);
    /* OpenSSL then checks the peer's certificate (the leaf) against the list. */
    if (c->crl_file) {
        rc |= curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, hc_call_prereq);
        rc |= curl_easy_setopt(e, CURLOPT_PREREQDATA, ctx);
    }
    if (c->pinned_pubkey && !c->pinner)
        rc |= curl_easy_setopt(e, CURLOPT_PINNEDPUBLICKEY, c->pinned_pubkey);
    if (c->source_address)
        rc |= curl_easy_setopt(e, CURLOPT_INTERFACE, c->source_address);
    if (c->ignore_expiry)
        rc |= curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, hc_call_no_time_check);
    if (c->insecure) {
        rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        rc |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    rc |= curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    return rc;
}

/* GET has no body; any other method sends the JSON body (or the raw one), or an empty one. */
static int hc_call_set_method(struct hc_call_ctx *ctx, const char *method)
{
    CURL *e = ctx->easy;
    const struct hc_http_call *call = ctx->call;
    int rc = 0;
    if (strcmp(method, "GET") == 0 && !ctx->body && !call->raw_body)
        return curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (strcmp(method, "HEAD") == 0)
        return curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (call->raw_body) {
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, call->raw_body);
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->raw_len);
    } else {
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, ctx->body ? ctx->body : "");
        rc |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                               (curl_off_t)(ctx->body ? strlen(ctx->body) : 0));
    }
    if (strcmp(method, "POST") != 0)
        rc |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    return rc;
}

/* Appends to ctx->headers; on failure the list so far stays owned by ctx. */
static int hc_call_add_header(struct hc_call_ctx *ctx, const char *line)
{
    struct curl_slist *h = curl_slist_append(ctx->headers, line);
    if (!h)
        return -1;
    ctx->headers = h;
    return 0;
}

static int hc_call_set_headers(struct hc_call_ctx *ctx)
{
    const struct hc_http_call *call = ctx->call;
    char auth[2048];
    int rc = hc_call_add_header(ctx, "Accept: application/json");
    /* No "Expect: 100-continue" round trip for large bodies. */
    rc |= hc_call_add_header(ctx, "Expect:");
    /* Without a JSON body, drop the form Content-Type curl adds to a POST. */
    if (call->raw_body) {
        char ctype[256];
        snprintf(ctype, sizeof(ctype), "Content-Type: %s",
                 call->content_type ? call->content_type : "application/octet-stream");
        rc |= hc_call_add_header(ctx, ctype);
    } else {
        rc |=
            hc_call_add_header(ctx, ctx->body ? "Content-Type: application/json" : "Content-Type:");
    }
    for (size_t i = 0; call->headers && call->headers[i]; i++)
        rc |= hc_call_add_header(ctx, call->headers[i]);
    if (call->bearer) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", call->bearer);
        rc |= hc_call_add_header(ctx, auth);
    }
    if (rc != 0)
        return -1;
    return curl_easy_setopt(ctx->easy, CURLOPT_HTTPHEADER, ctx->headers);
}

/* libcurl calls it about once a second and on every transfer step: the caller's stop. */
static int hc_call_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                            curl_off_t ulnow)
{
    struct hc_call_ctx *ctx = arg;
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return ctx->call->stop(ctx->call) != 0;
}

static int hc_call_configure(struct hc_http_client *c, struct hc_call_ctx *ctx)
{
    CURL *e = ctx->easy;
    const struct hc_http_call *call = ctx->call;
    int rc = 0;
    rc |= curl_easy_setopt(e, CURLOPT_URL, call->url);
    rc |= curl_easy_setopt(e, CURLOPT_PRIVATE, ctx);
    rc |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ctx->errbuf);
    rc |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    rc |= curl_easy_setopt(e, CURLOPT_SHARE, c->share);
    rc |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
    rc |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    rc |= curl_easy_setopt(e, CURLOPT_USERAGENT, "hcctl/" HC_VERSION);
    rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ctx->timeout_ms);
    rc |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                           c->connect_timeout_ms < ctx->timeout_ms ? c->connect_timeout_ms
                                                                   : ctx->timeout_ms);
    /* A Content-Length above the limit is refused before the body (CURLE_FILESIZE_EXCEEDED). */
    rc |= curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_response);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, hc_call_write);
    rc |= curl_easy_setopt(e, CURLOPT_WRITEDATA, ctx);
    rc |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, hc_call_header);
    rc |= curl_easy_setopt(e, CURLOPT_HEADERDATA, ctx);
    if (call->on_data) {
        /* a stream: no total timeout and no size limit; a silent one ends after idle time */
        long idle_s = call->stream_idle_ms > 999 ? call->stream_idle_ms / 1000 : 1;
        rc |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 0L);
        rc |= curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)0);
        rc |= curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
        rc |= curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, idle_s);
    }
    if (call->stop) {
        rc |= curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
        rc |= curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, hc_call_progress);
        rc |= curl_easy_setopt(e, CURLOPT_XFERINFODATA, ctx);
    }
    rc |= hc_call_set_tls(c, e, ctx);
    rc |= hc_call_set_method(ctx, call->method ? call->method : "GET");
    rc |= hc_call_set_headers(ctx);
    return rc ? -1 : 0;
}

static void hc_call_release(struct hc_http_client *c, struct hc_call_ctx *ctx)
{
    if (ctx->easy) {
        curl_multi_remove_handle(c->multi, ctx->easy);
        curl_easy_cleanup(ctx->easy);
    }
    curl_slist_free_all(ctx->headers);
    free(ctx->body);
    free(ctx->buf);
    memset(ctx, 0, sizeof(*ctx));
}

/* Prepares and adds the easy handle. On failure the call is finished with its error. */
static int hc_call_start(struct hc_http_client *c, struct hc_call_ctx *ctx,
                         struct hc_http_call *call)
{
    ctx->call = call;
    ctx->client = c;
    ctx->max_response = c->max_response;
    ctx->max_json_values = c->max_json_values;
    ctx->started_ms = hc_mono_ms();
    ctx->retry_after_s = -1;
    ctx->timeout_ms = call->timeout_ms > 0 ? call->timeout_ms : HC_HTTP_DEFAULT_TOTAL_MS;
    if (!call->url) {
        hc_error_set_transport(&call->err, HC_E(INVALID_ARGUMENT), "request without a url");
        goto fail;
    }
    if (call->body && !call->raw_body && !(ctx->body = hc_json_dump(call->body))) {
        hc_error_set_transport(&call->err, HC_E(INTERNAL), "cannot serialise body for '%s'",
                               call->url);
        goto fail;
    }
    char pin[128], line[256] = "";
    if (c->pinner && c->pinner(c->pinner_arg, call->url, pin, sizeof(pin), &call->err) < 0)
        goto fail;
    if (c->before && c->before(c->before_arg, call->method ? call->method : "GET", call->url, line,
                               sizeof(line), &call->err) < 0)
        goto fail;
    /* hc_call_set_headers appends the call's own headers after this one */
    if (line[0] && hc_call_add_header(ctx, line) < 0) {
        hc_error_set_transport(&call->err, HC_E(INTERNAL), "cannot prepare request to '%s'",
                               call->url);
        goto fail;
    }
    if (!(ctx->easy = curl_easy_init()) || hc_call_configure(c, ctx) != 0 ||
        (c->pinner && curl_easy_setopt(ctx->easy, CURLOPT_PINNEDPUBLICKEY, pin) != CURLE_OK) ||
        curl_multi_add_handle(c->multi, ctx->easy) != CURLM_OK) {
        hc_error_set_transport(&call->err, HC_E(INTERNAL), "cannot prepare request to '%s'",
                               call->url);
        goto fail;
    }
    return 0;
fail:
    hc_call_release(c, ctx);
    return -1;
}

/* ---------------------------------------------------------------- errors */

/* curl's and strerror's messages start with a capital; ours are lowercase (acronyms such as
 * "SSL" are left alone). */
static const char *hc_lower_first(char *s)
{
    if (s[0] && islower((unsigned char)s[1]))
        s[0] = (char)tolower((unsigned char)s[0]);
    return s;
}

static int hc_curl_is_tls(CURLcode rc)
{
    switch (rc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
        return 1;
    default:
        return 0;
    }
}

/*
 * A handshake the peer aborted. With TLS 1.3 the server judges our client certificate after
 * our side of the handshake has completed, so its refusal (an alert, then a close) arrives while
 * curl sends the request or waits for the answer: curl reports a send or receive error, not a
 * TLS code, and depending on timing it read the alert or only hit the closed socket (EPIPE).
 * So such an error counts as TLS when OpenSSL named an alert, or when the connection was opened
 * for this very request and closed before a single response byte.
 */
static int hc_call_peer_aborted_tls(struct hc_call_ctx *ctx, CURLcode rc)
{
    long connects = 0, header_size = 0;
    if (rc != CURLE_RECV_ERROR && rc != CURLE_SEND_ERROR && rc != CURLE_GOT_NOTHING)
        return 0;
    if (strstr(ctx->errbuf, " alert "))
        return 1;
    curl_easy_getinfo(ctx->easy, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(ctx->easy, CURLINFO_HEADER_SIZE, &header_size);
    return rc != CURLE_GOT_NOTHING && connects > 0 && header_size == 0;
}

/* Says what went wrong in TLS terms, without OpenSSL's error-queue noise:
 * "OpenSSL SSL_read: OpenSSL/3.0.x: error:0A000418:SSL routines::tlsv1 alert unknown ca, errno 0"
 * becomes "peer sent tlsv1 alert unknown ca". */
static void hc_tls_detail(const char *errbuf, CURLcode rc, char *detail, size_t len)
{
    const char *routines = strstr(errbuf, "::");
    if (strstr(errbuf, " alert ") && routines)
        snprintf(detail, len, "peer sent %.*s", (int)strcspn(routines + 2, ","), routines + 2);
    else if (!hc_curl_is_tls(rc))
        snprintf(detail, len, "the peer closed the connection right after the handshake");
}

/* An MTU blackhole shows up here: the TCP handshake passes, the server's certificate flight
 * (or any large answer) never arrives.
 *
 * The message states the limit that fired. While the connection is being made (TCP and TLS
 * handshakes) that is curl's connect timeout, the client's connect_timeout_ms when it is shorter
 * than the request's (an agent client: 3 s or less, while a probe request may allow 12 s). It is
 * not stored with the call, so it is read off the clock, as curl gives up at that limit (a few ms
 * late at most); the request's timeout caps it. Once connected, the request's own timeout is
 * what ran out. */
static void hc_call_timeout_error(struct hc_call_ctx *ctx, struct hc_error *err)
{
    const char *url = ctx->call->url;
    curl_off_t tls_us = 0;
    long took = (long)(hc_mono_ms() - ctx->started_ms);
    curl_easy_getinfo(ctx->easy, CURLINFO_APPCONNECT_TIME_T, &tls_us);
    if (tls_us == 0)
        hc_error_set_transport(err, HC_E(TIMEOUT),
                               "cannot reach '%s': connection timed out after %ld ms", url,
                               took < ctx->timeout_ms ? took : ctx->timeout_ms);
    else
        hc_error_set_transport(err, HC_E(TIMEOUT), "no answer from '%s' within %ld ms", url,
                               ctx->timeout_ms);
    hc_error_hint(err, "the peer is down or overloaded, or large packets to it vanish (an MTU "
                       "blackhole: try 'hcctl net check-jumbo')");
}

static void hc_call_too_large(struct hc_call_ctx *ctx, struct hc_error *err)
{
    if (ctx->too_large == 2)
        hc_error_set(err, HC_E(RESPONSE_TOO_LARGE),
                     "the answer from '%s' holds more than %zu JSON values (the limit); "
                     "refused unparsed",
                     ctx->call->url, ctx->max_json_values);
    else
        hc_error_set(err, HC_E(RESPONSE_TOO_LARGE),
                     "the answer from '%s' exceeds the limit of %zu bytes; transfer aborted",
                     ctx->call->url, ctx->max_response);
    hc_error_hint(err, "no legitimate answer is that large: the peer is misbehaving or is not "
                       "what it claims to be");
}

static void hc_call_error(struct hc_call_ctx *ctx, CURLcode rc, struct hc_error *err)
{
    const char *url = ctx->call->url;
    char detail[CURL_ERROR_SIZE];
    long os_errno = 0;
    snprintf(detail, sizeof(detail), "%s", ctx->errbuf[0] ? ctx->errbuf : curl_easy_strerror(rc));
    hc_lower_first(detail);
    curl_easy_getinfo(ctx->easy, CURLINFO_OS_ERRNO, &os_errno);
    if (rc == CURLE_COULDNT_CONNECT && os_errno) {
        snprintf(detail, sizeof(detail), "%s", strerror((int)os_errno));
        hc_error_set_transport(err, HC_E(UNREACHABLE), "cannot reach '%s': %s", url,
                               hc_lower_first(detail));
    } else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) {
        hc_error_set_transport(err, HC_E(UNREACHABLE), "cannot reach '%s': %s", url, detail);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        hc_call_timeout_error(ctx, err);
    } else if (ctx->refused == HC_CALL_NO_CRL) {
        hc_error_set_transport(err, HC_E(TLS),
                               "no request to '%s': the revocation list '%s' cannot be read", url,
                               ctx->client->crl_file);
        hc_error_hint(err, "it is rewritten when a certificate is revoked or renewed");
    } else if (ctx->refused == HC_CALL_REVOKED) {
        hc_error_set_transport(err, HC_E(TLS),
                               "no request to '%s': its certificate (serial %s) is revoked", url,
                               ctx->revoked);
        hc_error_hint(err, "the certificate was renewed or the node removed; a node that still "
                           "serves it must be enrolled again");
    } else if (hc_curl_is_tls(rc) || hc_call_peer_aborted_tls(ctx, rc)) {
        hc_tls_detail(ctx->errbuf, rc, detail, sizeof(detail));
        hc_error_set_transport(err, HC_E(TLS), "tls handshake with '%s' failed: %s", url, detail);
        hc_error_hint(err, "check the trusted CA, the peer's certificate and this client's "
                           "certificate (the peer may refuse it)");
    } else if ((rc == CURLE_WRITE_ERROR && ctx->too_large) || rc == CURLE_FILESIZE_EXCEEDED) {
        hc_call_too_large(ctx, err);
    } else if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
        hc_error_set_transport(err, HC_E(INVALID_ARGUMENT), "invalid url '%s': %s", url, detail);
    } else {
        hc_error_set_transport(err, HC_E(UNREACHABLE), "request to '%s' failed: %s", url, detail);
    }
}

/* 1 when text, read as JSON, weighs more than max values. Not a parser: it counts what starts a
 * value inside an array or an object outside strings, an upper bound of what jansson would
 * allocate, in one pass over bytes already bounded by max_response. The ',' and ':' between
 * members count 1; an array 2 and an object HC_JSON_OBJECT_WEIGHT, for what each costs jansson
 * over a scalar (an object starts with a hash table: "{}," is ~230 bytes parsed, "0," ~30). */
#define HC_JSON_OBJECT_WEIGHT 8
static int hc_json_values_over(const char *text, size_t len, size_t max)
{
    size_t values = 1;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_string = 0;
            continue;
        }
        if (ch == '"')
            in_string = 1;
        else if (ch == ',' || ch == ':')
            values++;
        else if (ch == '[')
            values += 2;
        else if (ch == '{')
            values += HC_JSON_OBJECT_WEIGHT;
        if (values > max)
            return 1;
    }
    return 0;
}

/* Moves the response (or the error) into the call and releases the handle. */
static void hc_call_finish(struct hc_http_client *c, struct hc_call_ctx *ctx, CURLcode rc)
{
    struct hc_http_call *call = ctx->call;
    long connects = 0;
    call->elapsed_ms = (long)(hc_mono_ms() - ctx->started_ms);
    call->finished_wall_ms = hc_now_ms();
    curl_easy_getinfo(ctx->easy, CURLINFO_NUM_CONNECTS, &connects);
    call->new_connection = connects > 0;
    if (rc != CURLE_OK) {
        /* libcurl stamps the TLS handshake's end on a new connection and on a reused one alike
         * (at least 1 us), and the request goes out only after it. */
        curl_off_t tls_us = 0;
        curl_easy_getinfo(ctx->easy, CURLINFO_APPCONNECT_TIME_T, &tls_us);
        call->maybe_sent = tls_us > 0;
        hc_call_error(ctx, rc, &call->err);
        hc_call_release(c, ctx);
        return;
    }
    if (!ctx->buf && !(ctx->buf = calloc(1, 1))) {
        hc_error_set_transport(&call->err, HC_E(INTERNAL), "cannot store response from '%s'",
                               call->url);
        hc_call_release(c, ctx);
        return;
    }
    if (hc_json_values_over(ctx->buf, ctx->len, ctx->max_json_values)) {
        ctx->too_large = 2;
        hc_call_too_large(ctx, &call->err);
        hc_call_release(c, ctx);
        return;
    }
    curl_easy_getinfo(ctx->easy, CURLINFO_RESPONSE_CODE, &call->resp.status);
    call->resp.retry_after_s = ctx->retry_after_s;
    call->resp.raw = ctx->buf;
    call->resp.raw_len = ctx->len;
    call->resp.body = ctx->len ? json_loadb(ctx->buf, ctx->len, 0, NULL) : NULL;
    ctx->buf = NULL;
    call->ok = 1;
    hc_call_release(c, ctx);
}

/* ---------------------------------------------------------------- fan-out */

static void hc_fanout_collect(struct hc_http_client *c, size_t *running)
{
    CURLMsg *msg;
    int queued;
    while ((msg = curl_multi_info_read(c->multi, &queued))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct hc_call_ctx *ctx = NULL;
        CURLcode rc = msg->data.result; /* msg is invalid once the handle is removed */
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&ctx);
        struct hc_http_call *call = ctx->call;
        hc_call_finish(c, ctx, rc);
        (*running)--;
        if (call->done)
            call->done(call);
    }
}

/* Only on a broken multi handle: fail what is still running or not yet started rather than
 * loop forever. */
static void hc_fanout_abort(struct hc_http_client *c, struct hc_call_ctx *ctxs,
                            struct hc_http_call *calls, size_t n, CURLMcode mc)
{
    for (size_t i = 0; i < n; i++) {
        if (calls[i].ok || calls[i].err.code[0])
            continue;
        hc_error_set_transport(&calls[i].err, HC_E(INTERNAL), "request to '%s' failed: %s",
                               calls[i].url, curl_multi_strerror(mc));
        if (ctxs[i].easy)
            hc_call_release(c, &ctxs[i]);
    }
}

static void hc_fanout_reset(struct hc_http_call *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        calls[i].ok = 0;
        calls[i].maybe_sent = 0;
        memset(&calls[i].resp, 0, sizeof(calls[i].resp));
        hc_error_clear(&calls[i].err);
        calls[i].elapsed_ms = 0;
        calls[i].new_connection = 0;
    }
}

size_t hc_http_fanout(struct hc_http_client *c, struct hc_http_call *calls, size_t n,
                      size_t max_parallel)
{
    hc_fanout_reset(calls, n);
    struct hc_call_ctx *ctxs = NULL;
    if (hc_client_files_refresh(c) == 0)
        ctxs = n ? calloc(n, sizeof(*ctxs)) : NULL;
    for (size_t i = 0; n && !ctxs && i < n; i++)
        hc_error_set_transport(&calls[i].err, HC_E(INTERNAL),
                               "cannot start request: out of memory");
    if (max_parallel == 0 || max_parallel > n)
        max_parallel = n;
    size_t next = 0, running = 0, ok = 0;
    while (ctxs && (next < n || running > 0)) {
        for (; next < n && running < max_parallel; next++)
            if (hc_call_start(c, &ctxs[next], &calls[next]) == 0)
                running++;
        int still = 0;
        CURLMcode mc = curl_multi_perform(c->multi, &still);
        hc_fanout_collect(c, &running);
        if (mc == CURLM_OK && running > 0 && (next == n || running == max_parallel))
            mc = curl_multi_poll(c->multi, NULL, 0, HC_HTTP_POLL_MS, NULL);
        if (mc != CURLM_OK) {
            hc_fanout_abort(c, ctxs, calls, n, mc);
            break;
        }
    }
    for (size_t i = 0; i < n; i++)
        ok += calls[i].ok ? 1 : 0;
    free(ctxs);
    return ok;
}

static int hc_request_one(struct hc_http_client *c, struct hc_http_call *callp,
                          struct hc_http_response *resp, struct hc_error *err)
{
    struct hc_http_call call = *callp;
    hc_http_fanout(c, &call, 1, 1);
    if (!call.ok) {
        if (resp)
            memset(resp, 0, sizeof(*resp));
        if (err)
            *err = call.err;
        return -1;
    }
    if (resp)
        *resp = call.resp;
    else
        hc_http_response_clear(&call.resp);
    return 0;
}

int hc_http_request(struct hc_http_client *c, const char *method, const char *url,
                    const char *bearer, const json_t *body, long timeout_ms,
                    struct hc_http_response *resp, struct hc_error *err)
{
    struct hc_http_call call = {
        .method = method, .url = url, .bearer = bearer, .body = body, .timeout_ms = timeout_ms};
    return hc_request_one(c, &call, resp, err);
}

int hc_http_request_raw(struct hc_http_client *c, const char *method, const char *url,
                        const char *bearer, const void *data, size_t len, const char *content_type,
                        const char *const *headers, long timeout_ms, struct hc_http_response *resp,
                        struct hc_error *err)
{
    struct hc_http_call call = {.method = method,
                                .url = url,
                                .bearer = bearer,
                                .raw_body = data ? data : "",
                                .raw_len = len,
                                .content_type = content_type,
                                .headers = headers,
                                .timeout_ms = timeout_ms};
    return hc_request_one(c, &call, resp, err);
}

void hc_http_client_set_pinner(struct hc_http_client *c, hc_http_pin_fn fn, void *arg)
{
    c->pinner = fn;
    c->pinner_arg = arg;
}

void hc_http_client_set_before(struct hc_http_client *c, hc_http_before_fn fn, void *arg)
{
    c->before = fn;
    c->before_arg = arg;
}
