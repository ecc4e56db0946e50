/* Unit tests for the table of error codes (common/error_codes.h): one row per wire string, a
 * real HTTP status and valid hcctl exit codes in every row, docs/api.md listing every row as it
 * is, and the exit-code functions of cli/exit_codes.c reading it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/exit_codes.h"
#include "common/error.h"

static int exit_valid(int code)
{
    return code >= HC_EXIT_FAILED && code <= HC_EXIT_TIMEOUT;
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < HC_CODE_COUNT; i++) {
        const struct hc_code *c = &hc_codes[i];
        if (!c->wire || !c->wire[0] ||
            strspn(c->wire, "abcdefghijklmnopqrstuvwxyz_") != strlen(c->wire) ||
            strlen(c->wire) >= 48)
            fail_msg("row %zu (%s): wire string '%s' is not short snake_case", i, c->name,
                     c->wire ? c->wire : "");
        if (c->status < 400 || c->status > 599)
            fail_msg("%s: status %d is not an HTTP error status", c->wire, c->status);
        if (!exit_valid(c->exit_answer) || !exit_valid(c->exit_op))
            fail_msg("%s: exit codes %d/%d are not hcctl's", c->wire, c->exit_answer, c->exit_op);
        if (c->exit_op != HC_EXIT_FAILED && c->exit_op != HC_EXIT_REFUSED)
            fail_msg("%s: an operation ends in 1 or 5, not %d", c->wire, c->exit_op);
        if (!c->meaning || !c->meaning[0])
            fail_msg("%s: no meaning", c->wire);
        for (size_t j = 0; j < i; j++)
            if (strcmp(hc_codes[j].wire, c->wire) == 0)
                fail_msg("'%s' is in the table twice (%s, %s)", c->wire, hc_codes[j].name, c->name);
        assert_ptr_equal(hc_code_find(c->wire), c);
    }
    assert_null(hc_code_find("no_such_code"));
    assert_null(hc_code_find(NULL));
}

/* The source tree's docs/api.md, found from this file's path (no build setting needed). */
static char *read_api_doc(void)
{
    char path[4096];
    const char *self = __FILE__, *cut = strstr(self, "tests/unit/");
    assert_non_null(cut);
    snprintf(path, sizeof(path), "%.*sdocs/api.md", (int)(cut - self), self);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open '%s'", path);
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof(doc) - 1, f);
    fclose(f);
    doc[n] = '\0';
    return doc;
}

static void test_doc_lists_every_code(void **state)
{
    (void)state;
    const char *doc = read_api_doc();
    for (size_t i = 0; i < HC_CODE_COUNT; i++) {
        const struct hc_code *c = &hc_codes[i];
        char row[512];
        snprintf(row, sizeof(row), "\n| `%s` | %d | %d | %d | %s |\n", c->wire, c->status,
                 c->exit_answer, c->exit_op, c->meaning);
        if (!strstr(doc, row))
            fail_msg("docs/api.md \"Error codes\" lacks the row%s(regenerate it from "
                     "common/error_codes.h)",
                     row);
    }
}

static void test_set_takes_the_row(void **state)
{
    (void)state;
    struct hc_error err;
    hc_error_set(&err, HC_E(NOT_OK_TO_STOP), "node '%s' may not stop", "n1");
    assert_string_equal(err.code, "not_ok_to_stop");
    assert_int_equal(err.status, 409);
    assert_int_equal(hc_exit_code(&err), HC_EXIT_REFUSED);
    assert_int_equal(hc_exit_code_for_operation(&err), HC_EXIT_REFUSED);

    hc_error_set(&err, HC_E(HOST_KEY_UNKNOWN), "x");
    assert_int_equal(hc_exit_code(&err), HC_EXIT_REFUSED);
    assert_int_equal(hc_exit_code_for_operation(&err), HC_EXIT_FAILED);

    /* No HTTP answer: status 0, the exit code still from the code. */
    hc_error_set_transport(&err, HC_E(UNREACHABLE), "cannot reach '%s'", "u");
    assert_int_equal(err.status, 0);
    assert_int_equal(hc_exit_code(&err), HC_EXIT_UNAVAILABLE);

    /* A peer's code we do not know keeps the status it came with, which decides. */
    hc_error_set_wire(&err, 409, "newer_refusal", "x");
    assert_int_equal(err.status, 409);
    assert_int_equal(hc_exit_code(&err), HC_EXIT_REFUSED);
    assert_int_equal(hc_exit_code_for_operation(&err), HC_EXIT_FAILED);
    hc_error_set_wire(&err, 403, "newer_denial", "x");
    assert_int_equal(hc_exit_code(&err), HC_EXIT_UNAVAILABLE);
    hc_error_set_wire(&err, 500, NULL, "x");
    assert_string_equal(err.code, HC_ERR_INTERNAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_doc_lists_every_code),
        cmocka_unit_test(test_set_takes_the_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
