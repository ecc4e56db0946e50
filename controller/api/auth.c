/*
 * API and join tokens: create them (storing only the secret's hash), verify bearer tokens, and
 * consume one-time join tokens inside the enrollment's transaction.
 */
#include "controller/api/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/json_util.h"
#include "common/token.h"
#include "common/util.h"

static int unauthorized(struct hc_error *err)
{
    hc_error_set(err, HC_E(UNAUTHORIZED), "invalid or missing API token");
    return hc_error_hint(err, "check --token, HCCTL_TOKEN or the config file");
}

static int join_invalid(struct hc_error *err)
{
    /* One message for malformed, unknown, used and expired: the reply must not tell which. */
    hc_error_set(err, HC_E(TOKEN_INVALID), "join token is invalid, used or expired");
    return hc_error_hint(err, "create a new one with 'hcctl cluster join-token'");
}

int hc_auth_token_name_taken(struct hc_db *db, const char *name, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(
        db, err, "SELECT id FROM tokens WHERE kind = 'api' AND name = ?", "s", name);
    if (!rows)
        return -1;
    int taken = json_array_size(rows) > 0;
    json_decref(rows);
    return taken;
}

/* The checks and the insert of every API token; scope and op_id may be NULL. */
static int token_insert(struct hc_db *db, const char *name, const char *role, const char *scope,
                        const char *op_id, int64_t expires_at_ms, char text[HC_AUTH_TOKEN_TEXT_MAX],
                        struct hc_error *err)
{
    if (!name || !*name || strlen(name) > 100)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT), "token name must be 1-100 characters");
    if (strcmp(role, HC_AUTH_ROLE_ADMIN) != 0 && strcmp(role, HC_AUTH_ROLE_READONLY) != 0) {
        hc_error_set(err, HC_E(INVALID_ARGUMENT), "unknown role '%s'", role);
        return hc_error_hint(err, "use admin or readonly");
    }
    int taken = hc_auth_token_name_taken(db, name, err);
    if (taken < 0)
        return -1;
    if (taken) {
        hc_error_set(err, HC_E(CONFLICT), "api token name '%s' already exists", name);
        return hc_error_hint(err, "choose another --name");
    }
    struct hc_token t;
    if (hc_token_generate(&t, HC_TOKEN_API_PREFIX, NULL) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot generate api token");
    char hash[65];
    hc_token_hash(&t, hash);
    /* NULLIF turns the "never" 0 into NULL without a separate statement. */
    if (hc_db_run(db, err,
                  "INSERT INTO tokens (id, kind, name, role, secret_hash, created_at, expires_at, "
                  "scope, op_id) VALUES (?, 'api', ?, ?, ?, ?, NULLIF(?, 0), ?, ?)",
                  "ssssiiss", t.id, name, role, hash, hc_now_ms(), expires_at_ms, scope, op_id) < 0)
        return -1;
    hc_token_format(&t, text, HC_AUTH_TOKEN_TEXT_MAX);
    return 0;
}

int hc_auth_token_create(struct hc_db *db, const char *name, const char *role,
                         int64_t expires_at_ms, char text[HC_AUTH_TOKEN_TEXT_MAX],
                         struct hc_error *err)
{
    return token_insert(db, name, role, NULL, NULL, expires_at_ms, text, err);
}

int hc_auth_token_create_scoped(struct hc_db *db, const char *name, const char *scope,
                                const char *op_id, int64_t expires_at_ms,
                                char text[HC_AUTH_TOKEN_TEXT_MAX], struct hc_error *err)
{
    return token_insert(db, name, HC_AUTH_ROLE_READONLY, scope, op_id, expires_at_ms, text, err);
}

int hc_auth_scoped_tokens_delete(struct hc_db *db, const char *op_id, struct hc_error *err)
{
    return hc_db_run(db, err,
                     "DELETE FROM tokens WHERE scope IS NOT NULL AND "
                     "(op_id = ? OR expires_at <= ?)",
                     "si", op_id ? op_id : "", hc_now_ms());
}

int hc_auth_scope_allows(const char *scope, const char *method, const char *path)
{
    if (!scope || !*scope)
        return 1;
    if (strncmp(scope, "bundle:", 7) != 0 || strcmp(method, "GET") != 0)
        return 0;
    /* the bundle's record (signature) and its bytes, nothing else */
    char own[200], bytes[220];
    snprintf(own, sizeof(own), "/v1/software/%s", scope + 7);
    snprintf(bytes, sizeof(bytes), "%s/bundle", own);
    return strcmp(path, own) == 0 || strcmp(path, bytes) == 0;
}

