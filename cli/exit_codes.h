/*
 * hcctl's exit codes: the contract scripts branch on (DESIGN.md "CLI contract", docs/hcctl.md).
 * Never renumber. One function maps an error value (from the controller's JSON error shape or
 * from the transport) to a code, so every command agrees.
 */
#ifndef HC_CLI_EXIT_CODES_H
#define HC_CLI_EXIT_CODES_H

#include "common/error.h"

enum hc_exit {
    HC_EXIT_OK = 0,
    HC_EXIT_FAILED = 1,      /* the command or the operation failed */
    HC_EXIT_USAGE = 2,       /* bad command line, or a disruptive command without --yes */
    HC_EXIT_UNAVAILABLE = 3, /* controller unreachable, TLS failure, 401, 403 */
    HC_EXIT_CHECK = 4,       /* a check ran and found problems */
    HC_EXIT_REFUSED = 5,     /* 409 conflict or an unsafe precondition */
    HC_EXIT_TIMEOUT = 6,     /* transport timeout, or an operation wait that ran out */
};

/* Error code of command-line mistakes found by hcctl itself (never sent by a controller). */
#define HC_CLI_ERR_USAGE "usage"
/* Error code of a check that found problems. */
#define HC_CLI_ERR_CHECK "check_failed"

/* The exit code for an error: by code first (usage, transport codes), then by HTTP status
 * (401/403 -> 3, 409 -> 5), everything else 1. A NULL or empty error is HC_EXIT_FAILED. */
int hc_exit_code(const struct hc_error *err);

/* Exit code of a failed operation from its error code: 5 for refused preconditions (not ok to
 * stop, availability budget, version compatibility, conflict), else 1. */
int hc_exit_code_for_operation(const struct hc_error *err);

#endif
