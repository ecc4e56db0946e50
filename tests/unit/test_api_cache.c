/* Unit tests for the API's paging, ETags and caches (controller/api/api.c hc_api_page_apply,
 * controller/api/cache.c, common/https_server.c hc_etag_match): hostile entity tags, pages and
 * cursors, the reply cache's versions and eviction, and the change counters of migration 0008
 * invalidating cached tokens and replies whichever connection writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/https_server.h"
#include "common/util.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/api/cache.h"
#include "db/db.h"
#include "tests/unit/testdir.h"

static void test_etag_match(void **state)
{
    (void)state;
    const char *tag = "\"abc\"";
    assert_true(hc_etag_match("\"abc\"", tag));
    assert_true(hc_etag_match(" W/\"abc\"", tag));
    assert_true(hc_etag_match("\"x\", \"abc\"", tag));
    assert_true(hc_etag_match("*", tag));
    assert_true(hc_etag_match(" * ", tag));
    const char *junk[] = {NULL,       "",     "abc",    "\"abc",      "\"ab\"",
                          "\"abcd\"", "W/",   "*x",     "\"x\" *",    "\"x\";\"abc\"",
                          "\"\"",     ",,,,", "\"x\",", "W/W/\"abc\""};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        assert_false(hc_etag_match(junk[i], tag));
    char big[70000];
    memset(big, '"', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_false(hc_etag_match(big, tag));
    assert_false(hc_etag_match("\"abc\"", NULL));
}

static json_t *names(int n)
{
    json_t *list = json_array();
    for (int i = 1; i <= n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%02d", i);
        json_array_append_new(list, json_pack("{s:s}", "name", name));
    }
    return json_pack("{s:o}", "nodes", list);
}

static const char *first_name(const json_t *body)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(body, "nodes"), 0), "name"));
}

static void test_pages(void **state)
{
    (void)state;
    struct hc_error err = {0};
    struct hc_api_page page = {2, NULL};
    json_t *b = hc_api_page_apply(names(5), "nodes", "name", HC_API_ORDER_BYTES, &page, &err);
    assert_int_equal(json_array_size(json_object_get(b, "nodes")), 2);
    assert_string_equal(json_string_value(json_object_get(b, "next_after")), "n02");
    json_decref(b);
    /* bytes order: a cursor that names no item still finds its place */
    page.after = "n03x";
    b = hc_api_page_apply(names(5), "nodes", "name", HC_API_ORDER_BYTES, &page, &err);
    assert_string_equal(first_name(b), "n04");
    assert_true(json_is_null(json_object_get(b, "next_after")));
    json_decref(b);
    page.after = "zzz";
    b = hc_api_page_apply(names(5), "nodes", "name", HC_API_ORDER_BYTES, &page, &err);
    assert_int_equal(json_array_size(json_object_get(b, "nodes")), 0);
    json_decref(b);
    /* list order: the cursor must name an item */
    page.after = "n02";
    b = hc_api_page_apply(names(5), "nodes", "name", HC_API_ORDER_LIST, &page, &err);
    assert_string_equal(first_name(b), "n03");
    assert_string_equal(json_string_value(json_object_get(b, "next_after")), "n04");
    json_decref(b);
    page.after = "n99";
    assert_null(hc_api_page_apply(names(5), "nodes", "name", HC_API_ORDER_LIST, &page, &err));
    assert_string_equal(err.code, "invalid_argument");
    assert_int_equal(err.status, 400);
    /* exactly a page: no next */
    page.after = NULL;
    page.limit = 5;
    b = hc_api_page_apply(names(5), "nodes", "name", HC_API_ORDER_BYTES, &page, &err);
    assert_true(json_is_null(json_object_get(b, "next_after")));
    json_decref(b);
    /* the maximum at 1,000 items: one page */
    page.limit = HC_API_LIST_DEFAULT;
    b = hc_api_page_apply(names(1000), "nodes", "name", HC_API_ORDER_BYTES, &page, &err);
    assert_int_equal(json_array_size(json_object_get(b, "nodes")), 1000);
    assert_true(json_is_null(json_object_get(b, "next_after")));
    json_decref(b);
}

