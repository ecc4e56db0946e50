/* Unit tests for controller/api/auth.c against a real SQLite file: API tokens (create, verify,
 * roles, every way a token can be wrong, expiry, what is stored) and one-time join tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/token.h"
#include "common/util.h"
#include "controller/api/auth.h"
#include "db/db.h"
#include "tests/unit/support/support.h"

#define FINGERPRINT "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int setup(void **state)
{
    return hc_test_db_setup(state, "test_auth");
}

static int teardown(void **state)
{
    return hc_test_db_teardown(state);
}

static void create_ok(struct hc_db *db, const char *name, const char *role, int64_t expires,
                      char text[HC_AUTH_TOKEN_TEXT_MAX])
{
    struct hc_error err = {0};
    if (hc_auth_token_create(db, name, role, expires, text, &err) != 0)
        fail_msg("create token '%s': %s", name, err.message);
}

/* Asserts that text is refused with the one 401 unauthorized error. */
static void assert_refused(struct hc_db *db, const char *text)
{
    struct hc_auth_identity who;
    struct hc_error err = {0};
    assert_int_equal(hc_auth_verify(db, text, &who, &err), -1);
    assert_int_equal(err.status, 401);
    assert_string_equal(err.code, HC_ERR_UNAUTHORIZED);
    assert_string_equal(err.message, "invalid or missing API token");
    assert_string_equal(err.hint, "check --token, HCCTL_TOKEN or the config file");
}

static void test_admin_and_readonly_verify(void **state)
{
    struct hc_test_db *f = *state;
    char admin[HC_AUTH_TOKEN_TEXT_MAX], ro[HC_AUTH_TOKEN_TEXT_MAX];
    create_ok(f->db, "admin", HC_AUTH_ROLE_ADMIN, 0, admin);
    create_ok(f->db, "viewer", HC_AUTH_ROLE_READONLY, 0, ro);
    assert_true(strncmp(admin, "hct1.", 5) == 0);
    assert_string_not_equal(admin, ro);

    struct hc_auth_identity who;
    struct hc_error err = {0};
    assert_int_equal(hc_auth_verify(f->db, admin, &who, &err), 0);
    assert_string_equal(who.name, "admin");
    assert_string_equal(who.role, "admin");
    assert_int_equal(hc_auth_verify(f->db, ro, &who, &err), 0);
    assert_string_equal(who.name, "viewer");
    assert_string_equal(who.role, "readonly");
}

static void test_only_the_hash_is_stored(void **state)
{
    struct hc_test_db *f = *state;
    char text[HC_AUTH_TOKEN_TEXT_MAX];
    create_ok(f->db, "admin", HC_AUTH_ROLE_ADMIN, 0, text);
    struct hc_token t;
    assert_int_equal(hc_token_parse(text, HC_TOKEN_API_PREFIX, &t, NULL), 0);
    char hash[65];
    hc_token_hash(&t, hash);
    struct hc_error err = {0};
    json_t *rows = hc_db_query_json(f->db, &err,
                                    "SELECT secret_hash, kind, role, expires_at FROM tokens "
                                    "WHERE id = ?",
                                    "s", t.id);
    assert_non_null(rows);
    assert_int_equal(json_array_size(rows), 1);
    json_t *row = json_array_get(rows, 0);
    assert_string_equal(json_string_value(json_object_get(row, "secret_hash")), hash);
    assert_string_not_equal(hash, t.secret);
    assert_string_equal(json_string_value(json_object_get(row, "kind")), "api");
    assert_true(json_is_null(json_object_get(row, "expires_at")));
    json_decref(rows);
}

static void test_wrong_tokens_refused(void **state)
{
    struct hc_test_db *f = *state;
    char text[HC_AUTH_TOKEN_TEXT_MAX], bad[HC_AUTH_TOKEN_TEXT_MAX];
    create_ok(f->db, "admin", HC_AUTH_ROLE_ADMIN, 0, text);

    /* wrong secret: flip the last hex digit */
    snprintf(bad, sizeof(bad), "%s", text);
    size_t len = strlen(bad);
    bad[len - 1] = bad[len - 1] == '0' ? '1' : '0';
    assert_refused(f->db, bad);

    /* unknown id: flip the first digit of the id, keep the secret */
    snprintf(bad, sizeof(bad), "%s", text);
    bad[5] = bad[5] == '0' ? '1' : '0';
    assert_refused(f->db, bad);

    /* malformed in every shape */
    assert_refused(f->db, NULL);
    assert_refused(f->db, "");
    assert_refused(f->db, "nonsense");
    assert_refused(f->db, "hct1.abc.def");
    snprintf(bad, sizeof(bad), "hcj1%s", text + 4); /* right secret, wrong kind of token */
    assert_refused(f->db, bad);
    snprintf(bad, sizeof(bad), "%s.extra", text);
    assert_refused(f->db, bad);

    /* the genuine token still works after all that */
    struct hc_auth_identity who;
    assert_int_equal(hc_auth_verify(f->db, text, &who, NULL), 0);
}

static void test_expired_token_refused(void **state)
{
    struct hc_test_db *f = *state;
    char expired[HC_AUTH_TOKEN_TEXT_MAX], fresh[HC_AUTH_TOKEN_TEXT_MAX];
    create_ok(f->db, "old", HC_AUTH_ROLE_ADMIN, hc_now_ms() - 1000, expired);
    create_ok(f->db, "new", HC_AUTH_ROLE_ADMIN, hc_now_ms() + 60000, fresh);
    assert_refused(f->db, expired);
    struct hc_auth_identity who;
    assert_int_equal(hc_auth_verify(f->db, fresh, &who, NULL), 0);
    assert_string_equal(who.name, "new");
}