json_t *hc_auth_token_list(struct hc_db *db, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(
        db, err,
        "SELECT id, kind, name, role, scope, created_at, expires_at, "
        "expires_at IS NOT NULL AND expires_at <= ? AS expired, used_at, used_by, "
        "bound_address AS address, bound_name AS node FROM tokens ORDER BY created_at DESC, id",
        "i", hc_now_ms());
    if (!rows)
        return NULL;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
    {
        static const char *const times[] = {"created_at", "expires_at", "used_at"};
        for (size_t k = 0; k < HC_ARRAY_LEN(times); k++) {
            json_t *v = json_object_get(row, times[k]);
            char when[32];
            if (json_is_integer(v))
                json_object_set_new(
                    row, times[k],
                    json_string(hc_time_format(json_integer_value(v), when, sizeof(when))));
        }
        json_object_set_new(row, "expired",
                            json_boolean(json_integer_value(json_object_get(row, "expired"))));
    }
    return json_pack("{s:o}", "tokens", rows);
}

int hc_auth_token_find(struct hc_db *db, const char *id_or_name, char id[17], char kind[8],
                       struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT id, kind FROM tokens WHERE id = ? OR "
                                    "(kind = 'api' AND name = ?) ORDER BY id = ? DESC",
                                    "sss", id_or_name, id_or_name, id_or_name);
    if (!rows)
        return -1;
    const json_t *row = json_array_get(rows, 0);
    if (row) {
        snprintf(id, 17, "%s", hc_json_str(row, "id", ""));
        snprintf(kind, 8, "%s", hc_json_str(row, "kind", ""));
    }
    json_decref(rows);
    if (!row) {
        hc_error_set(err, HC_E(NOT_FOUND), "no token '%s'", id_or_name);
        return hc_error_hint(err, "'hcctl token list' shows the tokens' ids and names");
    }
    return 0;
}

/* 1 when id is the only admin token that still works, 0 when not, -1 with err. */
static int last_admin(struct hc_db *db, const char *id, struct hc_error *err)
{
    json_t *rows = hc_db_query_json(
        db, err,
        "SELECT SUM(id = ?) AS mine, COUNT(*) AS n FROM tokens WHERE kind = 'api' AND "
        "role = 'admin' AND scope IS NULL AND (expires_at IS NULL OR expires_at > ?)",
        "si", id, hc_now_ms());
    if (!rows)
        return -1;
    const json_t *row = json_array_get(rows, 0);
    int last = hc_json_int(row, "mine", 0) == 1 && hc_json_int(row, "n", 0) == 1;
    json_decref(rows);
    return last;
}

int hc_auth_token_revoke(struct hc_db *db, const char *id, struct hc_error *err)
{
    int last = last_admin(db, id, err);
    if (last < 0)
        return -1;
    if (last) {
        hc_error_set(err, HC_E(CONFLICT), "token %s is the last admin token", id);
        return hc_error_hint(err, "create another admin token first ('hcctl token create NAME "
                                  "--role admin'), or rotate this one ('hcctl token rotate')");
    }
    int n = hc_db_run(db, err, "DELETE FROM tokens WHERE id = ?", "s", id);
    if (n == 0)
        hc_error_set(err, HC_E(NOT_FOUND), "no token '%s'", id);
    return n == 1 ? 0 : -1;
}

int hc_auth_token_rotate(struct hc_db *db, const char *id, int64_t ttl_ms,
                         char text[HC_AUTH_TOKEN_TEXT_MAX], int64_t *expires_at_ms,
                         struct hc_error *err)
{
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT created_at, expires_at FROM tokens WHERE "
                                    "id = ? AND kind = 'api' AND scope IS NULL",
                                    "s", id);
    if (!rows)
        return -1;
    const json_t *row = json_array_get(rows, 0);
    json_t *exp = json_object_get(row, "expires_at");
    int64_t now = hc_now_ms(), life = json_is_integer(exp) ? json_integer_value(exp) -
                                                                 hc_json_int(row, "created_at", 0)
                                                           : 0;
    int found = row != NULL;
    json_decref(rows);
    if (!found)
        return hc_error_set(err, HC_E(NOT_FOUND), "no API token '%s' to rotate", id);
    if (ttl_ms > 0)
        life = ttl_ms;
    struct hc_token t;
    if (hc_token_generate(&t, HC_TOKEN_API_PREFIX, NULL) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot generate api token");
    snprintf(t.id, sizeof(t.id), "%s", id); /* same id: the same token, a new secret */
    char hash[65];
    hc_token_hash(&t, hash);
    *expires_at_ms = life > 0 ? now + life : 0;
    if (hc_db_run(db, err,
                  "UPDATE tokens SET secret_hash = ?, created_at = ?, "
                  "expires_at = NULLIF(?, 0) WHERE id = ?",
                  "siis", hash, now, *expires_at_ms, id) != 1)
        return -1;
    hc_token_format(&t, text, HC_AUTH_TOKEN_TEXT_MAX);
    return 0;
}

const char *hc_auth_bearer(const char *header)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return NULL;
    header += 7;
    while (*header == ' ')
        header++;
    return *header ? header : NULL;
}

