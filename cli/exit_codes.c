/* Maps an error value to hcctl's exit code: the one place that decides it. */
#include "cli/exit_codes.h"

#include <string.h>

static int code_is(const struct hc_error *err, const char *code)
{
    return strcmp(err->code, code) == 0;
}

int hc_exit_code(const struct hc_error *err)
{
    if (!err || !err->code[0])
        return HC_EXIT_FAILED;
    if (code_is(err, HC_CLI_ERR_USAGE))
        return HC_EXIT_USAGE;
    if (code_is(err, HC_CLI_ERR_CHECK))
        return HC_EXIT_CHECK;
    if (code_is(err, HC_ERR_TIMEOUT))
        return HC_EXIT_TIMEOUT;
    if (code_is(err, HC_ERR_UNREACHABLE) || code_is(err, HC_ERR_TLS))
        return HC_EXIT_UNAVAILABLE;
    if (err->status == 401 || err->status == 403 || code_is(err, HC_ERR_UNAUTHORIZED) ||
        code_is(err, HC_ERR_FORBIDDEN))
        return HC_EXIT_UNAVAILABLE;
    if (err->status == 409 || code_is(err, HC_ERR_CONFLICT))
        return HC_EXIT_REFUSED;
    return HC_EXIT_FAILED;
}

int hc_exit_code_for_operation(const struct hc_error *err)
{
    /* An operation that stopped because acting would have been unsafe was refused, not broken:
     * scripts tell the two apart (DESIGN.md exit code 5). */
    static const char *const refused[] = {"not_ok_to_stop", "unavailable_budget",
                                          "version_incompatible", HC_ERR_CONFLICT, NULL};
    for (size_t i = 0; refused[i]; i++)
        if (code_is(err, refused[i]))
            return HC_EXIT_REFUSED;
    return HC_EXIT_FAILED;
}
