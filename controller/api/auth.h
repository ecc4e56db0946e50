/*
 * API and join tokens in the tokens table. Only the SHA-256 of a token's secret is stored; the
 * token text exists once, in what the create functions hand back to the caller.
 *
 * API tokens ("hct1.<id>.<secret>") carry a name (the actor in the event log) and a role
 * (admin or readonly). Join tokens ("hcj1.<id>.<secret>.<ca fingerprint>") are one-time and
 * always expire; consuming one marks it used in the caller's transaction.
 */
#ifndef HC_CONTROLLER_AUTH_H
#define HC_CONTROLLER_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"
#include "db/db.h"

#define HC_AUTH_ROLE_ADMIN "admin"
#define HC_AUTH_ROLE_READONLY "readonly"
#define HC_AUTH_TOKEN_TEXT_MAX 200

/* Who an API token belongs to, as found by hc_auth_verify. */
struct hc_auth_identity {
    char id[17];
    char name[128];
    char role[16];
    char scope[128];       /* "" or "bundle:VERSION": the one resource the token may read */
    int64_t expires_at_ms; /* 0: never (the API's token cache honours it) */
};

/* Creates an API token; expires_at_ms 0 means never. text (HC_AUTH_TOKEN_TEXT_MAX bytes)
 * receives the token text. Refuses an unknown role (400) and a name already used by another API
 * token (409), so that the actor in the event log is unambiguous. Runs in the caller's
 * transaction when one is open. Returns 0 or -1 with err. */
int hc_auth_token_create(struct hc_db *db, const char *name, const char *role,
                         int64_t expires_at_ms, char text[HC_AUTH_TOKEN_TEXT_MAX],
                         struct hc_error *err);

/* 1 when an API token has that name, 0 when not, -1 with err. */
int hc_auth_token_name_taken(struct hc_db *db, const char *name, struct hc_error *err);

/* A read-only token limited to scope ("bundle:VERSION"), owned by operation op_id: the tokens
 * handed to agents to download one bundle. Same rules and output as hc_auth_token_create. */
int hc_auth_token_create_scoped(struct hc_db *db, const char *name, const char *scope,
                                const char *op_id, int64_t expires_at_ms,
                                char text[HC_AUTH_TOKEN_TEXT_MAX], struct hc_error *err);

/* Deletes the scoped tokens of op_id (the operation ended or runs again), and every scoped
 * token past its expiry. Returns the number deleted, or -1 with err. */
int hc_auth_scoped_tokens_delete(struct hc_db *db, const char *op_id, struct hc_error *err);

/* 1 when a token with scope may make this request, else 0. An empty scope allows anything
 * (the role decides). */
int hc_auth_scope_allows(const char *scope, const char *method, const char *path);

/* {"tokens":[{id, kind, name, role, scope, created_at, expires_at, expired, used_at, used_by,
 * address, node}]}: every token, newest first, never a secret or its hash. NULL with err. */
json_t *hc_auth_token_list(struct hc_db *db, struct hc_error *err);

/* Finds an API or join token by id, or an API token by name: fills id (17 bytes) and kind.
 * 404 when there is none. */
int hc_auth_token_find(struct hc_db *db, const char *id_or_name, char id[17], char kind[8],
                       struct hc_error *err);

/* Revokes (deletes) token id. The last admin token that has not expired is kept (409): the
 * cluster would have no administrator left (`hcctld token create` on the controller host
 * makes one). Runs in the caller's transaction. */
int hc_auth_token_revoke(struct hc_db *db, const char *id, struct hc_error *err);

/* Gives API token id a new secret (same id, name and role; the old text stops working at
 * once). ttl_ms > 0 sets a new life, 0 keeps the token's old length of life (none stays none).
 * text receives the new token. Runs in the caller's transaction. */
int hc_auth_token_rotate(struct hc_db *db, const char *id, int64_t ttl_ms,
                         char text[HC_AUTH_TOKEN_TEXT_MAX], int64_t *expires_at_ms,
                         struct hc_error *err);

/* Checks a bearer token's text (without "Bearer "). Every failure (malformed, unknown id, wrong
 * secret, expired) is the same 401 unauthorized so that the reply does not tell which. Fills
 * who on success. Returns 0 or -1 with err. */
int hc_auth_verify(struct hc_db *db, const char *text, struct hc_auth_identity *who,
                   struct hc_error *err);

/* Extracts the token from an "Authorization: Bearer T" header value (scheme case-insensitive).
 * Returns a pointer into header, or NULL. */
const char *hc_auth_bearer(const char *header);

/* What hc_auth_join_create hands back. */
struct hc_join_token {
    char text[HC_AUTH_TOKEN_TEXT_MAX];
    char id[17];
    int64_t expires_at_ms;
};

/* What a join token fixes about the node it may enroll ("" where it fixes nothing): the
 * address its certificate will name, and its name. */
struct hc_join_binding {
    char address[256];
    char name[64];
};

/* Creates a one-time join token valid for ttl_s seconds, embedding the CA fingerprint; created_by
 * is stored as the token's name. bind (may be NULL) fixes the enrolling node's address and/or
 * name. Runs in the caller's transaction. Returns 0 or -1 with err. */
int hc_auth_join_create(struct hc_db *db, const char *ca_fingerprint, int64_t ttl_s,
                        const char *created_by, const struct hc_join_binding *bind,
                        struct hc_join_token *out, struct hc_error *err);

/* Checks only the format of a join token's text (no database): 0, or -1 with the same 401
 * token_invalid as hc_auth_join_consume. */
int hc_auth_join_check_format(const char *text, struct hc_error *err);

/* Checks a join token's text and marks it used by used_by; bind receives what the token fixes.
 * Must run inside the caller's transaction (the enrollment's), so a rollback leaves the token
 * unused. Malformed, unknown, wrong secret, used and expired tokens all fail with the same 401
 * token_invalid. */
int hc_auth_join_consume(struct hc_db *db, const char *text, const char *used_by,
                         struct hc_join_binding *bind, struct hc_error *err);

#endif