static void test_reply_cache(void **state)
{
    (void)state;
    struct hc_api_cache *c = hc_api_cache_new();
    char etag[HC_API_ETAG_LEN], got[HC_API_ETAG_LEN];
    struct hc_blob *b = hc_blob_new("{}\n", 3);
    hc_api_etag(b->data, b->len, etag);
    assert_int_equal(strlen(etag), 34);
    hc_api_cache_put(c, "/v1/nodes", 7, etag, b);
    assert_ptr_equal(hc_api_cache_get(c, "/v1/nodes", 7, got), b);
    assert_string_equal(got, etag);
    assert_null(hc_api_cache_get(c, "/v1/nodes", 8, got)); /* the data changed */
    assert_null(hc_api_cache_get(c, "/v1/nodes?limit=1", 7, got));
    /* a key too long is not kept */
    char key[HC_API_CACHE_KEY_MAX + 10];
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    hc_api_cache_put(c, key, 7, etag, b);
    assert_null(hc_api_cache_get(c, key, 7, got));
    /* more keys than entries: the least recently used go, the blob stays alive while kept */
    for (int i = 0; i < HC_API_CACHE_ENTRIES * 2; i++) {
        char k[32];
        snprintf(k, sizeof(k), "/v1/x%d", i);
        hc_api_cache_put(c, k, 1, etag, b);
    }
    assert_null(hc_api_cache_get(c, "/v1/nodes", 7, got));
    assert_non_null(hc_api_cache_get(c, "/v1/x63", 1, got));
    hc_blob_unref(b);
    hc_api_cache_free(c);
}

static void test_counters_invalidate(void **state)
{
    (void)state;
    struct hc_error err = {0};
    char *dir = hc_test_mkdtemp("test_api_cache");
    char path[512];
    snprintf(path, sizeof(path), "%s/db", dir);
    struct hc_db *api_db = hc_db_open(path, &err), *other = hc_db_open(path, &err);
    assert_non_null(api_db);
    assert_non_null(other);
    struct hc_api_cache *c = hc_api_cache_new();
    assert_int_equal(hc_api_cache_refresh(c, api_db, &err), 0);
    int64_t v0 = hc_api_cache_version(c, HC_DEP(EVENTS));

    char text[HC_AUTH_TOKEN_TEXT_MAX];
    assert_int_equal(hc_auth_token_create(other, "viewer", HC_AUTH_ROLE_READONLY, 0, text, &err),
                     0);
    assert_int_equal(hc_api_cache_refresh(c, api_db, &err), 0);
    struct hc_auth_identity who;
    assert_int_equal(hc_auth_verify(api_db, text, &who, &err), 0);
    assert_false(hc_api_token_cached(c, text, &who));
    hc_api_token_remember(c, text, &who);
    assert_true(hc_api_token_cached(c, text, &who));
    assert_string_equal(who.name, "viewer");
    assert_false(hc_api_token_cached(c, "hct1.other", &who));
    /* a write to events by another connection moves the events version, not the tokens one */
    assert_int_equal(
        hc_db_run(other, &err, "INSERT INTO events (ts, type, message) VALUES (1, 't', 'm')", ""),
        1);
    assert_int_equal(hc_api_cache_refresh(c, api_db, &err), 0);
    assert_true(hc_api_cache_version(c, HC_DEP(EVENTS)) > v0);
    assert_true(hc_api_token_cached(c, text, &who));
    /* a revoke by another connection is seen at the next refresh */
    char id[17], kind[8];
    assert_int_equal(hc_auth_token_find(other, "viewer", id, kind, &err), 0);
    assert_int_equal(hc_auth_token_revoke(other, id, &err), 0);
    assert_int_equal(hc_api_cache_refresh(c, api_db, &err), 0);
    assert_false(hc_api_token_cached(c, text, &who));
    assert_int_equal(hc_auth_verify(api_db, text, &who, &err), -1);
    hc_api_cache_free(c);
    hc_db_close(api_db);
    hc_db_close(other);
    hc_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etag_match),
        cmocka_unit_test(test_pages),
        cmocka_unit_test(test_reply_cache),
        cmocka_unit_test(test_counters_invalidate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
