/*
 * The API thread's reply and token caches (controller/api/cache.h). Both are small fixed
 * tables searched linearly: a few dozen entries compare faster than a hash table is built, and
 * their size bounds the memory whatever the requests.
 */
#include "controller/api/cache.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const char *const chg_names[HC_CHG_COUNT] = {
    [HC_CHG_CLUSTERS] = "clusters",       [HC_CHG_NODES] = "nodes",
    [HC_CHG_INTERFACES] = "interfaces",   [HC_CHG_REVOKED] = "revoked_certs",
    [HC_CHG_TOKENS] = "tokens",           [HC_CHG_OPERATIONS] = "operations",
    [HC_CHG_STEPS] = "operation_steps",   [HC_CHG_EVENTS] = "events",
    [HC_CHG_BUNDLES] = "bundles",         [HC_CHG_UPGRADE_NODES] = "upgrade_nodes",
    [HC_CHG_CONFIG] = "config_revisions",
};

struct reply_entry {
    char key[HC_API_CACHE_KEY_MAX];
    char etag[HC_API_ETAG_LEN];
    int64_t version;
    uint64_t used;
    struct hc_blob *blob; /* NULL: free slot */
};

struct token_entry {
    unsigned char hash[32]; /* SHA-256 of the token text: the text itself is not kept */
    struct hc_auth_identity who;
    int64_t tokens_gen;
    int valid;
};

struct hc_api_cache {
    sqlite3_stmt *gens_st;
    struct hc_db *db; /* the connection gens_st belongs to */
    int64_t gen[HC_CHG_COUNT];
    uint64_t tick;
    struct reply_entry replies[HC_API_CACHE_ENTRIES];
    struct token_entry tokens[HC_API_TOKEN_CACHE];
    unsigned token_next;
};

struct hc_api_cache *hc_api_cache_new(void)
{
    return calloc(1, sizeof(struct hc_api_cache));
}

void hc_api_cache_free(struct hc_api_cache *c)
{
    if (!c)
        return;
    sqlite3_finalize(c->gens_st);
    for (size_t i = 0; i < HC_API_CACHE_ENTRIES; i++)
        hc_blob_unref(c->replies[i].blob);
    free(c);
}

int hc_api_cache_refresh(struct hc_api_cache *c, struct hc_db *db, struct hc_error *err)
{
    if (!c->gens_st || c->db != db) {
        sqlite3_finalize(c->gens_st);
        c->db = db;
        if (!(c->gens_st = hc_db_prepare(db, "SELECT name, gen FROM change_counters", err)))
            return -1;
    }
    int rc;
    while ((rc = sqlite3_step(c->gens_st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(c->gens_st, 0);
        for (int i = 0; name && i < HC_CHG_COUNT; i++)
            if (strcmp(name, chg_names[i]) == 0)
                c->gen[i] = sqlite3_column_int64(c->gens_st, 1);
    }
    sqlite3_reset(c->gens_st);
    if (rc != SQLITE_DONE)
        return hc_db_error(db, err, "cannot read the change counters");
    return 0;
}

int64_t hc_api_cache_gen(const struct hc_api_cache *c, enum hc_chg which)
{
    return c->gen[which];
}

int64_t hc_api_cache_version(const struct hc_api_cache *c, unsigned mask)
{
    int64_t v = 0;
    for (int i = 0; i < HC_CHG_COUNT; i++)
        if (mask & (1u << i))
            v += c->gen[i];
    return v;
}

struct hc_blob *hc_api_cache_get(struct hc_api_cache *c, const char *key, int64_t version,
                                 char etag[HC_API_ETAG_LEN])
{
    for (size_t i = 0; i < HC_API_CACHE_ENTRIES; i++) {
        struct reply_entry *e = &c->replies[i];
        if (!e->blob || e->version != version || strcmp(e->key, key) != 0)
            continue;
        e->used = ++c->tick;
        memcpy(etag, e->etag, HC_API_ETAG_LEN);
        return e->blob;
    }
    return NULL;
}

void hc_api_cache_put(struct hc_api_cache *c, const char *key, int64_t version, const char *etag,
                      struct hc_blob *b)
{
    if (strlen(key) >= HC_API_CACHE_KEY_MAX || b->len > HC_API_CACHE_BODY_MAX)
        return;
    struct reply_entry *same = NULL, *lru = &c->replies[0];
    for (size_t i = 0; i < HC_API_CACHE_ENTRIES; i++) {
        struct reply_entry *e = &c->replies[i];
        if (e->blob && strcmp(e->key, key) == 0) /* an older version of this reply */
            same = e;
        else if (!e->blob || (lru->blob && e->used < lru->used))
            lru = e;
    }
    struct reply_entry *slot = same ? same : lru;
    hc_blob_unref(slot->blob);
    snprintf(slot->key, sizeof(slot->key), "%s", key);
    snprintf(slot->etag, sizeof(slot->etag), "%s", etag);
    slot->version = version;
    slot->used = ++c->tick;
    slot->blob = b;
    b->refs++;
}

static void sha256(const void *data, size_t len, unsigned char out[32])
{
    unsigned int n = 32;
    if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1)
        memset(out, 0, 32);
}

void hc_api_etag(const void *data, size_t len, char etag[HC_API_ETAG_LEN])
{
    unsigned char md[32];
    sha256(data, len, md);
    char *p = etag;
    *p++ = '"';
    for (int i = 0; i < 16; i++)
        p += sprintf(p, "%02x", md[i]);
    *p++ = '"';
    *p = '\0';
}

int hc_api_token_cached(struct hc_api_cache *c, const char *text, struct hc_auth_identity *who)
{
    unsigned char h[32];
    if (!text)
        return 0;
    sha256(text, strlen(text), h);
    int64_t now = hc_now_ms();
    for (size_t i = 0; i < HC_API_TOKEN_CACHE; i++) {
        struct token_entry *e = &c->tokens[i];
        if (!e->valid || memcmp(e->hash, h, sizeof(h)) != 0)
            continue;
        if (e->tokens_gen != c->gen[HC_CHG_TOKENS] ||
            (e->who.expires_at_ms && e->who.expires_at_ms <= now)) {
            e->valid = 0; /* revoked, rotated, expired, or any other change: verify again */
            return 0;
        }
        *who = e->who;
        return 1;
    }
    return 0;
}

void hc_api_token_remember(struct hc_api_cache *c, const char *text,
                           const struct hc_auth_identity *who)
{
    struct token_entry *e = &c->tokens[c->token_next++ % HC_API_TOKEN_CACHE];
    sha256(text, strlen(text), e->hash);
    e->who = *who;
    e->tokens_gen = c->gen[HC_CHG_TOKENS];
    e->valid = 1;
}