/* Looks a token up by id and kind and checks its secret and expiry. Returns the row (new
 * reference) when valid, NULL when not (err untouched) and sets *failed on a database error. */
static json_t *token_row_check(struct hc_db *db, const struct hc_token *t, const char *kind,
                               int *failed, struct hc_error *err)
{
    *failed = 0;
    json_t *rows = hc_db_query_json(db, err,
                                    "SELECT name, role, secret_hash, expires_at, used_at, "
                                    "bound_address, bound_name, scope "
                                    "FROM tokens WHERE id = ? AND kind = ?",
                                    "ss", t->id, kind);
    if (!rows) {
        *failed = 1;
        return NULL;
    }
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!row)
        return NULL;
    char hash[65];
    hc_token_hash(t, hash);
    const char *stored = hc_json_str(row, "secret_hash", "");
    json_t *exp = json_object_get(row, "expires_at");
    int ok = hc_ct_equal(hash, stored) &&
             (!json_is_integer(exp) || json_integer_value(exp) > hc_now_ms());
    if (!ok) {
        json_decref(row);
        return NULL;
    }
    return row;
}

int hc_auth_verify(struct hc_db *db, const char *text, struct hc_auth_identity *who,
                   struct hc_error *err)
{
    struct hc_token t;
    if (!text || hc_token_parse(text, HC_TOKEN_API_PREFIX, &t, NULL) < 0)
        return unauthorized(err);
    int failed;
    json_t *row = token_row_check(db, &t, "api", &failed, err);
    if (failed)
        return -1;
    if (!row)
        return unauthorized(err);
    snprintf(who->id, sizeof(who->id), "%s", t.id);
    snprintf(who->name, sizeof(who->name), "%s", hc_json_str(row, "name", ""));
    snprintf(who->role, sizeof(who->role), "%s", hc_json_str(row, "role", ""));
    snprintf(who->scope, sizeof(who->scope), "%s", hc_json_str(row, "scope", ""));
    json_t *exp = json_object_get(row, "expires_at");
    who->expires_at_ms = json_is_integer(exp) ? json_integer_value(exp) : 0;
    json_decref(row);
    return 0;
}

int hc_auth_join_create(struct hc_db *db, const char *ca_fingerprint, int64_t ttl_s,
                        const char *created_by, const struct hc_join_binding *bind,
                        struct hc_join_token *out, struct hc_error *err)
{
    struct hc_token t;
    if (hc_token_generate(&t, HC_TOKEN_JOIN_PREFIX, ca_fingerprint) < 0)
        return hc_error_set(err, HC_E(INTERNAL), "cannot generate join token");
    char hash[65];
    hc_token_hash(&t, hash);
    int64_t now = hc_now_ms();
    int64_t expires = now + ttl_s * 1000;
    const char *address = bind && bind->address[0] ? bind->address : NULL;
    const char *name = bind && bind->name[0] ? bind->name : NULL;
    if (hc_db_run(db, err,
                  "INSERT INTO tokens (id, kind, name, role, secret_hash, created_at, expires_at, "
                  "bound_address, bound_name) VALUES (?, 'join', ?, 'join', ?, ?, ?, ?, ?)",
                  "sssiiss", t.id, created_by, hash, now, expires, address, name) < 0)
        return -1;
    hc_token_format(&t, out->text, sizeof(out->text));
    snprintf(out->id, sizeof(out->id), "%s", t.id);
    out->expires_at_ms = expires;
    return 0;
}

int hc_auth_join_check_format(const char *text, struct hc_error *err)
{
    struct hc_token t;
    if (!text || hc_token_parse(text, HC_TOKEN_JOIN_PREFIX, &t, NULL) < 0)
        return join_invalid(err);
    return 0;
}

int hc_auth_join_consume(struct hc_db *db, const char *text, const char *used_by,
                         struct hc_join_binding *bind, struct hc_error *err)
{
    struct hc_token t;
    if (!text || hc_token_parse(text, HC_TOKEN_JOIN_PREFIX, &t, NULL) < 0)
        return join_invalid(err);
    int failed;
    json_t *row = token_row_check(db, &t, "join", &failed, err);
    if (failed)
        return -1;
    int used = row && !json_is_null(json_object_get(row, "used_at"));
    snprintf(bind->address, sizeof(bind->address), "%s", hc_json_str(row, "bound_address", ""));
    snprintf(bind->name, sizeof(bind->name), "%s", hc_json_str(row, "bound_name", ""));
    json_decref(row);
    if (!row || used)
        return join_invalid(err);
    /* The used_at guard makes the claim itself atomic, not only the check above. */
    int changed = hc_db_run(db, err,
                            "UPDATE tokens SET used_at = ?, used_by = ? "
                            "WHERE id = ? AND used_at IS NULL",
                            "iss", hc_now_ms(), used_by, t.id);
    if (changed < 0)
        return -1;
    if (changed != 1)
        return join_invalid(err);
    return 0;
}
