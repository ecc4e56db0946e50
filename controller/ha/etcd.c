/* The etcd v3 JSON-gateway client (etcd.h). */
#include "controller/ha/etcd.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/https_client.h"
#include "common/log.h"

/* An answer of etcd's: a page of rows is at most a few MiB (the range pages are sized for it). */
#define ETCD_MAX_RESPONSE (32u * 1024 * 1024)

struct hc_etcd {
    pthread_mutex_t lock;
    struct hc_http_client *http;
    const char *endpoints[HC_ETCD_MAX_ENDPOINTS];
    char *endpoint_buf;
    size_t nendpoints;
    size_t current;
    long timeout_ms;
};

/* Splits urls into endpoints (each https://HOST:PORT, no path). */
static int parse_endpoints(struct hc_etcd *e, const char *urls, int plain_ok, struct hc_error *err)
{
    if (!urls || !urls[0])
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "no etcd endpoint given");
    if (strlen(urls) > 4096)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "the etcd endpoint list is too long");
    if (!(e->endpoint_buf = strdup(urls)))
        return hc_error_set(err, HC_E(INTERNAL), "out of memory");
    char *save = NULL;
    for (char *u = strtok_r(e->endpoint_buf, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        size_t n = strlen(u);
        while (n > 0 && u[n - 1] == '/')
            u[--n] = '\0';
        int https = strncmp(u, "https://", 8) == 0;
        const char *host = u + (https ? 8 : 7);
        if ((!https && !(plain_ok && strncmp(u, "http://", 7) == 0)) || !host[0] ||
            strpbrk(host, "/?#@ \t"))
            return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                                "etcd endpoint '%s' is not https://HOST:PORT", u);
        if (e->nendpoints == HC_ETCD_MAX_ENDPOINTS)
            return hc_error_set(err, HC_E(INVALID_ARGUMENT), "more than %d etcd endpoints",
                                HC_ETCD_MAX_ENDPOINTS);
        for (size_t i = 0; i < e->nendpoints; i++)
            if (strcmp(e->endpoints[i], u) == 0)
                return hc_error_set(err, HC_E(INVALID_ARGUMENT), "etcd endpoint '%s' given twice",
                                    u);
        e->endpoints[e->nendpoints++] = u;
    }
    if (!e->nendpoints)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "no etcd endpoint given");
    return 0;
}

struct hc_etcd *hc_etcd_new(const char *urls, const struct hc_etcd_tls *tls, long timeout_ms,
                            struct hc_error *err)
{
    struct hc_etcd *e = calloc(1, sizeof(*e));
    if (!e) {
        hc_error_set(err, HC_E(INTERNAL), "out of memory");
        return NULL;
    }
    pthread_mutex_init(&e->lock, NULL);
    e->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    if (parse_endpoints(e, urls, tls == NULL, err) < 0)
        goto fail;
    struct hc_tls_client_config cfg = {
        .ca_file = tls ? tls->ca_file : NULL,
        .cert_file = tls ? tls->cert_file : NULL,
        .key_file = tls ? tls->key_file : NULL,
        .connect_timeout_ms = e->timeout_ms < 1000 ? e->timeout_ms : 1000,
        .max_response = ETCD_MAX_RESPONSE,
        .max_json_values = ETCD_MAX_RESPONSE / 8,
    };
    if (!(e->http = hc_http_client_new(&cfg, err))) {
        hc_error_prefix(err, "cannot create the etcd client");
        goto fail;
    }
    return e;
fail:
    hc_etcd_free(e);
    return NULL;
}

void hc_etcd_free(struct hc_etcd *e)
{
    if (!e)
        return;
    hc_http_client_free(e->http);
    pthread_mutex_destroy(&e->lock);
    free(e->endpoint_buf);
    free(e);
}

size_t hc_etcd_endpoints(const struct hc_etcd *e, const char ***out)
{
    *out = (const char **)e->endpoints;
    return e->nendpoints;
}

/* One POST to one endpoint; the lock is held. */
static json_t *call_locked(struct hc_etcd *e, const char *endpoint, const char *path, json_t *body,
                           long timeout_ms, int *transport, struct hc_error *err)
{
    char url[600];
    snprintf(url, sizeof(url), "%s%s", endpoint, path);
    struct hc_http_response resp = {0};
    *transport = 0;
    if (hc_http_request(e->http, "POST", url, NULL, body, timeout_ms, &resp, err) < 0) {
        *transport = 1;
        return NULL;
    }
    json_t *answer = NULL;
    if (resp.status == 200 && json_is_object(resp.body)) {
        answer = json_incref(resp.body);
    } else {
        const char *msg = json_string_value(json_object_get(resp.body, "error"));
        if (!msg)
            msg = json_string_value(json_object_get(resp.body, "message"));
        *transport = resp.status >= 500;
        hc_error_set(err, HC_E(ETCD), "etcd %s answered %ld to %s: %.200s", endpoint, resp.status,
                     path, msg ? msg : (resp.raw ? resp.raw : ""));
    }
    hc_http_response_clear(&resp);
    return answer;
}

