/*
 * hcctl's exit codes: the contract scripts branch on (DESIGN.md "CLI contract", docs/hcctl.md).
 * The numbers (enum hc_exit) and each error code's exit codes live in the table of error codes
 * (common/error_codes.h); these two functions read it, so every command agrees.
 */
#ifndef HC_CLI_EXIT_CODES_H
#define HC_CLI_EXIT_CODES_H

#include "common/error.h"

/* The exit code for an error answering a request (or found by hcctl itself): the code's
 * exit_answer in the table; a code that says no more than "failed" there, or one this build
 * does not know, goes by the HTTP status it came with (401/403 -> 3, 409 -> 5), else 1. A NULL
 * or empty error is HC_EXIT_FAILED. */
int hc_exit_code(const struct hc_error *err);

/* Exit code of a failed operation from its error code: the code's exit_op in the table (5 for
 * the refusals an operation makes to stay safe), 1 for a code this build does not know. */
int hc_exit_code_for_operation(const struct hc_error *err);

#endif
