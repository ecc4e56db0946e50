/* Unit tests for common/token.c: generation, rendering, strict parsing and hashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/token.h"
#include "common/util.h"

#define FPR "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID16 "00112233aabbccdd"
#define SECRET64 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static void test_api_roundtrip(void **state)
{
    struct hc_token t, back;
    char text[200];
    struct hc_error err = {0};
    assert_int_equal(hc_token_generate(&t, HC_TOKEN_API_PREFIX, NULL), 0);
    assert_string_equal(t.prefix, "hct1");
    assert_int_equal(strlen(t.id), 16);
    assert_int_equal(strlen(t.secret), 64);
    assert_int_equal(strspn(t.id, "0123456789abcdef"), 16);
    assert_int_equal(strspn(t.secret, "0123456789abcdef"), 64);
    assert_string_equal(t.ca_fingerprint, "");
    hc_token_format(&t, text, sizeof(text));
    assert_int_equal(strlen(text), 4 + 1 + 16 + 1 + 64);
    char want[200];
    snprintf(want, sizeof(want), "hct1.%s.%s", t.id, t.secret);
    assert_string_equal(text, want);
    assert_int_equal(hc_token_parse(text, HC_TOKEN_API_PREFIX, &back, &err), 0);
    assert_string_equal(back.prefix, t.prefix);
    assert_string_equal(back.id, t.id);
    assert_string_equal(back.secret, t.secret);
    assert_string_equal(back.ca_fingerprint, "");
}

static void test_join_roundtrip(void **state)
{
    struct hc_token t, back;
    char text[200];
    struct hc_error err = {0};
    assert_int_equal(hc_token_generate(&t, HC_TOKEN_JOIN_PREFIX, FPR), 0);
    assert_string_equal(t.prefix, "hcj1");
    assert_string_equal(t.ca_fingerprint, FPR);
    hc_token_format(&t, text, sizeof(text));
    char want[200];
    snprintf(want, sizeof(want), "hcj1.%s.%s.%s", t.id, t.secret, FPR);
    assert_string_equal(text, want);
    assert_int_equal(hc_token_parse(text, HC_TOKEN_JOIN_PREFIX, &back, &err), 0);
    assert_string_equal(back.id, t.id);
    assert_string_equal(back.secret, t.secret);
    assert_string_equal(back.ca_fingerprint, FPR);
}

static void test_generate_refuses_bad_input(void **state)
{
    struct hc_token t;
    assert_int_equal(hc_token_generate(&t, "hcx1", NULL), -1);
    assert_int_equal(hc_token_generate(&t, HC_TOKEN_JOIN_PREFIX, NULL), -1);
    assert_int_equal(hc_token_generate(&t, HC_TOKEN_JOIN_PREFIX, "abc"), -1);
    /* An uppercase fingerprint would make a token that its own parser refuses. */
    assert_int_equal(
        hc_token_generate(&t, HC_TOKEN_JOIN_PREFIX,
                          "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"),
        -1);
}

static void expect_invalid(const char *text, const char *prefix)
{
    struct hc_token t;
    memset(&t, 0x5a, sizeof(t));
    struct hc_error err = {0};
    if (hc_token_parse(text, prefix, &t, &err) != -1)
        fail_msg("token '%s' accepted for prefix %s", text ? text : "(null)", prefix);
    assert_int_equal(err.status, 401);
    assert_string_equal(err.code, HC_ERR_TOKEN_INVALID);
    assert_string_equal(err.message, "malformed token");
    /* The secret part must never be echoed back. */
    assert_null(strstr(err.message, SECRET64));
    assert_null(strstr(err.hint, SECRET64));
    assert_int_equal(t.prefix[0], 0x5a); /* output untouched on failure */
}