json_t *hc_etcd_call(struct hc_etcd *e, const char *path, json_t *body, struct hc_error *err)
{
    pthread_mutex_lock(&e->lock);
    json_t *answer = NULL;
    struct hc_error last = {0};
    for (size_t tried = 0; tried < e->nendpoints; tried++) {
        size_t i = (e->current + tried) % e->nendpoints;
        int transport;
        answer = call_locked(e, e->endpoints[i], path, body, e->timeout_ms, &transport, &last);
        if (answer) {
            e->current = i;
            break;
        }
        if (!transport)
            break; /* etcd itself refused: another member would say the same */
        HC_DEBUG("etcd %s: %s", e->endpoints[i], last.message);
    }
    pthread_mutex_unlock(&e->lock);
    if (!answer && err) {
        hc_error_set(err, HC_E(ETCD), "%s", last.message);
        if (last.hint[0])
            hc_error_hint(err, "%s", last.hint);
    }
    return answer;
}

json_t *hc_etcd_call_at(struct hc_etcd *e, const char *endpoint, const char *path, json_t *body,
                        long timeout_ms, struct hc_error *err)
{
    int transport;
    pthread_mutex_lock(&e->lock);
    json_t *answer = call_locked(e, endpoint, path, body, timeout_ms, &transport, err);
    pthread_mutex_unlock(&e->lock);
    return answer;
}

