/* Unit tests for common/error.c (error values and the JSON error shape) and the strict body
 * parser of common/json_util.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/json_util.h"

static void test_set_hint_prefix(void **state)
{
    struct hc_error err;
    hc_error_clear(&err);
    assert_int_equal(hc_error_set(&err, HC_E(CONFLICT), "operation '%s' already runs", "op-7"), -1);
    assert_int_equal(err.status, 409);
    assert_string_equal(err.code, "conflict");
    assert_string_equal(err.message, "operation 'op-7' already runs");
    assert_string_equal(err.hint, "");

    assert_int_equal(hc_error_hint(&err, "see 'hcctl operation show %s'", "op-7"), -1);
    assert_string_equal(err.hint, "see 'hcctl operation show op-7'");

    assert_int_equal(hc_error_prefix(&err, "cannot drain node '%s'", "n3"), -1);
    assert_string_equal(err.message, "cannot drain node 'n3': operation 'op-7' already runs");
    assert_string_equal(err.hint, "see 'hcctl operation show op-7'");

    /* A new set forgets the old hint. */
    hc_error_set(&err, HC_E(NOT_FOUND), "node 'n9' not found");
    assert_string_equal(err.hint, "");

    /* NULL code means internal; NULL err is allowed and still returns -1. */
    hc_error_set(&err, NULL, "boom");
    assert_string_equal(err.code, HC_ERR_INTERNAL);
    assert_int_equal(hc_error_set(NULL, HC_E(INTERNAL), "x"), -1);
    assert_int_equal(hc_error_hint(NULL, "x"), -1);
    assert_int_equal(hc_error_prefix(NULL, "x"), -1);

    hc_error_clear(&err);
    assert_int_equal(err.status, 0);
    assert_string_equal(err.code, "");
    assert_string_equal(err.message, "");
}

static void test_long_message_truncated(void **state)
{
    struct hc_error err;
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    hc_error_set(&err, HC_E(INVALID_ARGUMENT), "%s", big);
    assert_int_equal(strlen(err.message), sizeof(err.message) - 1);
    hc_error_prefix(&err, "ctx");
    assert_int_equal(strlen(err.message), sizeof(err.message) - 1);
    assert_memory_equal(err.message, "ctx: xxx", 8);
}

static void test_to_json_shape(void **state)
{
    struct hc_error err;
    hc_error_set(&err, HC_E(NOT_FOUND), "node 'n9' not found");
    hc_error_hint(&err, "see 'hcctl node list'");
    json_t *j = hc_error_to_json(&err);
    char *text = hc_json_dump(j);
    assert_string_equal(text,
                        "{\"error\":{\"code\":\"not_found\",\"hint\":\"see 'hcctl node list'\","
                        "\"message\":\"node 'n9' not found\"}}");
    free(text);
    json_decref(j);

    /* Without a hint the key is absent, not empty. */
    hc_error_set(&err, HC_E(INVALID_JSON), "body is bad");
    j = hc_error_to_json(&err);
    assert_int_equal(json_object_size(j), 1);
    json_t *inner = json_object_get(j, "error");
    assert_int_equal(json_object_size(inner), 2);
    assert_null(json_object_get(inner, "hint"));
    assert_string_equal(json_string_value(json_object_get(inner, "code")), "invalid_json");
    json_decref(j);

    /* An unset error still renders as internal. */
    hc_error_clear(&err);
    j = hc_error_to_json(&err);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                        "internal");
    json_decref(j);
}

static void test_from_json_roundtrip(void **state)
{
    struct hc_error a, b;
    hc_error_set(&a, HC_E(CONFLICT), "operation 'op-1' runs");
    hc_error_hint(&a, "wait for it");
    json_t *j = hc_error_to_json(&a);
    hc_error_clear(&b);
    assert_int_equal(hc_error_from_json(&b, j, 409), 0);
    assert_int_equal(b.status, 409);
    assert_string_equal(b.code, a.code);
    assert_string_equal(b.message, a.message);
    assert_string_equal(b.hint, a.hint);
    json_decref(j);

    hc_error_set(&a, HC_E(DB), "disk full");
    j = hc_error_to_json(&a);
    hc_error_set_wire(&b, 1, "stale", "stale");
    hc_error_hint(&b, "stale hint");
    assert_int_equal(hc_error_from_json(&b, j, 503), 0);
    assert_int_equal(b.status, 503);
    assert_string_equal(b.code, "db_error");
    assert_string_equal(b.hint, "");
    json_decref(j);
}

static void test_from_json_rejects_other_bodies(void **state)
{
    static const char *bodies[] = {
        "{\"node\":{\"name\":\"n1\"}}",
        "{\"error\":\"just a string\"}",
        "{\"error\":{\"code\":\"x\"}}",
        "{\"error\":{\"message\":\"m\"}}",
        "{\"error\":{\"code\":1,\"message\":\"m\"}}",
        "[{\"error\":{\"code\":\"x\",\"message\":\"m\"}}]",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        json_t *j = json_loads(bodies[i], 0, NULL);
        assert_non_null(j);
        struct hc_error err;
        hc_error_set_wire(&err, 7, "untouched", "untouched");
        if (hc_error_from_json(&err, j, 500) != -1)
            fail_msg("body %s was taken for an error", bodies[i]);
        assert_string_equal(err.code, "untouched");
        json_decref(j);
    }
    struct hc_error err;
    assert_int_equal(hc_error_from_json(&err, NULL, 500), -1);
}

static void test_parse_object(void **state)
{
    struct hc_error err;
    hc_error_clear(&err);
    assert_null(hc_json_parse_object("not json", 8, &err));
    assert_int_equal(err.status, 400);
    assert_string_equal(err.code, HC_ERR_INVALID_JSON);
    assert_non_null(strstr(err.message, "not valid JSON"));

    hc_error_clear(&err);
    assert_null(hc_json_parse_object("[1]", 3, &err));
    assert_int_equal(err.status, 400);
    assert_string_equal(err.code, HC_ERR_INVALID_JSON);
    assert_string_equal(err.message, "body must be a JSON object");

    hc_error_clear(&err);
    json_t *j = hc_json_parse_object("{}", 2, &err);
    assert_non_null(j);
    assert_true(json_is_object(j));
    assert_int_equal(json_object_size(j), 0);
    assert_string_equal(err.code, "");
    json_decref(j);

    /* len bounds the input: "{}garbage" with len 2 is just "{}". */
    j = hc_json_parse_object("{}garbage", 2, &err);
    assert_non_null(j);
    json_decref(j);
    hc_error_clear(&err);
    assert_null(hc_json_parse_object("{}garbage", 9, &err));
    assert_string_equal(err.code, HC_ERR_INVALID_JSON);
    hc_error_clear(&err);
    assert_null(hc_json_parse_object(NULL, 0, &err));
    assert_string_equal(err.code, HC_ERR_INVALID_JSON);
    hc_error_clear(&err);
    assert_null(hc_json_parse_object("{\"a\":1,\"a\":2}", 13, &err));
    assert_string_equal(err.code, HC_ERR_INVALID_JSON);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_hint_prefix),
        cmocka_unit_test(test_long_message_truncated),
        cmocka_unit_test(test_to_json_shape),
        cmocka_unit_test(test_from_json_roundtrip),
        cmocka_unit_test(test_from_json_rejects_other_bodies),
        cmocka_unit_test(test_parse_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
