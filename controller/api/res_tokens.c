/*
 * API tokens (docs/api.md "Tokens"), admin only: list every token (never a secret), create,
 * revoke and rotate. Each change commits with its event, named by the caller's token; the
 * token text exists only in the reply that creates or rotates it.
 */
#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/token.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/state/events.h"
#include "controller/state/node_identity.h"

#define TOKEN_TTL_MAX_S (10LL * 366 * 24 * 3600) /* ten years: "never" is its own choice */

void hc_res_tokens_list(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    struct hc_api_page page;
    if (hc_api_page_parse(req, &page, &err) < 0) {
        hc_reply_error(req, &err);
        return;
    }
    /* "expired" depends on the time as well: an ETag, but never a cached reply (mask 0) */
    json_t *body = hc_api_page_apply(hc_auth_token_list(api->db, &err), "tokens", "id",
                                     HC_API_ORDER_LIST, &page, &err);
    hc_api_reply_etag(api, req, 0, body, &err);
}

/* ttl_seconds: absent or null = never expires (create) / keep the old length (rotate). */
static int ttl_ms_from(const json_t *body, int64_t *ttl_ms, struct hc_error *err)
{
    const json_t *v = json_object_get(body, "ttl_seconds");
    *ttl_ms = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > TOKEN_TTL_MAX_S)
        return hc_error_set(err, HC_E(INVALID_ARGUMENT),
                            "ttl_seconds must be an integer from 1 to %lld", TOKEN_TTL_MAX_S);
    *ttl_ms = json_integer_value(v) * 1000;
    return 0;
}

static json_t *token_reply(const char *text, const char *id, const char *name, const char *role,
                           int64_t expires_at_ms)
{
    char when[32];
    return json_pack("{s:s, s:s, s:s, s:s, s:s?}", "token", text, "id", id, "name", name, "role",
                     role, "expires_at",
                     expires_at_ms ? hc_time_format(expires_at_ms, when, sizeof(when)) : NULL);
}

static json_t *token_create(struct hc_api *api, const json_t *in, const char *actor,
                            struct hc_error *err)
{
    const char *name = hc_json_req_str(in, "name", err);
    const char *role = hc_json_str(in, "role", HC_AUTH_ROLE_READONLY);
    char text[HC_AUTH_TOKEN_TEXT_MAX];
    struct hc_token t;
    int64_t ttl_ms;
    if (!name || ttl_ms_from(in, &ttl_ms, err) < 0 || hc_db_begin(api->db, err) < 0)
        return NULL;
    int64_t expires = ttl_ms ? hc_now_ms() + ttl_ms : 0;
    if (hc_identity_token_name_check(api->db, name, err) < 0 ||
        hc_auth_token_create(api->db, name, role, expires, text, err) < 0 ||
        hc_token_parse(text, HC_TOKEN_API_PREFIX, &t, NULL) < 0 || /* its id, for the record */
        hc_event_add(api->db, "token.api_created", NULL, NULL, actor,
                     json_pack("{s:s, s:s, s:s}", "id", t.id, "name", name, "role", role), err,
                     "api token '%s' (%s) created with role %s", name, t.id, role) < 0 ||
        hc_db_commit(api->db, err) < 0) {
        hc_db_rollback(api->db);
        return NULL;
    }
    return token_reply(text, t.id, name, role, expires);
}

void hc_res_token_create(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *in = hc_api_body(req);
    if (!in)
        return;
    json_t *body = token_create(api, in, hc_api_actor(req), &err);
    json_decref(in);
    hc_api_reply(req, 201, body, &err);
}

void hc_res_token_revoke(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    const char *which = hc_req_param(req, "id");
    char id[17], kind[8];
    json_t *body = NULL;
    if (hc_db_begin(api->db, &err) < 0)
        goto reply;
    if (hc_auth_token_find(api->db, which, id, kind, &err) < 0 ||
        hc_auth_token_revoke(api->db, id, &err) < 0 ||
        hc_event_add(api->db, "token.revoked", NULL, NULL, hc_api_actor(req),
                     json_pack("{s:s, s:s}", "id", id, "kind", kind), &err, "%s token %s revoked",
                     kind, id) < 0 ||
        hc_db_commit(api->db, &err) < 0) {
        hc_db_rollback(api->db);
        goto reply;
    }
    body = json_pack("{s:s, s:s, s:b}", "id", id, "kind", kind, "revoked", 1);
reply:
    hc_api_reply(req, 200, body, &err);
}

static json_t *token_rotate(struct hc_api *api, const char *which, const json_t *in,
                            const char *actor, struct hc_error *err)
{
    char id[17], kind[8], text[HC_AUTH_TOKEN_TEXT_MAX];
    int64_t ttl_ms, expires;
    if (ttl_ms_from(in, &ttl_ms, err) < 0 || hc_db_begin(api->db, err) < 0)
        return NULL;
    json_t *rows = NULL, *out = NULL;
    if (hc_auth_token_find(api->db, which, id, kind, err) < 0 ||
        hc_auth_token_rotate(api->db, id, ttl_ms, text, &expires, err) < 0 ||
        !(rows = hc_db_query_json(api->db, err, "SELECT name, role FROM tokens WHERE id = ?", "s",
                                  id)) ||
        hc_event_add(api->db, "token.rotated", NULL, NULL, actor, json_pack("{s:s}", "id", id), err,
                     "api token %s rotated: its old text no longer works", id) < 0 ||
        hc_db_commit(api->db, err) < 0) {
        hc_db_rollback(api->db);
        goto cleanup;
    }
    const json_t *row = json_array_get(rows, 0);
    out =
        token_reply(text, id, hc_json_str(row, "name", ""), hc_json_str(row, "role", ""), expires);
cleanup:
    json_decref(rows);
    return out;
}

void hc_res_token_rotate(struct hc_request *req, void *arg)
{
    struct hc_api *api = arg;
    struct hc_error err = {0};
    json_t *in = hc_api_body(req);
    if (!in)
        return;
    json_t *body = token_rotate(api, hc_req_param(req, "id"), in, hc_api_actor(req), &err);
    json_decref(in);
    hc_api_reply(req, 200, body, &err);
}