char *hc_etcd_b64(const void *data, size_t len)
{
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

char *hc_etcd_unb64(const char *text, size_t *len)
{
    size_t n = strlen(text);
    if (n % 4 != 0)
        return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    int got = n ? EVP_DecodeBlock(out, (const unsigned char *)text, (int)n) : 0;
    if (got < 0) {
        free(out);
        return NULL;
    }
    /* EVP_DecodeBlock counts the padding's bytes as data. */
    while (n > 0 && text[n - 1] == '=' && got > 0) {
        got--;
        n--;
    }
    out[got] = '\0';
    if (len)
        *len = (size_t)got;
    return (char *)out;
}

int64_t hc_etcd_int(const json_t *obj, const char *name, int64_t def)
{
    const json_t *v = json_object_get(obj, name);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return def;
}

static json_t *b64_string(const void *data, size_t len)
{
    char *b = hc_etcd_b64(data, len);
    json_t *s = b ? json_string(b) : NULL;
    free(b);
    return s;
}

/* The end of a prefix range: the prefix with its last byte incremented. */
static json_t *prefix_end(const char *key)
{
    size_t n = strlen(key);
    char *end = strdup(key);
    if (!end || !n) {
        free(end);
        return b64_string("\0", 1);
    }
    end[n - 1]++;
    json_t *s = b64_string(end, n);
    free(end);
    return s;
}

json_t *hc_etcd_op_put(const char *key, const char *value, size_t value_len, int64_t lease)
{
    json_t *put = json_object();
    json_object_set_new(put, "key", b64_string(key, strlen(key)));
    json_object_set_new(put, "value", b64_string(value, value_len));
    if (lease)
        json_object_set_new(put, "lease", json_sprintf("%lld", (long long)lease));
    return json_pack("{s:o}", "request_put", put);
}

json_t *hc_etcd_op_delete(const char *key, int prefix)
{
    json_t *del = json_object();
    json_object_set_new(del, "key", b64_string(key, strlen(key)));
    if (prefix)
        json_object_set_new(del, "range_end", prefix_end(key));
    return json_pack("{s:o}", "request_delete_range", del);
}

json_t *hc_etcd_op_range(const char *key)
{
    return json_pack("{s:{s:o}}", "request_range", "key", b64_string(key, strlen(key)));
}

json_t *hc_etcd_cmp_create(const char *key, int64_t rev)
{
    return json_pack("{s:o, s:s, s:s, s:o}", "key", b64_string(key, strlen(key)), "target",
                     "CREATE", "result", "EQUAL", "create_revision",
                     json_sprintf("%lld", (long long)rev));
}

int hc_etcd_txn(struct hc_etcd *e, json_t *compare, json_t *success, json_t *failure,
                int64_t *revision, json_t **resp, struct hc_error *err)
{
    json_t *body = json_object();
    json_object_set_new(body, "compare", compare ? compare : json_array());
    json_object_set_new(body, "success", success ? success : json_array());
    json_object_set_new(body, "failure", failure ? failure : json_array());
    json_t *answer = hc_etcd_call(e, "/v3/kv/txn", body, err);
    json_decref(body);
    if (resp)
        *resp = NULL;
    if (!answer)
        return -1;
    if (revision)
        *revision = hc_etcd_int(json_object_get(answer, "header"), "revision", 0);
    int ok = json_is_true(json_object_get(answer, "succeeded"));
    if (resp)
        *resp = answer;
    else
        json_decref(answer);
    return ok;
}

long hc_etcd_range(struct hc_etcd *e, const char *key, int prefix, long page_size, hc_etcd_kv_fn fn,
                   void *arg, int64_t *revision, struct hc_error *err)
{
    long count = 0;
    int64_t rev = 0;
    json_t *end = prefix ? prefix_end(key) : NULL;
    char *from = strdup(key);
    size_t from_len = strlen(key);
    int more = 1;
    while (more && from) {
        json_t *body = json_pack("{s:o}", "key", b64_string(from, from_len));
        if (end)
            json_object_set(body, "range_end", end);
        if (page_size > 0)
            json_object_set_new(body, "limit", json_integer(page_size));
        if (rev)
            json_object_set_new(body, "revision", json_sprintf("%lld", (long long)rev));
        json_t *answer = hc_etcd_call(e, "/v3/kv/range", body, err);
        json_decref(body);
        if (!answer) {
            count = -1;
            break;
        }
        if (!rev)
            rev = hc_etcd_int(json_object_get(answer, "header"), "revision", 0);
        more = json_is_true(json_object_get(answer, "more")) && prefix && fn;
        json_t *kvs = json_object_get(answer, "kvs");
        size_t i;
        json_t *kv;
        char *last = NULL;
        json_array_foreach(kvs, i, kv)
        {
            const char *k64 = json_string_value(json_object_get(kv, "key"));
            const char *v64 = json_string_value(json_object_get(kv, "value"));
            size_t vlen = 0;
            char *k = k64 ? hc_etcd_unb64(k64, NULL) : NULL;
            char *v = hc_etcd_unb64(v64 ? v64 : "", &vlen); /* an empty value is absent */
            int rc = k && v ? (fn ? fn(arg, k, v, vlen, kv, err) : 0)
                            : hc_error_set(err, HC_E(ETCD), "etcd sent a key that is not base64");
            free(v);
            free(last);
            last = k;
            if (rc < 0) {
                count = -1;
                more = 0;
                break;
            }
            count++;
        }
        json_decref(answer);
        free(from);
        from = NULL;
        if (more && last) {
            /* The next page starts just after the last key: the key with a NUL appended is the
             * smallest greater one. */
            size_t n = strlen(last);
            from = calloc(1, n + 1);
            if (from) {
                memcpy(from, last, n);
                from_len = n + 1;
            }
        }
        free(last);
    }
    json_decref(end);
    free(from);
    if (revision)
        *revision = rev;
    return count;
}

struct get_one {
    char *value;
    int64_t create_rev;
};

static int get_one_kv(void *arg, const char *key, const char *value, size_t value_len,
                      const json_t *kv, struct hc_error *err)
{
    (void)key;
    (void)err;
    struct get_one *g = arg;
    g->value = malloc(value_len + 1);
    if (g->value) {
        memcpy(g->value, value, value_len);
        g->value[value_len] = '\0';
    }
    g->create_rev = hc_etcd_int(kv, "create_revision", 0);
    return 0;
}

char *hc_etcd_get(struct hc_etcd *e, const char *key, int *found, int64_t *create_rev,
                  struct hc_error *err)
{
    struct get_one g = {0};
    *found = 0;
    long n = hc_etcd_range(e, key, 0, 0, get_one_kv, &g, NULL, err);
    if (n < 0)
        return NULL;
    *found = n > 0 && g.value;
    if (create_rev)
        *create_rev = g.create_rev;
    return g.value;
}

int hc_etcd_lease_grant(struct hc_etcd *e, int64_t ttl_s, int64_t *id, struct hc_error *err)
{
    json_t *body = json_pack("{s:I}", "TTL", (json_int_t)ttl_s);
    json_t *answer = hc_etcd_call(e, "/v3/lease/grant", body, err);
    json_decref(body);
    if (!answer)
        return -1;
    *id = hc_etcd_int(answer, "ID", 0);
    json_decref(answer);
    if (!*id)
        return hc_error_set(err, HC_E(ETCD), "etcd granted no lease");
    return 0;
}

int hc_etcd_lease_keepalive(struct hc_etcd *e, int64_t id, int64_t *ttl, struct hc_error *err)
{
    json_t *body = json_pack("{s:o}", "ID", json_sprintf("%lld", (long long)id));
    json_t *answer = hc_etcd_call(e, "/v3/lease/keepalive", body, err);
    json_decref(body);
    if (!answer)
        return -1;
    /* The gateway streams: one answer is {"result":{...}}. */
    json_t *result = json_object_get(answer, "result");
    *ttl = hc_etcd_int(result ? result : answer, "TTL", 0);
    json_decref(answer);
    return 0;
}

int hc_etcd_lease_revoke(struct hc_etcd *e, int64_t id, struct hc_error *err)
{
    json_t *body = json_pack("{s:o}", "ID", json_sprintf("%lld", (long long)id));
    json_t *answer = hc_etcd_call(e, "/v3/lease/revoke", body, err);
    json_decref(body);
    json_decref(answer);
    return answer ? 0 : -1;
}