static void test_create_refusals(void **state)
{
    struct hc_test_db *f = *state;
    char text[HC_AUTH_TOKEN_TEXT_MAX];
    struct hc_error err = {0};
    create_ok(f->db, "ops", HC_AUTH_ROLE_READONLY, 0, text);
    assert_int_equal(hc_auth_token_create(f->db, "ops", HC_AUTH_ROLE_ADMIN, 0, text, &err), -1);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.code, HC_ERR_CONFLICT);
    assert_int_equal(hc_auth_token_create(f->db, "x", "root", 0, text, &err), -1);
    assert_int_equal(err.status, 400);
    assert_int_equal(hc_auth_token_create(f->db, "", HC_AUTH_ROLE_ADMIN, 0, text, &err), -1);
    assert_int_equal(err.status, 400);
}

static void test_bearer_header(void **state)
{
    const char *tok = "hct1.0123456789abcdef.00";
    char header[128];
    snprintf(header, sizeof(header), "Bearer %s", tok);
    assert_string_equal(hc_auth_bearer(header), tok);
    snprintf(header, sizeof(header), "bearer   %s", tok);
    assert_string_equal(hc_auth_bearer(header), tok);
    assert_null(hc_auth_bearer(NULL));
    assert_null(hc_auth_bearer("Basic abc"));
    assert_null(hc_auth_bearer("Bearer "));
    assert_null(hc_auth_bearer(tok));
}

static void join_create_ok(struct hc_db *db, int64_t ttl_s, struct hc_join_token *jt)
{
    struct hc_error err = {0};
    if (hc_auth_join_create(db, FINGERPRINT, ttl_s, "admin", NULL, jt, &err) != 0)
        fail_msg("join create: %s", err.message);
}

static int consume(struct hc_db *db, const char *text, const char *by, struct hc_error *err)
{
    if (hc_db_begin(db, err) != 0)
        return -2;
    struct hc_join_binding bind;
    int rc = hc_auth_join_consume(db, text, by, &bind, err);
    if (rc == 0 && hc_db_commit(db, err) != 0)
        return -2;
    if (rc != 0)
        hc_db_rollback(db);
    return rc;
}

static void assert_join_refused(struct hc_db *db, const char *text)
{
    struct hc_error err = {0};
    assert_int_equal(consume(db, text, "n9", &err), -1);
    assert_int_equal(err.status, 401);
    assert_string_equal(err.code, HC_ERR_TOKEN_INVALID);
    assert_string_equal(err.message, "join token is invalid, used or expired");
}

static void test_join_token_once(void **state)
{
    struct hc_test_db *f = *state;
    struct hc_join_token jt;
    join_create_ok(f->db, 600, &jt);
    assert_true(strncmp(jt.text, "hcj1.", 5) == 0);
    assert_true(strstr(jt.text, jt.id) != NULL);
    assert_true(jt.expires_at_ms > hc_now_ms() + 590000);
    assert_int_equal(hc_auth_join_check_format(jt.text, NULL), 0);

    /* a rolled-back enrollment leaves the token usable */
    struct hc_error err = {0};
    assert_int_equal(hc_db_begin(f->db, &err), 0);
    struct hc_join_binding bind;
    assert_int_equal(hc_auth_join_consume(f->db, jt.text, "n1", &bind, &err), 0);
    assert_string_equal(bind.address, "");
    hc_db_rollback(f->db);

    assert_int_equal(consume(f->db, jt.text, "n1", &err), 0);
    assert_join_refused(f->db, jt.text);
    json_t *rows =
        hc_db_query_json(f->db, &err, "SELECT used_by FROM tokens WHERE id = ?", "s", jt.id);
    assert_non_null(rows);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rows, 0), "used_by")),
                        "n1");
    json_decref(rows);
}

static void test_join_token_refusals(void **state)
{
    struct hc_test_db *f = *state;
    struct hc_join_token jt, expired;
    join_create_ok(f->db, 600, &jt);
    join_create_ok(f->db, 600, &expired);
    struct hc_error err = {0};
    assert_int_equal(hc_db_run(f->db, &err, "UPDATE tokens SET expires_at = ? WHERE id = ?", "is",
                               hc_now_ms() - 1, expired.id),
                     1);
    assert_join_refused(f->db, expired.text);

    char bad[HC_AUTH_TOKEN_TEXT_MAX];
    snprintf(bad, sizeof(bad), "%s", jt.text);
    char *secret = bad + 5 + 16 + 1;
    secret[0] = secret[0] == '0' ? '1' : '0';
    assert_join_refused(f->db, bad);
    assert_join_refused(f->db, "hcj1.nonsense");
    assert_int_equal(hc_auth_join_check_format("hcj1.nonsense", &err), -1);
    assert_string_equal(err.code, HC_ERR_TOKEN_INVALID);

    /* an API token is not a join token, even with a valid secret */
    char api[HC_AUTH_TOKEN_TEXT_MAX];
    create_ok(f->db, "admin", HC_AUTH_ROLE_ADMIN, 0, api);
    assert_join_refused(f->db, api);
    /* the untouched token still works */
    assert_int_equal(consume(f->db, jt.text, "n2", &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admin_and_readonly_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_the_hash_is_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_tokens_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_token_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_refusals, setup, teardown),
        cmocka_unit_test(test_bearer_header),
        cmocka_unit_test_setup_teardown(test_join_token_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_token_refusals, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
