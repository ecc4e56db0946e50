/*
 * The API thread's caches (docs/api.md "ETag and caching"): serialized replies of the list and
 * show endpoints (bytes + ETag, keyed by the request target), and verified API tokens. Both are
 * invalidated by the change counters of db/migrations/0008_changes.sql, which triggers bump on
 * every write of the tables counted, by any thread or process: the API reads them once per
 * request (hc_api_cache_refresh), so a write, a revoke or a rotate is seen by the next request.
 *
 * Single-threaded: the API thread owns the cache and its prepared statement.
 */
#ifndef HC_CONTROLLER_API_CACHE_H
#define HC_CONTROLLER_API_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/https_server.h"
#include "controller/api/auth.h"
#include "db/db.h"

/* The counted tables, as bits of a dependency mask. */
enum hc_chg {
    HC_CHG_CLUSTERS,
    HC_CHG_NODES,
    HC_CHG_INTERFACES,
    HC_CHG_REVOKED,
    HC_CHG_TOKENS,
    HC_CHG_OPERATIONS,
    HC_CHG_STEPS,
    HC_CHG_EVENTS,
    HC_CHG_BUNDLES,
    HC_CHG_UPGRADE_NODES,
    HC_CHG_CONFIG,
    HC_CHG_COUNT
};
#define HC_DEP(x) (1u << HC_CHG_##x)
#define HC_DEP_ALL ((1u << HC_CHG_COUNT) - 1)

#define HC_API_CACHE_ENTRIES 32                 /* replies kept */
#define HC_API_CACHE_KEY_MAX 512                /* longer request targets are not cached */
#define HC_API_CACHE_BODY_MAX (8 * 1024 * 1024) /* larger replies are not kept */
#define HC_API_TOKEN_CACHE 16                   /* verified tokens kept */
#define HC_API_ETAG_LEN 36                      /* "\"" + 32 hex + "\"" + NUL, rounded */

struct hc_api_cache;

struct hc_api_cache *hc_api_cache_new(void);    /* NULL when out of memory */
void hc_api_cache_free(struct hc_api_cache *c); /* accepts NULL; before closing the db */
/* Reads every change counter (one query). 0, or -1 with err. */
int hc_api_cache_refresh(struct hc_api_cache *c, struct hc_db *db, struct hc_error *err);
/* The counter of one table as last read. */
int64_t hc_api_cache_gen(const struct hc_api_cache *c, enum hc_chg which);
/* The version of the data behind mask: the sum of its counters (each only grows). */
int64_t hc_api_cache_version(const struct hc_api_cache *c, unsigned mask);

/* The cached reply for key at version, or NULL (a borrowed blob; etag receives its tag). */
struct hc_blob *hc_api_cache_get(struct hc_api_cache *c, const char *key, int64_t version,
                                 char etag[HC_API_ETAG_LEN]);
/* Keeps b (a reference is taken) under key at version, evicting the least recently used. */
void hc_api_cache_put(struct hc_api_cache *c, const char *key, int64_t version, const char *etag,
                      struct hc_blob *b);
/* The strong ETag of len bytes: a quoted SHA-256 prefix. */
void hc_api_etag(const void *data, size_t len, char etag[HC_API_ETAG_LEN]);

/* 1 and who filled when token text was verified since the tokens table last changed and has
 * not expired since; 0 otherwise. */
int hc_api_token_cached(struct hc_api_cache *c, const char *text, struct hc_auth_identity *who);
void hc_api_token_remember(struct hc_api_cache *c, const char *text,
                           const struct hc_auth_identity *who);

#endif
