/* Unit tests for common/op_state.c: the one list of operation states and "is terminal". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/op_state.h"

static void test_names_and_parse(void **state)
{
    (void)state;
    static const char *const want[] = {"pending",   "running", "paused",
                                       "succeeded", "failed",  "aborted"};
    for (int i = 0; i < HC_OP_STATE_COUNT; i++) {
        assert_string_equal(hc_op_state_names[i], want[i]);
        assert_int_equal(hc_op_state_parse(want[i]), i);
    }
    assert_null(hc_op_state_names[HC_OP_STATE_COUNT]);
    assert_int_equal(hc_op_state_parse("skipped"), -1); /* a step state only */
    assert_int_equal(hc_op_state_parse("Running"), -1);
    assert_int_equal(hc_op_state_parse(""), -1);
    assert_int_equal(hc_op_state_parse(NULL), -1);
}

static void test_terminal(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int op, step;
    } cases[] = {
        {"pending", 0, 0},   {"running", 0, 0}, {"paused", 0, 0},
        {"succeeded", 1, 1}, {"failed", 1, 1},  {"aborted", 1, 1},
        {"skipped", 0, 1},   {"", 0, 0},        {"succeeded ", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (hc_op_state_terminal(cases[i].name) != cases[i].op ||
            hc_op_step_terminal(cases[i].name) != cases[i].step)
            fail_msg("'%s': terminal %d/%d, want %d/%d", cases[i].name,
                     hc_op_state_terminal(cases[i].name), hc_op_step_terminal(cases[i].name),
                     cases[i].op, cases[i].step);
    }
    assert_false(hc_op_state_terminal(NULL));
    assert_false(hc_op_step_terminal(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_parse),
        cmocka_unit_test(test_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
