/* Maps an error value to hcctl's exit code from the table of error codes: the one place that
 * decides it. */
#include "cli/exit_codes.h"

int hc_exit_code(const struct hc_error *err)
{
    if (!err || !err->code[0])
        return HC_EXIT_FAILED;
    const struct hc_code *code = hc_code_find(err->code);
    if (code && code->exit_answer != HC_EXIT_FAILED)
        return code->exit_answer;
    if (err->status == 401 || err->status == 403)
        return HC_EXIT_UNAVAILABLE;
    if (err->status == 409)
        return HC_EXIT_REFUSED;
    return HC_EXIT_FAILED;
}

int hc_exit_code_for_operation(const struct hc_error *err)
{
    /* An operation that stopped because acting would have been unsafe was refused, not broken:
     * scripts tell the two apart (DESIGN.md exit code 5). */
    const struct hc_code *code = err ? hc_code_find(err->code) : NULL;
    return code ? code->exit_op : HC_EXIT_FAILED;
}