static void test_parse_strict(void **state)
{
    const char *api = HC_TOKEN_API_PREFIX;
    const char *join = HC_TOKEN_JOIN_PREFIX;
    struct hc_token t;
    struct hc_error err = {0};
    /* The fixed strings used below are valid, so each refusal comes from its one defect. */
    assert_int_equal(hc_token_parse("hct1." ID16 "." SECRET64, api, &t, &err), 0);
    assert_int_equal(hc_token_parse("hcj1." ID16 "." SECRET64 "." FPR, join, &t, &err), 0);

    expect_invalid("", api);
    expect_invalid(NULL, api);
    expect_invalid("hct1", api);
    expect_invalid("hct1.", api);
    expect_invalid("hcj1." ID16 "." SECRET64, api);          /* wrong prefix */
    expect_invalid("hct1." ID16 "." SECRET64 "." FPR, join); /* wrong prefix */
    expect_invalid("hct2." ID16 "." SECRET64, api);          /* wrong version */
    expect_invalid("HCT1." ID16 "." SECRET64, api);          /* prefix case */
    expect_invalid("hct1." ID16 "0." SECRET64, api);         /* id too long */
    expect_invalid("hct1.0112233aabbccdd." SECRET64, api);   /* id too short */
    expect_invalid("hct1." ID16 "." SECRET64 "0", api);      /* secret too long */
    expect_invalid("hct1." ID16 "." SECRET64 "\n", api);     /* trailing newline */
    expect_invalid("hct1." ID16 ".ffeeddccbbaa99887766554433221100ffeeddccbbaa9988776655443322110",
                   api);                                    /* secret too short */
    expect_invalid("hct1.00112233AABBCCDD." SECRET64, api); /* uppercase id */
    expect_invalid("hct1." ID16 ".FFeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
                   api);                                           /* uppercase secret */
    expect_invalid("hct1." ID16 "." SECRET64 "." FPR, api);        /* extra part */
    expect_invalid("hct1." ID16 "." SECRET64 ".", api);            /* trailing dot */
    expect_invalid("hcj1." ID16 "." SECRET64, join);               /* missing part */
    expect_invalid("hcj1." ID16 "." SECRET64 ".", join);           /* empty part */
    expect_invalid("hcj1." ID16 "." SECRET64 "." FPR ".00", join); /* extra part */
    expect_invalid("hcj1." ID16 "." SECRET64 ".0123456789ABCDEF0123456789abcdef0123456789abcdef"
                   "0123456789abcdef",
                   join);                                   /* uppercase fingerprint */
    expect_invalid("hct1.0011223g aabbccd." SECRET64, api); /* non-hex id */
    expect_invalid("hct1.." ID16 "." SECRET64, api);        /* empty part */
    expect_invalid("hct1." ID16 "." SECRET64, "hcx1");      /* unknown expected prefix */
}

static void test_hash(void **state)
{
    struct hc_token a, b;
    char ha[65], hb[65], want[65];
    assert_int_equal(hc_token_generate(&a, HC_TOKEN_API_PREFIX, NULL), 0);
    assert_int_equal(hc_token_generate(&b, HC_TOKEN_API_PREFIX, NULL), 0);
    assert_string_not_equal(a.id, b.id);
    assert_string_not_equal(a.secret, b.secret);
    hc_token_hash(&a, ha);
    hc_token_hash(&b, hb);
    hc_sha256_hex(a.secret, strlen(a.secret), want);
    assert_string_equal(ha, want);
    assert_string_not_equal(ha, hb);
    assert_int_equal(strlen(ha), 64);
    /* Known answer: the hash covers exactly the 64 hex characters of the secret. */
    struct hc_token k;
    struct hc_error err = {0};
    assert_int_equal(hc_token_parse("hct1." ID16 "." SECRET64, HC_TOKEN_API_PREFIX, &k, &err), 0);
    hc_token_hash(&k, ha);
    hc_sha256_hex(SECRET64, 64, want);
    assert_string_equal(ha, want);
    /* The id and prefix are not part of the stored hash. */
    hc_sha256_hex("hct1." ID16 "." SECRET64, strlen("hct1." ID16 "." SECRET64), hb);
    assert_string_not_equal(ha, hb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_roundtrip),
        cmocka_unit_test(test_join_roundtrip),
        cmocka_unit_test(test_generate_refuses_bad_input),
        cmocka_unit_test(test_parse_strict),
        cmocka_unit_test(test_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
