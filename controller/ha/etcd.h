/*
 * A small etcd v3 client over etcd's JSON gateway (docs/ha.md "etcd"): POST /v3/... with
 * libcurl (common/https_client.h) over mutual TLS with certificates from the cluster CA. Keys and
 * values are base64 in JSON, int64 fields come back as strings, and proto3 JSON omits false and
 * zero: a failed txn has no "succeeded" field at all. Those quirks stay in this file; callers
 * pass and get plain C strings.
 *
 * A client holds the list of endpoints and sticks to the one that answered last; a transport
 * failure tries the next. Thread-safe: one mutex around the underlying HTTP client (every call
 * is short; the commit path is serialised by SQLite's write lock anyway).
 */
#ifndef HC_CONTROLLER_HA_ETCD_H
#define HC_CONTROLLER_HA_ETCD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define HC_ETCD_MAX_ENDPOINTS 7
/* What one etcd request may carry (etcd is started with --max-request-bytes 8388608 and
 * --max-txn-ops 4096: docs/ha.md); a transaction larger than this is sent in parts. */
#define HC_ETCD_TXN_MAX_OPS 4000
#define HC_ETCD_TXN_MAX_BYTES (6u * 1024 * 1024)

struct hc_etcd;

struct hc_etcd_tls {
    const char *ca_file, *cert_file, *key_file;
};

/* urls: "https://127.0.0.11:2379,https://..." (1 to HC_ETCD_MAX_ENDPOINTS, https only unless
 * tls is NULL, which only tests use). NULL with err (400 invalid_argument for a bad list). */
struct hc_etcd *hc_etcd_new(const char *urls, const struct hc_etcd_tls *tls, long timeout_ms,
                            struct hc_error *err);
void hc_etcd_free(struct hc_etcd *e);
size_t hc_etcd_endpoints(const struct hc_etcd *e, const char ***out);

/* POSTs body to path ("/v3/kv/range") on the current endpoint, trying the others on a
 * transport failure or a 5xx. Returns the parsed answer (caller decrefs) or NULL with err
 * (503 etcd_error). body is borrowed. */
json_t *hc_etcd_call(struct hc_etcd *e, const char *path, json_t *body, struct hc_error *err);
/* The same against one endpoint only (health of each member). */
json_t *hc_etcd_call_at(struct hc_etcd *e, const char *endpoint, const char *path, json_t *body,
                        long timeout_ms, struct hc_error *err);

/* Base64 of len bytes (caller frees); decoding returns a NUL-terminated copy (caller frees) and
 * its length, NULL for invalid base64. */
char *hc_etcd_b64(const void *data, size_t len);
char *hc_etcd_unb64(const char *text, size_t *len);
/* An int64 field of an answer, given as a string or a number; def when absent (proto3 zero). */
int64_t hc_etcd_int(const json_t *obj, const char *name, int64_t def);

/* Request parts (new references). */
json_t *hc_etcd_op_put(const char *key, const char *value, size_t value_len, int64_t lease);
json_t *hc_etcd_op_delete(const char *key, int prefix);
json_t *hc_etcd_op_range(const char *key);
/* compare create_revision(key) == rev (0: the key does not exist). */
json_t *hc_etcd_cmp_create(const char *key, int64_t rev);

/* A transaction: returns 1 when it succeeded, 0 when a compare failed, -1 with err when it could
 * not be sent or answered. *revision (may be NULL) is the header's revision; *resp (may be
 * NULL) keeps the answer. The arrays are stolen. */
int hc_etcd_txn(struct hc_etcd *e, json_t *compare, json_t *success, json_t *failure,
                int64_t *revision, json_t **resp, struct hc_error *err);

/* A range over [key, key+prefix end) when prefix, else one key: calls fn for each key/value,
 * in pages of page_size, at one revision (the first page's). Returns the number of keys, or -1
 * with err (also when fn returns < 0, which fills err). *revision (may be NULL) is the range's
 * revision. */
typedef int (*hc_etcd_kv_fn)(void *arg, const char *key, const char *value, size_t value_len,
                             const json_t *kv, struct hc_error *err);
long hc_etcd_range(struct hc_etcd *e, const char *key, int prefix, long page_size, hc_etcd_kv_fn fn,
                   void *arg, int64_t *revision, struct hc_error *err);
/* One key's value (caller frees), NULL with *found = 0 when absent, NULL with err on failure.
 * *create_rev (may be NULL) is its create_revision. */
char *hc_etcd_get(struct hc_etcd *e, const char *key, int *found, int64_t *create_rev,
                  struct hc_error *err);

/* Leases. */
int hc_etcd_lease_grant(struct hc_etcd *e, int64_t ttl_s, int64_t *id, struct hc_error *err);
/* Renews; *ttl is what is left (0: the lease is gone). */
int hc_etcd_lease_keepalive(struct hc_etcd *e, int64_t id, int64_t *ttl, struct hc_error *err);
int hc_etcd_lease_revoke(struct hc_etcd *e, int64_t id, struct hc_error *err);

#endif
